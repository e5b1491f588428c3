// The static explorer: the same page with no server behind it (a site written by `aiayn export-site`,
// served by any file server). Its index.html names a config (<meta name="aiayn-static" content="static.json">);
// then the page's requests are answered here: the model panel and the position table from the files the site
// was built with, translations by the model running in the browser (onnx_engine.js: beam search, n-best lists,
// a given target's maps, post-editing's alternatives and re-decoding after a pick), and everything that needs
// the server by one sentence, in the page's language, saying so.
import {lang, t} from "./i18n.js";

const WORDS = {
  en: {
    note: "This page runs the model in your browser (onnxruntime-web, WebAssembly), with no server: " +
          "translation with beam search, post-editing, the maps of a target you give, the three kinds of attention " +
          "maps and the word alignment. The step-by-step computation, the FFN and scores panels and the training " +
          "timeline need the server: `aiayn serve --model M`.",
    needs: "{what} needs the server (aiayn serve): this page runs the model in the browser, which gives " +
           "translations and their attention maps.",
    step: "The step-by-step computation", trace: "The beam search's trace",
    ablate: "Translating without a head",
    timeline: "The training timeline", other: "This request",
    failed: "The model could not run in this browser: {error}",
    model: "This site has no model named “{name}”: ?model= takes one of {names}.",
  },
  ko: {
    note: "이 페이지는 서버 없이 브라우저에서 모델을 실행합니다(onnxruntime-web, WebAssembly). 빔 서치 번역, " +
          "후편집, 직접 넣은 번역문의 어텐션 맵, 세 종류의 어텐션 맵과 단어 정렬을 볼 수 있습니다. 단계별 계산, " +
          "FFN·스코어 패널, 학습 타임라인은 서버가 있어야 합니다: `aiayn serve --model M`.",
    needs: "{what}에는 서버(aiayn serve)가 필요합니다. 이 페이지는 브라우저에서 모델을 실행해 번역과 어텐션 맵을 " +
           "보여 줍니다.",
    step: "단계별 계산", trace: "빔 서치 기록", ablate: "헤드를 뺀 번역",
    timeline: "학습 타임라인", other: "이 요청",
    failed: "이 브라우저에서 모델을 실행하지 못했습니다: {error}",
    model: "이 사이트에 없는 모델입니다: “{name}”. ?model=에는 {names} 중 하나를 넣으세요.",
  },
};

function say(key, vars = {}) {
  return WORDS[lang()][key].replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

const state = {config: null, info: null};
const MODEL_KEY = "aiayn-static-model";

export function staticConfig() {
  // the config's address, or null when the page has a server
  const meta = document.querySelector('meta[name="aiayn-static"]');
  return meta ? new URL(meta.content, document.baseURI).href : null;
}

async function fetchJson(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

async function config() {
  if (!state.config) {
    const url = staticConfig(), loaded = await fetchJson(url);
    state.config = {...loaded, base: new URL(".", url).href, model: chosenModel(loaded)};
    showNote();
  }
  return state.config;
}

function chosenModel(loaded) {
  // ?model=NAME (kept for this tab: the page rewrites its address as it goes), else the site's first model
  const asked = new URLSearchParams(window.location.search).get("model");
  if (asked !== null) sessionStorage.setItem(MODEL_KEY, asked);
  const name = asked ?? sessionStorage.getItem(MODEL_KEY) ?? loaded.default;
  if (!(name in loaded.models)) {
    sessionStorage.removeItem(MODEL_KEY);
    throw new Error(say("model", {name, names: Object.keys(loaded.models).join(", ")}));
  }
  return loaded.models[name];
}

function showNote() {
  // the page says once, near its top, what runs here and what needs the server; redrawn in the other language
  let note = document.getElementById("static-note");
  if (!note) {
    note = document.createElement("p");
    note.id = "static-note"; note.className = "note"; note.dataset.testid = "static-note";
    document.querySelector(".lead")?.after(note);
    document.getElementById("lang")?.addEventListener("click", () => fillNote(note));
  }
  fillNote(note);
}

function fillNote(note) {
  // the note's `backquoted` command in a <code>
  note.replaceChildren(...say("note").split("`").map((part, i) => {
    if (i % 2 === 0) return document.createTextNode(part);
    const code = document.createElement("code");
    code.textContent = part;
    return code;
  }));
}

function needsServer(what) { return new Error(say("needs", {what: say(what)})); }

async function translate(cfg, body) {
  const decode = state.info.decode, beam = body.beam === null || body.beam === undefined ? decode.beam : body.beam;
  const {translateInBrowser, TooLong} = await import("./onnx_engine.js");
  let answer;
  try {
    answer = await translateInBrowser(new URL(cfg.model, cfg.base).href, {
      text: body.text, target: body.target || "", targetPrefix: body.target_prefix || "", beam: Number(beam),
      alpha: decode.alpha, form: decode.length_penalty_form, maxSource: state.info.max_source_tokens,
      nBest: body.attention === false ? Number(body.n_best || 1) : 0});
  } catch (e) {
    if (e instanceof TooLong) throw new Error(t("err.too_many_tokens", {n: e.n, max: e.max}));
    throw new Error(say("failed", {error: e && e.message ? e.message : String(e)}));
  }
  return {...answer, arch: state.info.arch};
}

export async function staticApi(path, body) {
  // what the server would answer for `path` (and the POST body), or an Error whose message the page shows
  const cfg = await config();
  const model = new URL(cfg.model, cfg.base).href;
  if (path === "/api/info") return (state.info = await fetchJson(model + "info.json"));
  if (path === "/api/positions") return fetchJson(model + "positions.json");
  if (path === "/api/translate" && body.trace) throw needsServer("trace");
  if (path === "/api/translate" && body.without_heads) throw needsServer("ablate");
  if (path === "/api/translate") return translate(cfg, body);
  if (path === "/api/step") throw needsServer("step");
  if (path === "/api/alternatives") {
    const {alternativesInBrowser} = await import("./onnx_engine.js");
    return alternativesInBrowser(model, body);
  }
  if (path.startsWith("/api/timeline")) throw needsServer("timeline");
  throw needsServer("other");
}
