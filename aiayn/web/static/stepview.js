// The step view's panel: asks /api/step for the chosen row of the chosen head (in the word view: the
// first piece of the chosen word), drops an answer whose question was replaced, and draws it.
import {api, esc} from "./api.js";
import {lang, t} from "./i18n.js";
import {axesView} from "./matrix.js";
import {rnnStep, stepCaption, transformerStep} from "./step.js";

const $ = id => document.getElementById(id);

function stepKey(S) { return JSON.stringify([S.gen, S.kind, S.layer, S.head, S.words, S.query]); }

function pieceQuery(S, view) {
  // word view: a word's row is the mean of its pieces' rows; the step view computes its first piece
  return S.words ? view.qGroups[S.query][0] : S.query;
}

function show(panel, answer, keys, cap, reveal, note) {
  panel.innerHTML = (answer.arch === "rnn" ? rnnStep(answer, keys, cap) : transformerStep(answer, keys, cap)) + note;
  const box = panel.getBoundingClientRect();
  if (reveal && (box.top > window.innerHeight - 80 || box.bottom < 0)) panel.scrollIntoView({block: "start"});
}

export async function renderStep(S, view, reveal, onAnswer) {
  const panel = $("step"), key = stepKey(S);
  if (panel.dataset.key === key && panel.dataset.lang === lang()) return;
  panel.dataset.key = key; panel.dataset.lang = lang();
  const title = `<h3>${esc(t("step.title"))}</h3>`;
  if (S.query === null) { panel.innerHTML = `${title}<p class="explain">${esc(t("step.empty"))}</p>`; return; }
  if (S.layer === "mean" || S.head === "mean") {
    panel.innerHTML = `${title}<p class="note">${esc(t("step.mean"))}</p>`; return;
  }
  const q = pieceQuery(S, view), pieces = axesView(S.data, S.kind, false), r = pieces.rows[q];
  const query = (r.label + " " + (r.sub || "")).trim(), cap = stepCaption(S.data, S.kind, S.layer, S.head, query, q);
  const note = S.words ? `<p class="note">${esc(t("step.words", {word: view.rows[S.query].label ||
    view.rows[S.query].sub}))}</p>` : "";
  const keys = pieces.cols.map(c => c.label);
  if (S.step && S.step.key === key) { show(panel, S.step.answer, keys, cap, reveal, note); return; }
  panel.innerHTML = `${title}<p class="busy">${esc(t("computing"))}</p>`;
  panel.setAttribute("aria-busy", "true");
  try {
    const answer = await api("/api/step", {source_ids: S.data.source_ids, target_input_ids: S.data.target_input_ids,
      kind: S.kind, layer: Number(S.layer), head: Number(S.head), query: q});
    if (panel.dataset.key !== key) return;  // the question changed while this was computed
    S.step = {key, answer};
    show(panel, answer, keys, cap, reveal, note);
    onAnswer(answer);
  } catch (e) {
    if (panel.dataset.key === key) panel.innerHTML = `${title}<p class="error" role="alert">${esc(e.message)}</p>`;
  } finally {
    if (panel.dataset.key === key) panel.setAttribute("aria-busy", "false");
  }
}
