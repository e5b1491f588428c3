// "Without this head": the sentence translated again with the chosen head's output set to 0 before W^O
// (POST /api/translate with "without_heads"; aiayn.web.ablated), shown under the matrix's controls beside the
// translation with every head: the words that changed marked on both sides, and how far the score and the
// log-probability moved. On a wide screen the comparison goes under the matrix instead, so that the matrix
// stays where it was, in the first screen. The answer is kept for its sentence and head only: another head,
// sentence or beam clears it. The page's state stays in app.js (S).
import {api, esc, fmt} from "./api.js";
import {t} from "./i18n.js";
import {which} from "./render.js";

const $ = id => document.getElementById(id);
const WIDE = matchMedia("(min-width: 1100px)");  // style.css's two columns

export function createAblation(S) {
  const own = {key: null, answer: null, error: ""};
  place();
  WIDE.addEventListener("change", place);

  function chosen() {
    // the head the matrix shows, or null where there is no one head (a mean, an RNN's one attention)
    if (!S.data || !S.info.multi_head || S.layer === "mean" || S.head === "mean") return null;
    return {kind: S.kind, layer: S.layer, head: S.head};
  }

  function keyOf(head) { return head && JSON.stringify([S.text, S.prefix, S.beam, head]); }

  async function run() {
    const head = chosen(), gen = S.gen;
    if (!head) return;
    const key = keyOf(head), body = {text: S.text, beam: S.beam, attention: false, without_heads: [head]};
    Object.assign(own, {key, answer: null, error: ""});
    show(t("computing"));
    try {
      const answer = await api("/api/translate", S.prefix ? {...body, target_prefix: S.prefix} : body);
      if (gen === S.gen && own.key === key) own.answer = answer;
    } catch (e) {
      if (gen === S.gen && own.key === key) own.error = e.message;  // one line; the maps stay up
    }
    if (own.key !== key) return;
    sync();
    if (WIDE.matches) $("ablation").scrollIntoView({block: "nearest"});  // under the matrix: maybe below the screen
  }

  function show(text) { $("ablation").hidden = false; $("ablation").textContent = text; }

  function sync() {
    // the button for the head in view; the comparison only while it is that head's, redrawn in the language
    const head = chosen(), box = $("ablation");
    $("without-head").hidden = !head;
    for (const b of document.querySelectorAll("[data-testid=search-without-head]")) {
      b.hidden = !head;  // the head search's button names the head in view, in the page's language
      if (head) b.textContent = t("ablate.search", {which: which(S)});
    }
    if (!head || keyOf(head) !== own.key) { box.hidden = true; box.replaceChildren(); return; }
    if (own.error) { box.hidden = false; box.replaceChildren(Object.assign(document.createElement("p"),
      {className: "note", textContent: own.error})); return; }
    if (own.answer) draw(box, own.answer, which(S), S.data.teacher_forced);
  }

  return {run, sync};
}

function place() {
  // under the matrix's controls, or on a wide screen under the matrix and the line its hovered cell writes
  const box = $("ablation"), after = WIDE.matches ? $("hover-view") : document.querySelector("#matrix-panel .controls");
  if (after.nextElementSibling !== box) after.after(box);
}

function draw(box, answer, label, forced) {
  const before = answer.with_every_head, [was, now] = marked(before.translation, answer.translation);
  const same = before.translation === answer.translation;
  const row = (name, testid, words, r, delta) => `<tr><th scope="row">${esc(t(name))}</th>` +
    `<td class="abl-text" data-testid="${testid}">${words}</td>` +
    `<td class="abl-score">${esc(t("ablate.score"))} ${fmt(r.score)}${delta(r.score, before.score)}</td>` +
    `<td class="abl-lp">log P ${fmt(r.log_prob)}${delta(r.log_prob, before.log_prob)}</td></tr>`;
  const none = () => "", change = (x, base) => ` <span class="delta">(Δ ${signed(x - base)})</span>`;
  box.hidden = false;
  box.innerHTML = `<p class="caption">${esc(t("ablate.title", {which: label}))}</p>` +
    `<div class="table-box"><table class="step ablation-table">` +
    row("ablate.every", "ablation-before", was, before, none) +
    row("ablate.without", "ablation-after", now, answer, change) + `</table></div>` +
    `<p class="explain">${esc(t(same ? "ablate.same" : "ablate.changed"))}` +
    `${forced ? " " + esc(t("ablate.forced")) : ""}</p>`;
  box.dataset.changed = String(!same);
}

function signed(x) { return (x >= 0 ? "+" : "−") + Math.abs(x).toFixed(3); }

// both translations' words, those outside their longest common subsequence marked (<del> on the translation
// with every head, <ins> on the one without): the words the head's removal changed
export function marked(a, b) {
  const x = a.split(/\s+/).filter(Boolean), y = b.split(/\s+/).filter(Boolean);
  const L = Array.from({length: x.length + 1}, () => new Array(y.length + 1).fill(0));
  for (let i = x.length - 1; i >= 0; i--) {
    for (let j = y.length - 1; j >= 0; j--) {
      L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
    }
  }
  const keepX = new Set(), keepY = new Set();
  for (let i = 0, j = 0; i < x.length && j < y.length;) {
    if (x[i] === y[j]) { keepX.add(i++); keepY.add(j++); } else if (L[i + 1][j] >= L[i][j + 1]) i++; else j++;
  }
  const words = (w, keep, tag) => w.map((s, i) => (keep.has(i) ? esc(s) : `<${tag}>${esc(s)}</${tag}>`)).join(" ");
  return [words(x, keepX, "del"), words(y, keepY, "ins")];
}
