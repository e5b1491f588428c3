// 페이지의 한국어 문구 (i18n.js). 키는 i18n_en.js와 같습니다.
export const TEXT_KO = {
  title: "aiayn: 어텐션 들여다보기",
  lead: "문장을 입력해 번역한 뒤, 모든 어텐션 헤드를 살펴보세요. 각 단어가 어떤 단어를 보는지, 그 숫자가 어떻게 만들어지는지 보여 줍니다.",
  "model.title": "불러온 모델", "model.examples": "예문:",
  "f.arch": "구조", "f.langs": "언어", "f.data": "학습 데이터", "f.layers": "층 수, 인코더 + 디코더(N)",
  "f.heads": "층마다 헤드 수(h)", "f.d_model": "모델 차원(d_model)", "f.d_hidden": "은닉 상태 크기(d_model)",
  "f.d_k": "헤드마다 쿼리·키 차원(d_k)", "f.dff": "피드 포워드 은닉층 차원(d_ff)", "f.params": "파라미터 수",
  "f.probe": "보조 손실",
  "f.probe_value": "인코더가 \"it\" 자리에 내놓는 출력으로 독일어 대명사(er/sie/es)도 맞히도록 함께 학습했습니다" +
    "(가중치 {weight}). 어느 헤드가 어디를 볼지는 알려 주지 않았습니다",
  "f.steps": "학습 스텝", "f.bleu": "검증 BLEU", "f.imported": "가져온 모델", "f.unknown": "기록 없음",
  "f.post_ln": "post-LN, 논문과 같음", "f.pre_ln": "pre-LN",
  "f.decode": "디코딩", "f.decode_value": "빔 {beam}, 길이 페널티 α = {alpha}",
  "f.transformer": "트랜스포머 ({norm})", "f.rnn": "RNN seq2seq: {cell}, {decoder} 어텐션, {score} 스코어 함수",
  "lang.en": "영어", "lang.de": "독일어", "lang.fr": "프랑스어", "lang.cs": "체코어",
  "input.label": "{lang} 문장 (소스 언어)",
  "input.placeholder": "소스 언어로 문장을 입력하세요 (Enter: 번역)",
  "target.label": "타깃 문장 (선택): 모델의 번역 대신 이 번역의 어텐션을 봅니다 (교사 강요, teacher forcing)",
  "target.placeholder": "비워 두면 모델이 직접 번역합니다",
  "decode.note": "모델의 설정: 빔 {beam}, 길이 페널티 α = {alpha}",
  beam: "빔", translate: "번역", translating: "번역 중…", computing: "계산 중…",
  "result.own": "모델의 번역 (빔 서치, 점수 {score}):",
  "result.forced": "주어진 타깃", "result.forced_long": "주어진 타깃 문장의 어텐션 (교사 강요):",
  "postedit.hint": "위의 확률 줄에서 토큰을 누르면 그 자리에서 모델이 고려한 다른 후보가 보입니다. 하나를 고르면 그 뒤를 다시 번역합니다.",
  "postedit.token": "{token}: 다른 후보 보기",
  "postedit.title": "{n}번째 자리 (지금 “{token}”): 모델이 가장 그럴듯하게 본 토큰, p(토큰 | 소스, 앞의 번역)",
  "postedit.pick": "여기까지의 번역을 “{prefix}”로 두고 나머지를 다시 번역",
  "postedit.not_exact": "이 텍스트는 다른 조각으로 나뉘므로 그대로 번역의 시작이 될 수 없습니다",
  "postedit.end": "번역을 여기서 끝냅니다 (그 앞의 텍스트를 고르세요)",
  "postedit.prefix": "번역의 시작:", "postedit.clear": "지우기",
  "timeline.title": "학습하며 변한 어텐션",
  "timeline.explain":
    "이 모델의 학습 실행이 검증 때마다 남긴, 고정된 검증 문장 몇 개(참조 번역과 함께)의 어텐션입니다. 슬라이더를 움직이면 크로스 어텐션이 정렬이 되어 가는 모습을 볼 수 " +
    "있습니다.",
  "timeline.sentence": "문장", "timeline.slider": "학습 스텝",
  "timeline.step": "스텝 {step} (검증 {of}번 중 {n}번째)",
  "result.probs": "출력 토큰마다의 확률:",
  "nbest.title": "빔의 다른 후보 (클릭하면 그 후보의 어텐션을 봅니다)",
  "download.png": "PNG로 저장", "download.json": "JSON으로 저장",
  kind: "종류", layer: "층", head: "헤드", mean: "평균", "layer.n": "{n}층", "layer.mean": "층 평균",
  "kind.encoder_self": "인코더 셀프 어텐션", "kind.decoder_self": "디코더 셀프 어텐션 (마스킹)",
  "kind.cross": "인코더–디코더 어텐션", "kind.rnn": "RNN 디코더가 인코더 은닉 상태를 보는 어텐션",
  "explain.encoder_self": "각 소스 토큰(행)이 자기 자신을 포함한 모든 소스 토큰(열)을 봅니다 (§3.2.2, §3.3). 각 행의 합은 1입니다.",
  "explain.decoder_self":
    "각 디코더 시점(행)은 이미 만든 타깃 토큰만 볼 수 있습니다. 미래 위치는 소프트맥스 전에 −∞로 마스킹되어 가중치가 정확히 0이 됩니다 (§3.2.3, 빗금 친 칸).",
  "explain.cross": "각 디코더 시점(행)이 소스 토큰(열)을 봅니다. 쿼리는 디코더에서, 키와 밸류는 인코더 출력에서 옵니다 (§3.2.3). RNN 모델에는 이 종류만 있습니다.",
  words: "단어",
  "words.rule":
    "단어 보기: ▁(SentencePiece의 띄어쓰기 표시)로 시작하는 조각에서 단어가 시작되고, 뒤따르는 조각(·이렇게 표시)이 붙습니다. 한 단어의 열은 더하고(행의 합은 여전히 " +
    "1), 행은 평균합니다.",
  scale: "색 척도", "scale.global": "전체 (0–1)", "scale.row": "행별 (행 최댓값 = 가장 진함)",
  "legend.row_max": "행 최댓값", numbers: "숫자 표시",
  "overview.title": "모든 헤드 한눈에",
  "overview.explain":
    "이 종류의 층(행) × 헤드(열)마다 작은 그림 하나, 그리고 층별 평균. 행렬과 같은 색 척도입니다. 멀티 헤드 어텐션은 이 헤드들을 나란히 계산해 출력을 이어 붙입니다 " +
    "(§3.2.2). 클릭하면 그 헤드가 열립니다.",
  "matrix.title": "어텐션 행렬",
  "axis.keys": "키 → (보이는 쪽)", "axis.queries": "쿼리 ↓ (보는 쪽)",
  "axis.decoder_row": "행 = 디코더 입력 → 그 시점이 예측하는 토큰", "legend.masked": "마스킹: −∞ → 0",
  "align.toggle": "단어 정렬",
  "align.legend": "테두리 친 칸: 단어 정렬입니다. 출력 단어마다 {from}에서 가중치가 가장 큰 소스 단어를 연결합니다 (</s>는 제외).",
  "align.own": "`aiayn translate --alignment`가 이 번역에 대해 출력하는 연결과 같습니다.",
  "align.forced": "주어진 타깃 문장의 어텐션에 같은 규칙을 적용한 연결입니다.",
  "align.pieces": "조각 보기에서는 연결마다 두 단어의 조각 전부를 한 상자로 묶어 표시합니다.",
  "align.head": "디코더 {layer}층의 헤드 {head}", "align.layer_mean": "디코더 {layer}층의 헤드 평균",
  "align.rnn": "RNN 디코더의 어텐션 분포",
  "align.chosen.default": "기본값이며, 다른 헤드는 `aiayn serve --alignment-head L:H`로 고를 수 있습니다.",
  "align.chosen.given": "`--alignment-head {spec}`로 고른 헤드입니다.",
  "align.chosen.best": "`--alignment-head best`로 고른 헤드, 곧 내장 과제의 정답 정렬에서 정렬 오류율(AER)이 가장 낮은 헤드입니다.",
  "align.chosen.ranking": "--alignment-head FILE로 고른 헤드, 곧 `aiayn heads --json` 순위의 1위 헤드입니다.",
  "align.cell": "정렬됨 ({link})",
  "lines.title": "선: 누가 누구를 보는가",
  "lines.explain":
    "왼쪽: 쿼리, 오른쪽: 키. 선의 진하기가 어텐션 가중치입니다. 왼쪽 토큰에 마우스를 올리거나 포커스/클릭하세요 (행렬에서 ↑/↓도 됩니다). 클릭하면 단계별 계산이 열립니다. " +
    "헤드 버튼을 눌러 이 층의 헤드를 골라 겹쳐 보세요. 헤드마다 색이 다르며, 아무것도 누르지 않으면 행렬과 같은 헤드를 보여 줍니다.",
  "lines.overlay": "모든 헤드", "lines.heads": "겹쳐 볼 헤드:", "lines.heads_n": "헤드", "lines.as_matrix": "(행렬과 같음)",
  "search.title": "이 일을 하는 헤드는?",
  "search.explain": "쿼리 토큰과 키 토큰을 고르면, 이 종류의 모든 층 × 헤드를 그 쿼리가 그 키에 주는 어텐션 가중치 순으로 줄 세우고 가장 높은 헤드를 엽니다.",
  "search.query": "쿼리", "search.key": "키", "search.go": "헤드 찾기",
  "search.ranked": "헤드 {n}개를 그 가중치 순으로 (행렬의 숫자 그대로):",
  "search.ranked_top": "헤드 {n}개 중 그 가중치가 높은 {shown}개 (행렬의 숫자 그대로):", "search.opened": "열림",
  "search.weak": "이 모델에는 이 일을 잘하는 헤드가 없습니다. 가장 높은 가중치가 {best}로 {min}보다 낮습니다.",
  "search.weak_why":
    "이 모델은 작고 (파라미터 {params}개, 층 {layers}개, 층마다 헤드 {heads}개, d_model {d}) {steps} 스텝만 학습했습니다. 이렇게 특화된 " +
    "헤드(대명사가 가리키는 명사를 보는 헤드, 동사가 주어를 보는 헤드)는 훨씬 많은 데이터로 훨씬 오래 학습한 큰 모델에서 나타납니다.",
  "search.weak_imported": "가져온 이 모델의 헤드도 이 쌍을 특별히 보지 않습니다. 다른 쌍, 다른 종류, 또는 학습 데이터에 더 가까운 문장을 써 보세요.",
  "search.weak_fix": "그런 헤드가 있는 모델을 보려면, 수백만 문장 쌍으로 학습한 트랜스포머인 OPUS-MT 모델을 가져와 띄우세요:",
  "arch.title": "트랜스포머 안에서의 위치",
  "arch.explain": "논문의 그림 1입니다. 강조된 블록이 지금 보고 있는 어텐션입니다. 어텐션 블록을 클릭하면 그 종류로 바뀌고, 포지셔널 인코딩이나 피드 포워드를 클릭하면 그 설명이 열립니다.",
  "arch.encoder": "인코더", "arch.decoder": "디코더", "arch.embed": "입력 임베딩", "arch.out_embed": "출력 임베딩 (오른쪽으로 한 칸 이동)",
  "arch.pe": "+ 포지셔널 인코딩", "arch.mha": "멀티 헤드 어텐션", "arch.masked_mha": "마스크드 멀티 헤드 어텐션",
  "arch.cross_mha": "멀티 헤드 어텐션 (인코더–디코더)", "arch.addnorm": "잔차 연결 & 층 정규화", "arch.ffn": "피드 포워드",
  "arch.linear": "선형층", "arch.softmax": "소프트맥스 → 다음 토큰 확률", "arch.here": "여기: {layer}층, 헤드 {head}",
  "pe.title": "포지셔널 인코딩",
  "pe.explain":
    "모델이 쓰는 표 그대로입니다 (§3.5): PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(…). 행은 위치, " +
    "열은 차원이며 파랑은 양수, 빨강은 음수입니다.",
  "pe.learned": "이 모델은 위치 임베딩을 학습했습니다 (표 3의 (E)행). 모델의 표 그대로이며 행은 위치, 열은 차원, 파랑은 양수, 빨강은 음수입니다.",
  "pe.table": "처음 {p}개 위치 × {d}개 차원 (모델의 위치는 {max}개)",
  "pe.table_label": "포지셔널 인코딩 표", "pe.dots": "모든 위치 쌍의 PE(i) · PE(j): 사인·코사인 인코딩에서는 거리 j − i에만 달려 있습니다.",
  "pe.corner": "위치 \\ 차원",
  "pe.offsets": "거리 k에 따른 PE(0) · PE(k):", "pe.none": "이 모델에는 위치 표가 없습니다.",
  "ffn.title": "위치별 피드 포워드 신경망",
  "ffn.explain":
    "FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3): 모든 위치에 같은 두 층을 적용합니다. d_model {d} → d_ff {dff} → d_model " +
    "{d}.",
  "ffn.pick": "행렬의 행을 클릭하면 그 행의 피드 포워드 활성값이 여기 나옵니다.",
  "ffn.active": "이 행에서 은닉 유닛 {of}개 중 {n}개가 활성(0보다 큼)입니다:", "ffn.top": "가장 크게 활성화된 유닛:", "ffn.unit": "유닛",
  "step.title": "단계별 계산",
  "step.empty": "행렬의 행 이름을 클릭하면 (또는 포커스 후 Enter) 그 행의 가중치가 어떻게 계산되는지 보여 줍니다.",
  "step.mean": "단계별 보기는 헤드 하나를 보여 줍니다. “평균”에는 하나의 q, K, V가 없습니다. 층과 헤드를 고르세요.",
  "step.word_for": "{kind}, {layer}층, 헤드 {head}, 단어 “{word}”의 행 (단어 {row}행)",
  "step.word_rnn_for": "단어 “{word}”의 행 (단어 {row}행)",
  "step.word_explain":
    "단어 보기: “{word}”의 행은 이 단어를 이루는 조각 {n}개의 행을 평균한 것이고, 키 쪽 단어의 가중치는 그 조각들의 가중치를 더한 것입니다. 히트맵도 " +
    "이렇게 합칩니다. 표에서 조각 열 하나하나는 조각 하나의 소프트맥스 행을 단계별로 계산해 키를 단어로 합친 것이고, 그 평균이 히트맵에 보이는 이 단어의 " +
    "행입니다.",
  "step.word_one":
    "단어 보기: “{word}”는 조각 하나로 이루어져 있으므로, 그 행은 이 조각의 소프트맥스 행에서 키를 단어로 합친 것(키 단어의 가중치 = 그 조각들의 가중치 " +
    "합)이며 히트맵과 같습니다.",
  "step.key_word": "키 단어", "step.word_mean": "단어의 행 = 평균",
  "step.word_check": "히트맵은 같은 행을 소수점 셋째 자리로 반올림한 맵으로 그리고, 여기서는 소프트맥스를 조각마다 새로 계산합니다.",
  "step.word_pick": "조각별 계산 보기:",
  "step.piece_for": "단어 “{word}”의 조각 “{piece}” ({row}행)",
  "step.for": "{kind}, {layer}층, 헤드 {head}, 쿼리 “{query}” ({row}행)",
  "step.rnn_for": "디코더 시점 t = {row}, 입력 “{query}”",
  "step.transformer":
    "x는 이 위치가 층에 들어가는 입력입니다. 헤드의 행렬 W<sup>Q</sup>, W<sup>K</sup>, W<sup>V</sup> (d<sub>model</sub> × " +
    "d<sub>k</sub>)가 이를 쿼리 q로, 모든 위치를 키 k와 밸류 v로 바꿉니다 (§3.2.2). 키의 어텐션 스코어는 q·k를 √d<sub>k</sub>로 나눈 값이고 " +
    "(§3.2.1), 소프트맥스가 스코어를 합이 1인 어텐션 분포로 바꾸며, 출력은 밸류들의 가중합입니다.",
  "step.rows": "아래 표에 키마다 한 행 (벡터를 클릭하면 펼쳐집니다).",
  "step.mask": "마스킹된 키(패딩, 또는 디코더의 미래 위치, §3.2.3)는 −∞가 되어 exp(−∞) = 0입니다.",
  "step.output": "이 헤드의 출력:", "step.masked": "마스킹", "step.key": "키", "step.source": "소스",
  "step.score_word": "스코어", "step.saturation":
    "√dₖ로 나누지 않으면 가장 큰 가중치가 {unscaled}, 나누면 {scaled}입니다 (√dₖ = {sqrt}). 내적이 크면 소프트맥스가 포화되어 키 하나가 거의 전부를 " +
    "가져가고 기울기가 사라집니다. 이것이 스케일링을 하는 이유입니다 (§3.2.1).",
  "step.cross": "인코더–디코더 어텐션에서 x<sub>j</sub>는 소스 위치 j의 인코더 출력이고, q는 디코더에서 옵니다.",
  "step.rnn":
    "디코더의 한 시점: 디코더 상태를 인코더의 모든 은닉 상태 h<sub>i</sub>와 비교하고(어텐션 스코어), 소프트맥스로 어텐션 분포 α<sup>t</sup>를 만들고, 가중합 " +
    "a<sub>t</sub>(어텐션 값, 컨텍스트 벡터)를 구해 상태와 결합한 뒤 다음 토큰을 예측합니다. 디코더:",
  "step.rnn_score": "어텐션 스코어", "step.rnn_alpha": "어텐션 분포", "step.rnn_context": "컨텍스트 벡터",
  "step.state": "디코더 상태",
  "layer.title": "이 행에 대한 층의 나머지 계산",
  "layer.explain":
    "헤드마다 위와 같이 출력을 계산하고, 이를 이어 붙여(concat) Wᴼ로 투영한 뒤 (§3.2.2) 층의 입력에 더하고 정규화합니다 (§3.1). 이어서 피드 포워드 신경망 " +
    "(§3.3)과 또 한 번의 잔차 연결 & 층 정규화를 거치면 층의 출력이 됩니다.",
  "layer.heads": "이 행에 대한 헤드 {n}개의 출력 (지금 헤드 표시):", "layer.heads_note": "각각 dₖ = {d}개의 숫자",
  "layer.attn": "어텐션", "layer.pre_ln": "pre-LN: 합이 그대로 흐르고, 층 정규화는 다음 서브층의 입력에서 합니다",
  "layer.cross_sublayer": "이어서 인코더–디코더 어텐션 서브층 (x + 그 출력, 정규화)",
  "layer.output": "층의 출력", "layer.next": "다음 토큰",
  "layer.temperature": "온도 T",
  "layer.temperature_explain": "softmax(로짓 / T)입니다. T가 1보다 작으면 가장 그럴듯한 토큰들에 확률이 더 몰리고, " +
    "1보다 크면 나머지 토큰들이 따라붙습니다. 빔 서치와 그리디 디코딩은 T = 1인 분포를 읽고, " +
    "aiayn translate --sample에 --temperature로 T를 주면 이 분포에서 토큰을 뽑습니다.",
  "layer.next_explain": "디코더 마지막 층의 출력을 마지막 선형층과 소프트맥스에 통과시킨, 가장 가능성 높은 다음 토큰들입니다.",
  ready: "문장을 번역하면 어텐션이 보입니다.",
  "err.empty": "먼저 문장을 입력하세요.",
  "err.long": "텍스트가 {n}자입니다. 이 서버는 최대 {max}자까지 받습니다. 줄여 주세요. 몰래 잘라 내지 않습니다.",
  "err.too_many_tokens": "텍스트가 서브워드 토큰 {n}개입니다 (</s> 포함). 이 서버는 최대 {max}개까지 받습니다. 줄여 주세요.",
  "err.network": "서버에 연결할 수 없습니다. `aiayn serve`가 실행 중인지 확인하고 페이지를 새로 고치세요.",
  "err.status": "서버가 {status}로 응답했습니다. 다시 시도하세요.", "err.json": "서버 응답을 읽을 수 없습니다. 다시 시도하세요.",
  "warn.unk": "입력의 {n}개 조각을 이 모델이 모릅니다 ({unk}). 이 모델의 학습 데이터: {data}. 예문을 써 보세요.",
  "warn.mostly_unknown":
    "입력의 조각 {of}개 중 {n}개가 이 모델이 모르는 조각이나 바이트입니다. 이 모델은 이 글을 읽을 수 없습니다 (학습 데이터: {data}). 예문을 써 보세요.",
  "warn.target_language": "입력이 모델의 타깃 언어인 {lang}로 보입니다. 이 모델은 {src}에서 번역합니다.",
  "warn.source_cut": "텍스트가 모델의 위치 {limit}개보다 길어서 앞부분만 번역했습니다.",
  "warn.unknown_tag": "{tags}: 이 모델이 학습한 태그가 아닙니다. 번역 방향에 아무 영향이 없습니다.",
  "warn.stopped_at_limit": "모델이 문장을 끝내기(</s>) 전에 길이 제한에서 번역이 멈췄습니다. 잘린 번역일 수 있습니다.",
  "warn.diag_log_prob": "환각일 수 있습니다. 모델이 이 번역에 낮은 확률을 줍니다 (토큰당 평균 로그 확률 {value}, 기준 {threshold} 미만).",
  "warn.diag_source_contribution": "환각일 수 있습니다. 번역이 원문보다 앞서 쓴 자기 단어에 기대어 쓰였습니다 (원문에서 온 몫 {value}, 기준 {threshold} 미만).",
  "warn.diag_eos_attention": "환각일 수 있습니다. 번역이 주로 원문의 끝(</s>)을 봅니다 (어텐션의 {value}, 기준 {threshold} 초과).",
  "warn.diag_uncovered_share": "원문 일부가 빠졌을 수 있습니다. 원문 단어의 {value}만큼이 어텐션을 거의 받지 못합니다 (기준 {threshold} 초과).",
  "warn.diag_repeat_run": "번역이 같은 구절을 {value}번 연달아 반복합니다 (기준 {threshold}번).",
  "warn.diag_source_copy": "번역이 원문을 그대로 베낀 것 같습니다 (100점 중 유사도 {value}, 기준 {threshold}).",
  "warn.diag_length_ratio": "번역 길이가 원문에 비해 이상합니다. 원문 단어당 번역 단어 {value}개 (보통 {low}~{high}).",
  "warn.diag_combined": "환각일 수 있습니다. 여러 신호를 함께 본 점수가 {value}로, 이 모델의 검증 데이터로 정한 기준 {threshold}을 넘습니다.",
  "hover.top": "{query} 행이 가장 많이 보는 곳: {keys}",
  "step.unscaled": "비교용: √dₖ로 나누지 않은 softmax(q·k)",
  "step.unscaled_title": "가중치가 아닙니다. 스케일링 없이 소프트맥스를 했다면 나왔을 값입니다",
  "jump.label": "이 문장의 다른 보기", "jump.overview": "모든 헤드 ↓", "jump.lines": "선으로 보기 ↓",
  "jump.search": "어느 헤드가 이걸 할까? ↓", "jump.arch": "트랜스포머 속 위치 ↓",
  "result.smoothing":
    "라벨 스무딩 ε = {eps} (§5.4): 학습이 정답 토큰에 1이 아니라 1 − ε + ε/V = {cap} (V = {V})를 목표로 하므로 " +
    "{pct}% 안팎이면 확신입니다.",
  "ffn.encoder": "인코더", "ffn.decoder": "디코더",
  "ffn.where": "{stack} {layer}층, 서브층 {n}개 중 {sub}번째(FFN), 토큰 “{token}”",
  "pe.axis_pos": "위치 →", "pe.axis_rows": "위치 ↓", "pe.axis_dim": "차원 →", "pe.axis_i": "위치 i ↓", "pe.axis_j": "위치 j →",
  "pe.curves": "차원마다 위치를 따라 물결이 하나씩 있습니다 (차원 2i: sin(pos / 10000^(2i/d)), 2i + 1: cos). 낮은 차원은 빨리, " +
    "높은 차원은 천천히 변해서, 이 물결들을 합치면 모든 위치가 서로 구별됩니다 (§3.5).",
  "pe.dim": "차원 {i}",
  "jump.scores": "스코어 → 가중치 ↓",
  "scores.title": "스코어에서 가중치까지",
  "scores.explain":
    "헤드 하나의 스코어 행렬 전체를 단계별로 봅니다 (§3.2.1). 내적 q·kᵀ, √dₖ로 나눈 값, 마스킹(쿼리가 볼 수 없는 칸은 −∞), " +
    "그리고 행마다 취한 소프트맥스이며, 마지막 단계가 위의 행렬입니다. 행과 열은 조각(piece) 단위입니다.",
  "scores.go": "{which}: 모든 행 계산하기", "scores.loading": "{of}행 중 {n}행…", "scores.play": "재생",
  "scores.stage": "단계",
  "scores.dots": "1. q·kᵀ: 내적 그대로 (파랑은 양수, 빨강은 음수)",
  "scores.scaled": "2. ÷ √dₖ = {sqrt}: 모양은 같고 숫자만 작아집니다",
  "scores.masked": "3. 마스크: 쿼리가 볼 수 없는 키는 −∞ (빗금)",
  "scores.weights": "4. 행마다 소프트맥스: 어텐션 가중치, 각 행의 합은 1",
  "flow.label": "이 계산의 단계",
  "exp.title": "클릭 한 번으로 보는 실험:",
  "exp.it_animal": "“it” → “animal” (too tired)", "exp.wide_street": "“it” → “street” (too wide)",
  "exp.note":
    "헤드 검색이 이 한 문장의 “{query}” → “{key}” 가중치로 인코더의 모든 헤드에 순위를 매겼습니다. 1위는 {layer}층 헤드 {head}, " +
    "가중치 {weight}입니다. 문장 하나는 일화일 뿐입니다. `python bench/coreference.py --model DIR` 명령은 문장 500개에서 헤드마다 맞힌 " +
    "비율을 재며, 여기서 1위인 헤드가 가장 자주 맞히는 헤드라는 보장은 없습니다.",
  "exp.missing": "이 번역의 원문에 없는 단어입니다: “{word}”. 이 실험은 문장을 그대로 두어야 합니다.",
  "measure.label": "보기", "measure.weights": "가중치", "measure.contributions": "기여도",
  "measure.note":
    "기여도: 칸마다 α·‖f(x)‖, 곧 가중치에 그 키의 값 벡터를 헤드의 출력 투영까지 통과시킨 것(f(xⱼ) = vⱼ W^O)의 " +
    "길이를 곱하고, 행의 합으로 나눈 값입니다 (Kobayashi et al. 2020). 가중치를 많이 받은 키라도 벡터가 짧으면 " +
    "실제로 옮기는 것은 적습니다. 단계별 계산에는 가중치 옆에 ‖f(xⱼ)‖가 나옵니다.",
  "search.ranked_contributions": "헤드 {n}개를 그 기여도 순으로 (행렬의 숫자 그대로):",
  "search.ranked_top_contributions": "헤드 {n}개 중 그 기여도가 높은 {shown}개 (행렬의 숫자 그대로):",
  "align.contributions": "이 연결은 가중치가 아니라 기여도에서 읽었습니다.",
  "step.norm_title": "키의 값 벡터를 헤드의 출력 투영까지 통과시킨 vⱼ W^O의 길이: 가중치가 1일 때 이 키가 옮기는 양",
  "step.share": "기여도", "step.share_title": "이 키의 α·‖f(x)‖를 행 전체의 합으로 나눈 값: 스위치를 기여도에 두면 " +
    "행렬에 나오는 숫자",
  "step.norms":
    "‖f(xⱼ)‖ = ‖vⱼ W^O‖는 키가 가중치를 모두 받았을 때 옮기는 벡터의 길이입니다. 가중치에 이것을 곱해 행의 " +
    "합으로 나누면 그 키의 기여도입니다. 가중치가 커도 벡터가 짧으면 옮기는 것은 적습니다.",
  lang: "English",
  "jump.beam": "빔 서치 ↓", "beam.title": "빔 서치를 한 스텝씩 따라가기",
  "beam.explain":
    "빔 서치는 스텝마다 남겨 둔 가설(부분 번역)에 토큰을 하나씩 이어 붙여 후보를 만들고, 후보를 점수로 줄 세워 " +
    "상위 K = {k}개를 남깁니다. 그중 </s>로 끝난 후보는 완성된 가설로 따로 빼 둡니다.",
  "beam.lp_gnmt": "점수는 로그 확률을 길이 페널티로 나눈 값입니다: lp = ((5 + |Y|) / 6)^α, α = {alpha}.",
  "beam.lp_hf": "점수는 로그 확률을 길이 페널티로 나눈 값입니다: lp = |Y|^α, α = {alpha}.",
  "beam.listed": "후보는 K × V개의 확장 가운데 점수가 높은 2K = {2k}개만 보여 줍니다(탐색도 이 후보들만 봅니다).",
  "beam.ended": "탐색은 스텝 {n}에서 끝났습니다. {why}.",
  "beam.done.finished": "완성된 가설이 {n}개(K = {k}개 이상) 모였고, 아직 끝나지 않은 가설로는 {k}등 점수를 넘을 수 " +
    "없었습니다",
  "beam.done.finished_one": "완성된 가설이 1개(K = 1개 이상) 모였고, 아직 끝나지 않은 가설로는 그 점수를 넘을 수 " +
    "없었습니다",
  "beam.done.early": "완성된 가설이 K = {k}개 모여 바로 멈췄습니다",
  "beam.done.early_one": "완성된 가설이 K = 1개 모여 바로 멈췄습니다", "beam.done.length_limit": "길이 제한에 닿았습니다",
  "beam.slider": "스텝", "beam.prev": "이전 스텝", "beam.next": "다음 스텝", "beam.step_of": "스텝 {n} / {of}",
  "beam.caption": "스텝 {n}의 후보 (lp = {lp}): 점수 상위 {k}개가 다음 스텝으로 넘어갑니다",
  "beam.caption_end": "스텝 {n}의 후보 (lp = {lp}): 탐색이 여기서 끝납니다",
  "beam.status": "상태", "beam.hypothesis": "이 토큰까지의 가설", "beam.token": "새 토큰", "beam.score": "점수",
  "beam.s.kept": "✓ 유지", "beam.s.pruned": "✗ 탈락", "beam.s.finished": "■ 완성",
  "beam.s.finished_at_limit": "■ 길이 제한에서 완성",
  "beam.s.dropped": "✗ 버림 (</s>, 상위 K개 밖)", "beam.s.ended": "✗ 탐색 종료",
  "beam.finished": "완성된 가설 {n}개 (점수 순):", "beam.best": "← 번역 결과", "beam.best_forced": "← 모델의 번역",
  "beam.item": "{text} — 점수 {score}",
  "beam.forced": "어텐션 맵은 직접 넣은 번역문의 것이고, 여기는 모델이 이 문장을 스스로 탐색한 과정입니다.",
  "ablate.button": "이 헤드 빼고 번역",
  "ablate.search": "{which} 빼고 다시 번역",
  "ablate.title": "{which} 제거: 이 헤드의 출력을 W^O에 들어가기 전에 0으로 바꾸고 문장을 다시 번역했습니다",
  "ablate.every": "모든 헤드 사용", "ablate.without": "이 헤드 없이", "ablate.score": "점수",
  "ablate.same": "번역은 그대로이고 확률만 달라집니다(Δ는 헤드를 뺀 값에서 원래 값을 뺀 차이입니다).",
  "ablate.changed":
    "표시한 단어가 바뀌었습니다. 모든 헤드로 번역했을 때의 단어에는 취소선이, 이 헤드 없이 번역했을 때의 단어에는 " +
    "밑줄이 그어져 있습니다(Δ는 헤드를 뺀 값에서 원래 값을 뺀 차이입니다).",
  "ablate.forced": "두 번역 모두 직접 넣은 번역문이 아니라 모델이 스스로 만든 번역입니다.",
};
