// The step view of a word (the word view): what the heatmap's row of a word is made of. Each of its pieces'
// rows is computed by /api/step; a key word's weight in a piece's row is the sum of its pieces' weights, and
// the word's row is the mean of its pieces' rows: viewCell, the heatmap's own merge (matrix.js, as
// aiayn.inspect.maps.capture.merge_subwords). Then one piece's full step, chosen with the buttons.
import {esc, fmt} from "./api.js";
import {nth, t} from "./i18n.js";
import {isMasked, keySum, viewCell} from "./matrix.js";
import {bar} from "./vectors.js";

function wordName(S, view) {
  // the word of the row: a source word, or the output word a decoder row predicts
  const r = view.rows[S.query];
  return r.sub ? r.sub.replace(/^→ /, "") : r.label;
}

export function pieceCaption(S, view, query, q) {
  return t("step.piece_for", {piece: query, row: nth(q), word: wordName(S, view)});
}

function wordRow(S, view, answers, rows) {
  // the word's cells from its pieces' rows, with the heatmap's merge
  const pieces = [];
  rows.forEach((q, i) => { pieces[q] = answers[i].weights; });
  return view.kGroups.map((_, k) => viewCell(view, pieces, S.query, k));
}

function table(S, view, pieces, answers, rows) {
  const merged = wordRow(S, view, answers, rows);
  const head = rows.map(q => `<th scope="col">${esc(pieces.rows[q].sub ? pieces.rows[q].sub.replace(/^→ /, "")
    : pieces.rows[q].label)}</th>`).join("");
  const body = view.cols.map((c, k) => {
    const masked = isMasked(view, S.query, k);
    const cells = answers.map(a => `<td data-piece-weight="${keySum(view, a.weights, k)}">` +
      `${masked ? "−∞ → 0" : fmt(keySum(view, a.weights, k))}</td>`).join("");
    return `<tr class="${masked ? "masked" : ""}" data-k="${k}" data-weight="${merged[k]}"><th scope="row">` +
      `${esc(c.label)}</th><td class="w">${fmt(merged[k])}</td><td>${bar(merged[k])}</td>${cells}</tr>`;
  }).join("");
  return `<div class="table-box"><table class="step" id="step-word-table" data-testid="step-word-row">
<thead><tr><th>${esc(t("step.key_word"))}</th><th>${esc(t("step.word_mean"))}</th><th></th>${head}</tr></thead>
<tbody>${body}</tbody></table></div>`;
}

function pickers(pieces, rows, shown) {
  const buttons = rows.map((q, i) => {
    const r = pieces.rows[q], label = (r.label + " " + (r.sub || "")).trim();
    return `<button type="button" class="chip piece" data-shown="${i}" aria-pressed="${i === shown}">` +
      `${esc(label)}</button>`;
  }).join("");
  return `<div class="row chips" role="group" aria-label="${esc(t("step.word_pick"))}">` +
    `<span>${esc(t("step.word_pick"))}</span>${buttons}</div>`;
}

export function wordStep(S, view, pieces, answers, shown) {
  const rows = view.qGroups[S.query], word = wordName(S, view), n = rows.length;
  const caption = !S.info.multi_head ? t("step.word_rnn_for", {word, row: nth(S.query)})
    : t("step.word_for", {kind: t("kind." + S.kind), layer: nth(S.layer), head: nth(S.head), word, row: nth(S.query)});
  const explain = t(n === 1 ? "step.word_one" : "step.word_explain", {word, n});
  return `<h3>${esc(t("step.title"))}: ${esc(caption)}</h3>
<p class="explain" data-testid="step-word-explain">${esc(explain)}</p>
${table(S, view, pieces, answers, rows)}
<p class="note">${esc(t("step.word_check"))}</p>
${pickers(pieces, rows, shown)}`;
}
