"use strict";
// The page's own words in English and Korean (the seed posts' readers). The model's languages are not
// affected. t(key, {name: value}) fills {name}; applyLanguage() rewrites every [data-i18n] element.
const TEXT = {
  en: {
    title: "aiayn: look inside attention",
    lead: "Type a sentence, translate it, then look at every attention head: which words each word looks at, and how the numbers are made.",
    "model.title": "The loaded model",
    "model.examples": "Try an example:",
    "f.arch": "architecture", "f.langs": "languages", "f.data": "trained on", "f.layers": "layers (encoder + decoder)",
    "f.heads": "heads per layer", "f.dims": "d_model / d_k", "f.params": "parameters",
    "input.label": "Sentence in the source language",
    "input.placeholder": "Type a sentence in the source language (Enter translates)",
    beam: "beam", translate: "Translate", translating: "translating…", computing: "computing…",
    "result.title": "Translation",
    kind: "kind", layer: "layer", head: "head", mean: "mean",
    "kind.encoder_self": "encoder self-attention",
    "kind.decoder_self": "decoder self-attention (masked)",
    "kind.cross": "encoder–decoder (cross) attention",
    "kind.rnn": "RNN decoder attention over the encoder states (seed 002)",
    "explain.encoder_self": "Each source token (row) looks at every source token (column), itself included (§3.2.2, §3.3). Rows sum to 1.",
    "explain.decoder_self": "Each decoder step (row) may look only at the target tokens already produced: the future is masked with −∞ before the softmax, so its weight is exactly 0 (§3.2.3, hatched cells).",
    "explain.cross": "Each decoder step (row) looks at the source tokens (columns): queries come from the decoder, keys and values from the encoder's output (§3.2.3). An RNN model has only this kind (seed 002).",
    words: "words", "words.rule": "Word view: a word starts at a piece beginning with ▁ (SentencePiece's space mark); the pieces after it (shown ·like·this) join it. Columns of a word are summed (rows still sum to 1); rows of a word are averaged.",
    scale: "colour scale", "scale.global": "global (0–1)", "scale.row": "per row (row max = darkest)",
    numbers: "show numbers",
    "overview.title": "Every head at once",
    "overview.explain": "One thumbnail per layer (rows) and head (columns) of this kind, and the mean of each layer. Multi-head attention runs these heads side by side and concatenates their outputs (§3.2.2). Click one to open it.",
    "matrix.title": "Attention matrix",
    "axis.keys": "keys → (what is looked at)", "axis.queries": "queries ↓ (who is looking)",
    "axis.decoder_row": "row = decoder input → the token it predicts",
    "legend.masked": "masked: −∞ → 0",
    "lines.title": "Lines: who looks at whom",
    "lines.explain": "Left: queries; right: keys. A line's strength is the weight. Hover, focus or click a token on the left (or use ↑/↓ in the matrix); a click opens its step view. Press head buttons to overlay any heads of this layer, each in its own colour; with none pressed the lines follow the matrix.",
    "lines.overlay": "all heads",
    "lines.heads": "Overlay heads:",
    "lines.heads_n": "heads",
    "lines.as_matrix": "(as in the matrix)",
    "step.title": "Step by step",
    "step.empty": "Click a row label of the matrix (or focus it and press Enter) to see how that row's weights are computed.",
    "step.mean": "The step view shows one head: “mean” has no single q, K and V. Choose a layer and a head.",
    "step.words": "The step view works on subword pieces: turn the word view off.",
    "step.for": "{kind}, layer {layer}, head {head}, query “{query}” (row {row})",
    "step.rnn_for": "decoder step t = {row}, input “{query}”",
    "ready": "Translate a sentence to see its attention.",
    "err.empty": "Type a sentence first.",
    "err.long": "The text is {n} characters; this server takes at most {max}.",
    "err.network": "The server cannot be reached. Is `aiayn serve` still running? Reload the page when it is.",
    "err.status": "The server answered {status}; try again.",
    "err.json": "The server's answer could not be read; try again.",
    "warn.unk": "{n} piece(s) of your text are unknown to this model ({unk}); it was trained on {data}. Try an example.",
    "warn.truncated": "The translation stopped at the server's length limit.",
    "top": "looks most at",
    lang: "한국어",
  },
  ko: {
    title: "aiayn: 어텐션 들여다보기",
    lead: "문장을 입력해 번역한 뒤, 모든 어텐션 헤드를 살펴보세요. 각 단어가 어떤 단어를 보는지, 그 숫자가 어떻게 만들어지는지 보여 줍니다.",
    "model.title": "불러온 모델",
    "model.examples": "예문:",
    "f.arch": "구조", "f.langs": "언어", "f.data": "학습 데이터", "f.layers": "층 (인코더 + 디코더)",
    "f.heads": "층당 헤드 수", "f.dims": "d_model / d_k", "f.params": "파라미터 수",
    "input.label": "원문(소스 언어) 문장",
    "input.placeholder": "소스 언어로 문장을 입력하세요 (Enter: 번역)",
    beam: "빔", translate: "번역", translating: "번역 중…", computing: "계산 중…",
    "result.title": "번역 결과",
    kind: "종류", layer: "층", head: "헤드", mean: "평균",
    "kind.encoder_self": "인코더 셀프 어텐션",
    "kind.decoder_self": "디코더 셀프 어텐션 (마스킹)",
    "kind.cross": "인코더–디코더 (크로스) 어텐션",
    "kind.rnn": "RNN 디코더가 인코더 은닉 상태를 보는 어텐션 (seed 002)",
    "explain.encoder_self": "각 소스 토큰(행)이 자기 자신을 포함한 모든 소스 토큰(열)을 봅니다 (§3.2.2, §3.3). 각 행의 합은 1입니다.",
    "explain.decoder_self": "각 디코더 시점(행)은 이미 만든 타깃 토큰만 볼 수 있습니다. 미래 위치는 소프트맥스 전에 −∞로 마스킹되어 가중치가 정확히 0이 됩니다 (§3.2.3, 빗금 친 칸).",
    "explain.cross": "각 디코더 시점(행)이 소스 토큰(열)을 봅니다. 쿼리는 디코더에서, 키와 값은 인코더 출력에서 옵니다 (§3.2.3). RNN 모델에는 이 종류만 있습니다 (seed 002).",
    words: "단어", "words.rule": "단어 보기: ▁(SentencePiece의 띄어쓰기 표시)로 시작하는 조각에서 단어가 시작되고, 뒤따르는 조각(·이렇게 표시)이 붙습니다. 한 단어의 열은 더하고(행의 합은 여전히 1), 행은 평균합니다.",
    scale: "색 척도", "scale.global": "전체 (0–1)", "scale.row": "행별 (행 최댓값 = 가장 진함)",
    numbers: "숫자 표시",
    "overview.title": "모든 헤드 한눈에",
    "overview.explain": "이 종류의 층(행) × 헤드(열)마다 작은 그림 하나, 그리고 층별 평균. 멀티 헤드 어텐션은 이 헤드들을 나란히 계산해 출력을 이어 붙입니다 (§3.2.2). 클릭하면 그 헤드가 열립니다.",
    "matrix.title": "어텐션 행렬",
    "axis.keys": "키 → (보이는 쪽)", "axis.queries": "쿼리 ↓ (보는 쪽)",
    "axis.decoder_row": "행 = 디코더 입력 → 그 시점이 예측하는 토큰",
    "legend.masked": "마스킹: −∞ → 0",
    "lines.title": "선: 누가 누구를 보는가",
    "lines.explain": "왼쪽: 쿼리, 오른쪽: 키. 선의 진하기가 가중치입니다. 왼쪽 토큰에 마우스를 올리거나 포커스/클릭하세요 (행렬에서 ↑/↓도 됩니다). 클릭하면 단계별 계산이 열립니다. 헤드 버튼을 눌러 이 층의 헤드를 골라 겹쳐 보세요. 헤드마다 색이 다르며, 아무것도 누르지 않으면 행렬과 같은 헤드를 보여 줍니다.",
    "lines.overlay": "모든 헤드",
    "lines.heads": "겹쳐 볼 헤드:",
    "lines.heads_n": "헤드",
    "lines.as_matrix": "(행렬과 같음)",
    "step.title": "단계별 계산",
    "step.empty": "행렬의 행 이름을 클릭하면 (또는 포커스 후 Enter) 그 행의 가중치가 어떻게 계산되는지 보여 줍니다.",
    "step.mean": "단계별 보기는 헤드 하나를 보여 줍니다. “평균”에는 하나의 q, K, V가 없습니다. 층과 헤드를 고르세요.",
    "step.words": "단계별 보기는 서브워드 조각 단위입니다. 단어 보기를 끄세요.",
    "step.for": "{kind}, {layer}층, 헤드 {head}, 쿼리 “{query}” ({row}행)",
    "step.rnn_for": "디코더 시점 t = {row}, 입력 “{query}”",
    "ready": "문장을 번역하면 어텐션이 보입니다.",
    "err.empty": "먼저 문장을 입력하세요.",
    "err.long": "텍스트가 {n}자입니다. 이 서버는 최대 {max}자까지 받습니다.",
    "err.network": "서버에 연결할 수 없습니다. `aiayn serve`가 실행 중인지 확인하고 페이지를 새로 고치세요.",
    "err.status": "서버가 {status}로 응답했습니다. 다시 시도하세요.",
    "err.json": "서버 응답을 읽을 수 없습니다. 다시 시도하세요.",
    "warn.unk": "입력의 {n}개 조각을 이 모델이 모릅니다 ({unk}). 이 모델은 {data}로 학습되었습니다. 예문을 써 보세요.",
    "warn.truncated": "번역이 서버의 길이 제한에서 멈췄습니다.",
    "top": "가장 많이 보는 곳",
    lang: "English",
  },
};
let LANG = localStorage.getItem("aiayn-lang") === "ko" ? "ko" : "en";

function t(key, vars = {}) {
  const text = TEXT[LANG][key] ?? TEXT.en[key] ?? key;
  return text.replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

function applyLanguage() {
  document.documentElement.lang = LANG;
  document.title = t("title");
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll("[data-i18n-label]")) el.setAttribute("aria-label", t(el.dataset.i18nLabel));
}

function toggleLanguage() {
  LANG = LANG === "en" ? "ko" : "en";
  localStorage.setItem("aiayn-lang", LANG);
  applyLanguage();
}
