// The page's state (S, owned here and passed to the drawing modules) and its wiring. Every panel is drawn
// from S alone, and redrawn (or cleared) whenever the sentence, kind, layer, head, view or query changes;
// an answer that arrives after its question was replaced is dropped (S.gen; the step panel's key).
// The measure switch (weights | contributions) swaps S.data for the server's answer with the other measure's
// maps (the same translation; asked once per sentence, then kept in S.answers), so every panel that reads
// S.data.maps (matrix, thumbnails, lines, head search) shows it.
import {createAblation} from "./ablation.js";
import {api} from "./api.js";
import {createBeamTrace} from "./beamtrace.js";
import {drawArch, drawFfn, drawPositions, ffnStack} from "./arch.js";
import {download} from "./download.js";
import {applyLanguage, nth, setLanguage, t, toggleLanguage} from "./i18n.js";
import {renderLessons, wordIndex} from "./lessons.js";
import {axesView} from "./matrix.js";
import {renderInfo} from "./modelpanel.js";
import {currentView, kindName, renderFocus, renderMaps, renderResult, withCode} from "./render.js";
import {fillSearch, rankHeads, showRanking} from "./search.js";
import {createScores} from "./scores.js";
import {renderStep, stepKey} from "./stepview.js";
import {readUrl, writeUrl} from "./url.js";
import {staticConfig} from "./static_mode.js";
import {warningText} from "./warnings.js";
import {decoratePostedit, wirePostedit} from "./postedit.js";
import {createTimeline} from "./timeline.js";

const $ = id => document.getElementById(id);
const KINDS = ["encoder_self", "decoder_self", "cross"], PARTS = ["pe", "ffn"];
const S = {info: null, data: null, gen: 0, kind: "cross", layer: null, head: 0, words: false, align: false,
           scale: "global", numbers: false, lineHeads: [], query: null, preview: null, step: null, beam: null, text: "",
           target: "", pe: undefined, open: null, pending: null, prefix: "", measure: "weights", answers: {},
           request: null};
const timeline = createTimeline(), scores = createScores(), beamTrace = createBeamTrace(S);
const ablation = createAblation(S);
const handlers = {pickHead, toggleLineHead, previewQuery, select: q => selectQuery(q, false)};

function showError(message) { $("error").textContent = message; }

function clearViews() {
  S.data = null; S.query = null; S.preview = null; S.step = null; S.answers = {}; S.request = null;
  $("translation").textContent = "";
  $("views").hidden = true; $("result").hidden = true; $("ready").hidden = false;
  for (const id of ["heatmap", "overview", "lines", "line-caption", "line-tops", "hover-view", "matrix-caption", "step",
                    "token-probs", "search-result", "nbest", "scores-body"]) $(id).replaceChildren();
  $("lines").dataset.signature = ""; $("step").dataset.key = ""; $("experiment-note").hidden = true;
  beamTrace.clear(); ablation.sync();
}

function placeModelPanel(results) {
  // with a translation up, the model panel goes below the maps: the matrix starts in the first screen
  if (results) $("views").after($("model-info"));
  else $("work").before($("model-info"));
}

function clearSentence() {
  // an empty input: no maps of the last sentence stay up, and the address no longer names it
  S.gen++; S.text = ""; S.target = ""; S.prefix = "";
  clearViews(); setBusy(false); placeModelPanel(false);
  writeUrl(S, "", "");
}

function checkText(text, max) {
  if (!text.trim()) { showError(t("err.empty")); $("text").focus(); return false; }
  if (text.length > max) { showError(t("err.long", {n: text.length, max})); return false; }
  return true;
}

async function translate(restore = null, prefix = "") {
  const text = $("text").value, target = $("target").value, max = S.info ? S.info.max_text : 500;
  $("error").textContent = ""; $("warning").textContent = "";
  if (!text.trim()) clearSentence();
  if (!checkText(text, max) || (target && !checkText(target, max))) return;
  const gen = ++S.gen, beam = $("beam").value.trim() === "" ? null : Number($("beam").value);
  clearViews();  // nothing of the previous sentence stays up while (or if) this one fails
  setBusy(true);
  try {
    const forced = target.trim() ? {target} : prefix ? {target_prefix: prefix} : {};  // prefix: a post-edit pick
    const request = {text, beam, diagnostics: true, ...forced};
    if (!canMeasure()) S.measure = "weights";
    const measure = S.measure;  // the switch may move while this is asked
    const data = await api("/api/translate", withMeasure(request, measure));
    if (gen !== S.gen) return;
    Object.assign(S, {data, beam, text, target: target.trim() ? target : "", prefix: target.trim() ? "" : prefix,
                      request, answers: {[measure]: data}});
    if (restore) applyRestore(restore);
    setupSelectors();
    $("warning").textContent = warningText(data.warnings, S.info);
    $("views").hidden = false; $("result").hidden = false; $("ready").hidden = true;
    placeModelPanel(true);
    render();
    if (S.query !== null) selectQuery(S.query, false);
    if (!data.teacher_forced && !S.prefix) loadNbest(gen, text, beam);
    beamTrace.open();  // asked only while its panel is open
    if (measure !== S.measure) loadMeasure();
  } catch (e) {
    if (gen === S.gen) showError(e.message);
  } finally {
    if (gen === S.gen) setBusy(false);
  }
}

async function loadNbest(gen, text, beam) {
  const n = Math.min(beam || S.info.decode.beam, 8);
  if (n < 2) return;
  try {
    const answer = await api("/api/translate", {text, beam, attention: false, n_best: n});
    if (gen !== S.gen) return;
    $("nbest").replaceChildren(...answer.n_best.map(([hyp, score]) => {
      const li = document.createElement("li"), b = document.createElement("button");
      b.type = "button"; b.className = "hyp"; b.textContent = `${hyp} (${score.toFixed(3)})`;
      b.addEventListener("click", () => { $("target").value = hyp; translate(); });
      li.appendChild(b);
      return li;
    }));
  } catch { /* the n-best list is an extra: the maps are up already */ }
}

// contributions are the server's (value norms of a Transformer's heads): not on the static explorer or an RNN
function canMeasure() { return Boolean(S.info && S.info.multi_head) && !staticConfig(); }

function withMeasure(request, measure) { return measure === "contributions" ? {...request, measure} : request; }

function showMeasure() {
  const on = S.measure === "contributions";
  $("measure").setAttribute("aria-checked", String(on));
  $("measure-row").hidden = !canMeasure();
  $("measure-note").hidden = !(S.data && S.data.measure === "contributions");  // what the maps up show
}

function toggleMeasure() {
  S.measure = S.measure === "contributions" ? "weights" : "contributions";
  showMeasure();
  return loadMeasure();
}

async function loadMeasure() {
  // the maps up in the switch's measure: the answer kept for this sentence, or asked for once
  if (!S.data || (S.data.measure || "weights") === S.measure) return;
  const gen = S.gen, measure = S.measure;
  if (!S.answers[measure]) {
    $("error").textContent = ""; setBusy(true);
    try {
      S.answers[measure] = await api("/api/translate", withMeasure(S.request, measure));
    } catch (e) {
      if (gen === S.gen) showError(e.message);
      return;
    } finally {
      if (gen === S.gen) setBusy(false);
    }
  }
  if (gen !== S.gen || measure !== S.measure) return;  // another sentence, or switched back meanwhile
  S.data = S.answers[measure];
  showMeasure();
  render();
}

function applyRestore(r) {
  if (r.kind && KINDS.includes(r.kind)) S.kind = r.kind;
  if (r.layer !== null) S.layer = r.layer;
  if (r.head !== null) S.head = r.head;
  S.words = r.words; $("words").checked = r.words;
  S.align = r.align;
  S.query = r.query;
  if (PARTS.includes(r.open)) S.open = r.open;
}

function setBusy(busy) {
  $("translate").disabled = busy;
  $("translate").setAttribute("aria-busy", String(busy));
  $("status").textContent = busy ? t("translating") : "";
}

function fill(select, values, current) {
  select.replaceChildren(...values.map(([value, label]) => new Option(label, value)));
  select.value = String(current);
}

function setupSelectors() {
  const kinds = KINDS.filter(k => k in S.data.maps);
  if (!kinds.includes(S.kind)) S.kind = kinds.includes("cross") ? "cross" : kinds[0];
  fill($("kind"), kinds.map(k => [k, kindName(S, k)]), S.kind);
  const maps = S.data.maps[S.kind], L = maps.length, H = maps[0].length;
  if (S.layer === null || (S.layer !== "mean" && S.layer >= L) || (S.layer === "mean" && L === 1)) S.layer = L - 1;
  if ((S.head !== "mean" && S.head >= H) || (S.head === "mean" && H === 1)) S.head = 0;
  S.lineHeads = H > 1 ? S.lineHeads.filter(h => h < H) : [];
  const numbered = n => [...Array(n).keys()].map(i => [nth(i), nth(i)]);  // 1-based values, as shown
  fill($("layer"), (L > 1 ? [["mean", t("mean")]] : []).concat(numbered(L)), nth(S.layer));
  fill($("head"), (H > 1 ? [["mean", t("mean")]] : []).concat(numbered(H)), nth(S.head));
  $("kind").closest("label").hidden = kinds.length === 1;
  $("layer").closest("label").hidden = $("head").closest("label").hidden = L === 1 && H === 1;
}

function render() {
  if (!S.data) return;
  renderResult(S);
  decoratePostedit(S);
  showMeasure();
  const view = renderMaps(S, handlers);
  fillSearch($("search-panel"), view);
  renderArch();
  $("scores-panel").hidden = !S.info.multi_head;  // a recurrent decoder's scores have no q, k and √dₖ
  scores.render(S);
  ablation.sync();
  renderStep(S, view, false, stepAnswered);
  writeUrl(S, S.text, S.target);
}

function ffnWhere() {
  // the FFN panel's row: the step view's (its stack, layer and token), or null while none is computed
  if (S.query === null || !S.step || S.step.key !== stepKey(S)) return null;
  const view = currentView(S), pieces = axesView(S.data, S.kind, false);
  const r = pieces.rows[S.words ? view.qGroups[S.query][S.step.shown] : S.query];
  return {stack: ffnStack(S.kind), layer: nth(S.layer), token: (r.label + " " + (r.sub || "")).trim()};
}

function drawOpen() {
  $("pe-panel").hidden = S.open !== "pe"; $("ffn-panel").hidden = S.open !== "ffn";
  if (S.open === "ffn") drawFfn($("ffn-body"), S.info, S.step && S.step.answer, ffnWhere());
}

function renderArch() {
  // the Transformer's figure, positions and FFN do not apply to one attention inside a recurrent decoder
  $("arch-panel").hidden = !S.info.multi_head;
  if (!S.info.multi_head) return;
  drawArch($("arch-map"), S, S.info, openPart);
  drawOpen();
}

function stepAnswered() { if (S.open === "ffn") drawOpen(); }

async function openPart(part, stack) {
  if (KINDS.includes(part)) { $("kind").value = part; changeKind(); return; }
  if (part === "ffn" && stack !== ffnStack(S.kind)) {
    // the other stack's FFN: the matrix shows that stack's attention, whose rows go through it
    S.open = "ffn";
    $("kind").value = stack === "encoder" ? "encoder_self" : ("cross" in S.data.maps ? "cross" : "decoder_self");
    changeKind(); return;
  }
  S.open = S.open === part ? null : part;
  renderArch();
  writeUrl(S, S.text, S.target);
  if (S.open === "pe") await showPositions();
}

async function showPositions() {
  if (S.pe === undefined) {
    try { S.pe = await api("/api/positions"); } catch (e) { $("pe-body").textContent = e.message; return; }
  }
  drawPositions($("pe-body"), S.pe);
}

function toggleLineHead(h) {
  S.lineHeads = S.lineHeads.includes(h) ? S.lineHeads.filter(x => x !== h) : [...S.lineHeads, h].sort((a, b) => a - b);
  if (S.data) renderFocus(S, handlers);
}

function previewQuery(q) { if (S.preview !== q) { S.preview = q; renderFocus(S, handlers); } }

function selectQuery(q, focus) {
  S.query = q; S.preview = null;
  document.querySelectorAll("#heatmap tbody tr")
    .forEach(tr => tr.classList.toggle("selected", Number(tr.dataset.q) === q));
  document.querySelectorAll("#heatmap button.q").forEach(b => { b.tabIndex = Number(b.dataset.q) === q ? 0 : -1; });
  if (focus) document.querySelector(`#heatmap button.q[data-q="${q}"]`)?.focus();
  const view = currentView(S);
  renderFocus(S, handlers, view);
  renderStep(S, view, true, stepAnswered);
  writeUrl(S, S.text, S.target);
}

function pickHead(layer, head, scroll = true) {
  S.layer = layer; S.head = head;
  $("layer").value = nth(layer); $("head").value = nth(head);
  render();
  if (!scroll) return;
  $("matrix-panel").scrollIntoView({block: "start"});
  document.querySelector("#heatmap button.q[tabindex='0']")?.focus({preventScroll: true});
}

function searchHeads() {
  const q = Number($("search-query").value), k = Number($("search-key").value);
  const ranked = rankHeads(S.data.maps[S.kind], currentView(S), q, k);
  showRanking($("search-result"), ranked, S.info, (l, h) => pickHead(l, h, false), S.data.measure);
  if (S.info.multi_head) $("search-result").appendChild(withoutButton());
  S.query = q;
  pickHead(ranked[0].layer, ranked[0].head, false);
  selectQuery(q, false);
}

function withoutButton() {
  // the head search's pick (or the ranked head clicked since) taken out: the comparison is beside the matrix;
  // ablation.sync names the head in view on the button, in the page's language
  const b = document.createElement("button");
  b.type = "button"; b.dataset.testid = "search-without-head";
  b.addEventListener("click", () => { $("matrix-panel").scrollIntoView({block: "start"}); ablation.run(); });
  return b;
}

function onMatrixKey(e) {
  const button = e.target.closest("button.q");
  if (!button) return;
  const q = Number(button.dataset.q), n = document.querySelectorAll("#heatmap button.q").length;
  const moves = {ArrowDown: q + 1, ArrowUp: q - 1, Home: 0, End: n - 1};
  if (e.key in moves) { e.preventDefault(); selectQuery(Math.max(0, Math.min(n - 1, moves[e.key])), true); }
}

function changeKind() {
  S.kind = $("kind").value; S.query = null; S.preview = null; $("search-result").replaceChildren();
  setupSelectors(); render();
}

function wireControls() {
  $("translate").addEventListener("click", () => translate());
  for (const id of ["text", "target"]) {
    $(id).addEventListener("keydown", e => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); translate(); }
    });
  }
  $("text").addEventListener("input", () => {
    const n = $("text").value.length, max = S.info ? S.info.max_text : 500;
    $("text-count").textContent = n > max ? t("err.long", {n, max}) : "";
    if (!$("text").value.trim() && (S.data || S.text)) clearSentence();
  });
  $("kind").addEventListener("change", changeKind);
  for (const id of ["layer", "head"]) {
    $(id).addEventListener("change", () => {
      S[id] = $(id).value === "mean" ? "mean" : Number($(id).value) - 1; render();
    });
  }
  $("words").addEventListener("change", () => {
    S.words = $("words").checked; S.query = null; S.preview = null; render();
  });
  $("scale").addEventListener("change", () => { S.scale = $("scale").value; render(); });
  $("alignment").addEventListener("change", () => { S.align = $("alignment").checked; render(); });
  $("numbers").addEventListener("change", () => { S.numbers = $("numbers").checked; render(); });
  $("overlay").addEventListener("change", () => {
    S.lineHeads = $("overlay").checked && S.data ? [...Array(S.data.maps[S.kind][0].length).keys()] : [];
    if (S.data) renderFocus(S, handlers);
  });
  $("search-go").addEventListener("click", searchHeads);
  $("measure").addEventListener("click", toggleMeasure);
  $("without-head").addEventListener("click", ablation.run);
  $("beam-panel").addEventListener("toggle", beamTrace.open);
  const openBeam = () => { $("beam-panel").open = true; };  // its jump link opens the closed panel
  document.querySelector(".jumps a[href='#beam-panel']").addEventListener("click", openBeam);
  $("dl-png").addEventListener("click", () => download(S, "png"));
  $("dl-json").addEventListener("click", () => download(S, "json"));
}

function wireMatrix() {
  const heat = $("heatmap");
  const on = (type, selector, act) => heat.addEventListener(type, e => {
    const el = e.target.closest(selector);
    if (el) act(Number(el.dataset.q));
  });
  on("click", "button.q", q => selectQuery(q, false));
  on("mouseover", "th.query", previewQuery);
  on("focusin", "button.q", previewQuery);
  heat.addEventListener("mouseleave", () => { if (S.data) previewQuery(null); });
  heat.addEventListener("keydown", onMatrixKey);
  $("lang").addEventListener("click", () => {
    toggleLanguage();
    if (S.info) { renderInfo(S.info, useExample); renderLessons($("lessons"), S.info, runLesson); }
    writeUrl(S, S.text, S.target);
    timeline.relabel();
    beamTrace.relabel();
    if (S.data) {
      setupSelectors(); render();
      $("warning").textContent = warningText(S.data.warnings, S.info);
      if (S.open === "pe" && S.pe !== undefined) drawPositions($("pe-body"), S.pe);
    }
  });
}

function useExample(example) { $("text").value = example; $("target").value = ""; translate(); }

async function runLesson(lesson) {
  // translate the lesson's sentence in the encoder's word view, open the head that ranks first for it
  $("text").value = lesson.sentence; $("target").value = "";
  await translate({kind: "encoder_self", layer: null, head: null, words: true, align: false, query: null});
  if (!S.data || S.text !== lesson.sentence || !("encoder_self" in S.data.maps)) return;
  const view = currentView(S), labels = view.rows.map(r => r.label);
  const q = wordIndex(labels, lesson.query), k = wordIndex(view.cols.map(c => c.label), lesson.key);
  const note = $("experiment-note");
  note.hidden = false;
  if (q < 0 || k < 0) { note.textContent = t("exp.missing", {word: q < 0 ? lesson.query : lesson.key}); return; }
  $("search-query").value = String(q); $("search-key").value = String(k);
  searchHeads();
  const best = rankHeads(S.data.maps[S.kind], view, q, k)[0];
  withCode(note, t("exp.note", {query: labels[q], key: view.cols[k].label, layer: nth(best.layer),
                                 head: nth(best.head), weight: best.weight.toFixed(2)}));
  $("matrix-panel").scrollIntoView({block: "start"});
}

function showHashPanel() {
  // the panel the address names (#search-panel, …), once the maps are up
  const panel = document.getElementById(decodeURIComponent(window.location.hash.slice(1)));
  if (panel === $("beam-panel")) panel.open = true;  // a closed panel's address opens it
  if (panel && $("views").contains(panel)) panel.scrollIntoView({block: "start"});
}

async function start() {
  const restore = readUrl();
  if (restore.lang) setLanguage(restore.lang);  // the address's language wins over the last one used
  S.measure = restore.measure;
  applyLanguage();
  wireControls(); wireMatrix();
  wirePostedit(S, prefix => translate(null, prefix));
  try { S.info = await api("/api/info"); } catch (e) { showError(e.message); return; }
  renderInfo(S.info, useExample);
  renderLessons($("lessons"), S.info, runLesson);
  timeline.start();
  $("beam").value = String(restore.beam || S.info.decode.beam);
  if (restore.text) {
    $("text").value = restore.text; $("target").value = restore.target;
    await translate(restore, restore.target ? "" : restore.prefix);
    if (S.open === "pe") await showPositions();
    showHashPanel();
  }
}

start();
