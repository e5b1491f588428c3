// The static explorer: the same page with no server behind it (a site written by `aiayn export-site`,
// served by any file server). Its index.html names a config (<meta name="aiayn-static" content="static.json">);
// then the page's requests are answered here: the model panel and the position table from the files the site
// was built with, translations by the model running in the browser (onnx_engine.js, greedy search or a given
// target), and everything that needs the server by one sentence, in the page's language, saying so.
import {lang} from "./i18n.js";

const WORDS = {
  en: {
    note: "This page runs the model in your browser (onnxruntime-web, WebAssembly), with no server: greedy " +
          "translation (beam 1), the maps of a target you give, and the three kinds of attention maps. The step " +
          "view, the scores panel, post-editing, beam search and the training timeline need the server: " +
          "`aiayn serve --model M`.",
    needs: "{what} needs the server (`aiayn serve`): this page runs the model in the browser, with greedy search.",
    step: "The step-by-step computation", alternatives: "Post-editing", prefix: "Post-editing",
    beam: "Beam search (beam above 1)", timeline: "The training timeline", other: "This request",
    failed: "The model did not load in this browser: {error}",
  },
  ko: {
    note: "이 페이지는 서버 없이 브라우저에서 모델을 실행합니다(onnxruntime-web, WebAssembly). 그리디 번역(빔 1), " +
          "직접 넣은 번역문의 어텐션 맵, 세 종류의 어텐션 맵을 볼 수 있습니다. 단계별 계산, 스코어 패널, 후편집, " +
          "빔 탐색, 학습 타임라인은 서버가 있어야 합니다: `aiayn serve --model M`.",
    needs: "{what}에는 서버(`aiayn serve`)가 필요합니다. 이 페이지는 브라우저에서 그리디 탐색으로 모델을 실행합니다.",
    step: "단계별 계산", alternatives: "후편집", prefix: "후편집", beam: "빔 탐색(빔 2 이상)",
    timeline: "학습 타임라인", other: "이 요청",
    failed: "이 브라우저에서 모델을 불러오지 못했습니다: {error}",
  },
};

function say(key, vars = {}) {
  return WORDS[lang()][key].replace(/\{(\w+)\}/g, (_, name) => String(vars[name] ?? ""));
}

const state = {config: null, info: null};

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
    const url = staticConfig();
    state.config = {...await fetchJson(url), base: new URL(".", url).href};
    showNote();
  }
  return state.config;
}

function showNote() {
  // the page says once, near its top, what runs here and what needs the server; redrawn in the other language
  let note = document.getElementById("static-note");
  if (!note) {
    note = document.createElement("p");
    note.id = "static-note"; note.className = "note"; note.dataset.testid = "static-note";
    document.querySelector(".lead")?.after(note);
    document.getElementById("lang")?.addEventListener("click", () => { note.textContent = say("note"); });
  }
  note.textContent = say("note");
}

function needsServer(what) { return new Error(say("needs", {what: say(what)})); }

async function translate(cfg, body) {
  if (body.beam !== null && body.beam !== undefined && Number(body.beam) > 1) throw needsServer("beam");
  if (body.target_prefix) throw needsServer("prefix");
  const {translateInBrowser} = await import("./onnx_engine.js");
  let answer;
  try {
    answer = await translateInBrowser(new URL(cfg.model, cfg.base).href, body);
  } catch (e) {
    throw new Error(say("failed", {error: e && e.message ? e.message : String(e)}));
  }
  return {...answer, arch: state.info ? state.info.arch : answer.arch};
}

export async function staticApi(path, body) {
  // what the server would answer for `path` (and the POST body), or an Error whose message the page shows
  const cfg = await config();
  const model = new URL(cfg.model, cfg.base).href;
  if (path === "/api/info") return (state.info = await fetchJson(model + "info.json"));
  if (path === "/api/positions") return fetchJson(model + "positions.json");
  if (path === "/api/translate" && body && body.attention !== false) return translate(cfg, body);
  if (path === "/api/step") throw needsServer("step");
  if (path === "/api/alternatives") throw needsServer("alternatives");
  if (path.startsWith("/api/timeline")) throw needsServer("timeline");
  throw needsServer("other");
}
