// The step view's panel: asks /api/step for the chosen row of the chosen head, drops an answer whose
// question was replaced, and draws it. In the word view a word's row is the mean of its pieces' rows, keys
// summed per word (matrix.js, as the heatmap): every piece's row is asked for, one request at a time, and
// the panel shows the word's row made of them, then the full step of one piece (wordstep.js).
import {api, esc} from "./api.js";
import {lang, t} from "./i18n.js";
import {axesView} from "./matrix.js";
import {wireFlow} from "./flow.js";
import {rnnStep, stepCaption, transformerStep} from "./step.js";
import {pieceCaption, wordStep} from "./wordstep.js";

const $ = id => document.getElementById(id);

export function stepKey(S) {
  return JSON.stringify([S.gen, S.kind, S.layer, S.head, S.words, S.query, S.temperature || 1]);
}

function stepHtml(info, answer, keys, cap) {
  return info.multi_head ? transformerStep(answer, keys, cap) : rnnStep(answer, keys, cap);
}

function reveal(panel) {
  const box = panel.getBoundingClientRect();
  if (box.top > window.innerHeight - 80 || box.bottom < 0) panel.scrollIntoView({block: "start"});
}

function draw(S, view, answers, shown, onAnswer) {
  // piece view: the row's step; word view: the word's row, then the step of its piece `shown`
  const panel = $("step"), pieces = axesView(S.data, S.kind, false), keys = pieces.cols.map(c => c.label);
  const rows = S.words ? view.qGroups[S.query] : [S.query];
  const q = rows[shown], r = pieces.rows[q], query = (r.label + " " + (r.sub || "")).trim();
  if (!S.words) {
    panel.innerHTML = stepHtml(S.info, answers[0], keys, stepCaption(S.info, S.kind, S.layer, S.head, query, q));
  } else {
    panel.innerHTML = wordStep(S, view, pieces, answers, shown) +
      `<div id="step-piece">${stepHtml(S.info, answers[shown], keys, pieceCaption(S, view, query, q))}</div>`;
    panel.querySelectorAll("button.piece").forEach(b => b.addEventListener("click", () => {
      S.step.shown = Number(b.dataset.shown);
      draw(S, view, answers, S.step.shown, onAnswer);
      panel.querySelector(`button.piece[data-shown="${S.step.shown}"]`)?.focus();
    }));
  }
  if (S.info.multi_head) wireFlow(panel.querySelector("#step-piece") || panel);
  wireTemperature(S, view, onAnswer);
  S.step.answer = answers[shown];  // the FFN panel's row: the step shown
  onAnswer(answers[shown]);
}

function wireTemperature(S, view, onAnswer) {
  // the next-token list's temperature: the row asked again at the new T (the server's softmax(logits / T))
  const slider = $("step").querySelector("[data-testid=temperature] input");
  if (!slider) return;
  const shown = slider.parentElement.querySelector("output");
  slider.addEventListener("input", () => { shown.textContent = Number(slider.value).toFixed(1); });
  slider.addEventListener("change", () => {
    S.temperature = Number(slider.value);
    const refocus = () => $("step").querySelector("[data-testid=temperature] input")?.focus();
    renderStep(S, view, false, onAnswer).then(refocus);
  });
}

async function ask(S, rows, key) {
  // one request per row, in turn (the server takes one step at a time per client); null when replaced
  const answers = [];
  for (const query of rows) {
    answers.push(await api("/api/step", {source_ids: S.data.source_ids, target_input_ids: S.data.target_input_ids,
      kind: S.kind, layer: Number(S.layer), head: Number(S.head), query, temperature: S.temperature || 1}));
    if ($("step").dataset.key !== key) return null;  // the question changed while this was computed
  }
  return answers;
}

export async function renderStep(S, view, show, onAnswer) {
  const panel = $("step"), key = stepKey(S);
  if (panel.dataset.key === key && panel.dataset.lang === lang()) return;
  panel.dataset.key = key; panel.dataset.lang = lang();
  const title = `<h3>${esc(t("step.title"))}</h3>`;
  if (S.query === null) { panel.innerHTML = `${title}<p class="explain">${esc(t("step.empty"))}</p>`; return; }
  if (S.layer === "mean" || S.head === "mean") {
    panel.innerHTML = `${title}<p class="note">${esc(t("step.mean"))}</p>`; return;
  }
  if (S.step && S.step.key === key) { draw(S, view, S.step.answers, S.step.shown, onAnswer); return; }
  panel.innerHTML = `${title}<p class="busy">${esc(t("computing"))}</p>`;
  panel.setAttribute("aria-busy", "true");
  try {
    const answers = await ask(S, S.words ? view.qGroups[S.query] : [S.query], key);
    if (answers === null) return;
    S.step = {key, answers, shown: 0, answer: answers[0]};
    draw(S, view, answers, 0, onAnswer);
    if (show) reveal(panel);
  } catch (e) {
    if (panel.dataset.key === key) panel.innerHTML = `${title}<p class="error" role="alert">${esc(e.message)}</p>`;
  } finally {
    if (panel.dataset.key === key) panel.setAttribute("aria-busy", "false");
  }
}
