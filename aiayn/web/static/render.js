// Drawing every panel of the current view from the page's state S alone (owned by app.js, passed in).
import {esc, showPiece} from "./api.js";
import {lang, layerName, nth, t} from "./i18n.js";
import {alignedCells, axesView, drawLegend, drawMatrix, pieceMatrix, topKeys, viewMatrix, wordAxes} from "./matrix.js";
import {drawHeadChips, drawLines, drawOverview, headColour} from "./overview.js";

const $ = id => document.getElementById(id);

export function currentView(S) { return axesView(S.data, S.kind, S.words); }

export function currentMatrix(S, view) { return viewMatrix(view, pieceMatrix(S.data.maps[S.kind], S.layer, S.head)); }

// the model's facts (/api/info): its attention in layers of heads, or one map of a recurrent decoder
export function kindName(S, kind) { return S.info.multi_head ? t("kind." + kind) : t("kind.rnn"); }

export function which(S) {
  const measure = S.data && S.data.measure === "contributions" ? ` · ${t("measure.contributions")}` : "";
  return S.info.multi_head ? `${t("kind." + S.kind)} · ${layerName(S.layer)} · ${t("head")} ${nth(S.head)}${measure}`
    : kindName(S, S.kind);
}

export function caption(S) {
  const forced = S.data.teacher_forced ? ` (${t("result.forced")})` : "";
  // the sentence as the matrix shows it: its words in the word view, else its pieces
  const source = S.words ? wordAxes(S.data).source[0] : S.data.source_tokens.map(showPiece);
  return `${which(S)} · “${source.join(" ")}” → “${S.data.translation}”${forced}`;
}

function alignLegend(S) {
  // where the server's word links come from (aiayn serve --alignment-head), in words
  const a = S.data.alignment, rnn = !S.info.multi_head;
  const from = rnn ? t("align.rnn") : a.head === null ? t("align.layer_mean", {layer: nth(a.layer)})
    : t("align.head", {layer: nth(a.layer), head: nth(a.head)});
  const spec = `${nth(a.layer)}:${a.head === null ? "mean" : nth(a.head)}`;
  const parts = [t("align.legend", {from}), S.data.measure === "contributions" ? t("align.contributions") : "",
                 rnn ? "" : t("align.chosen." + a.chosen, {spec}),
                 t(S.data.teacher_forced ? "align.forced" : "align.own"), S.words ? "" : t("align.pieces")];
  return parts.filter(Boolean).join(" ");
}

export function withCode(box, text) {
  // text whose `backquoted` parts are commands: each in a <code> that does not break (at 360 px the
  // legend broke "--alignment-head" after its "--")
  box.replaceChildren(...text.split("`").map((part, i) => {
    if (i % 2 === 0) return document.createTextNode(part);
    const code = document.createElement("code");
    code.textContent = part;
    return code;
  }));
}

function renderAlignment(S, view) {
  // the word alignment's toggle and legend (cross-attention only) -> the cells to outline, or null
  const cross = S.kind === "cross" && Boolean(S.data.alignment), on = cross && S.align;
  $("align-row").hidden = !cross;
  $("alignment").checked = S.align;
  $("align-legend").hidden = !on;
  withCode($("align-legend"), on ? alignLegend(S) : "");
  return on ? alignedCells(S.data, view) : null;
}

export function renderMaps(S, handlers) {
  const view = currentView(S), matrix = currentMatrix(S, view), aligned = renderAlignment(S, view);
  $("kind-explain").textContent = t("explain." + S.kind);
  $("words-rule").hidden = !S.words;
  $("row-note").hidden = S.kind === "encoder_self";
  $("matrix-caption").textContent = caption(S);
  drawLegend($("legend"), S.scale);
  drawOverview($("overview"), S.data.maps[S.kind], view, S, handlers.pickHead);
  drawMatrix($("heatmap"), view, matrix, {caption: caption(S), query: S.query, scale: S.scale, numbers: S.numbers,
                                          aligned});
  renderFocus(S, handlers, view, matrix);
  return view;
}

export function renderFocus(S, handlers, view = currentView(S), matrix = currentMatrix(S, view)) {
  // what depends on the query shown: the hover line, the line view, the row highlight
  const q = S.preview ?? S.query;
  const row = q === null ? null : matrix[q];
  const r = q === null ? null : view.rows[q];
  $("hover-view").textContent = row
    ? t("hover.top", {query: (r.label + " " + (r.sub || "")).trim(), keys: topKeys(view, row, q).join(", ")}) : "";
  document.querySelectorAll("#heatmap tr.hl").forEach(tr => tr.classList.remove("hl"));
  if (q !== null) document.querySelector(`#heatmap tbody tr[data-q="${q}"]`)?.classList.add("hl");
  renderLines(S, handlers, view, matrix, q);
}

function lineLayers(S, view, matrix) {
  // the heads chosen with the chips, each in its colour; none chosen: the matrix's own head (or mean)
  const maps = S.data.maps[S.kind];
  if (!S.lineHeads.length) return [{matrix, colour: headColour(S.head), head: S.head}];
  return S.lineHeads.map(h => ({matrix: viewMatrix(view, pieceMatrix(maps, S.layer, h)), colour: headColour(h),
                                head: h}));
}

function lineCaption(S) {
  if (!S.info.multi_head) return kindName(S, S.kind);
  const base = `${t("kind." + S.kind)} · ${layerName(S.layer)} · `;
  if (!S.lineHeads.length) return `${base}${t("head")} ${nth(S.head)} ${t("lines.as_matrix")}`;
  return `${base}${t(S.lineHeads.length > 1 ? "lines.heads_n" : "head")} ${S.lineHeads.map(nth).join(", ")}`;
}

function renderLines(S, handlers, view, matrix, q) {
  const H = S.data.maps[S.kind][0].length, layers = lineLayers(S, view, matrix);
  $("head-pick").hidden = H === 1;
  drawHeadChips($("line-legend"), H, S.lineHeads, handlers.toggleLineHead);
  $("overlay").checked = H > 1 && S.lineHeads.length === H;
  $("overlay").indeterminate = S.lineHeads.length > 0 && S.lineHeads.length < H;
  const text = lineCaption(S);
  if ($("line-caption").textContent !== text) $("line-caption").textContent = text;  // announced on change only
  // the colours in words too: where each drawn head looks most, for the query shown
  $("line-tops").replaceChildren(...(q === null || layers.length < 2 ? [] : layers.map(l => {
    const li = document.createElement("li");
    li.style.setProperty("--c", l.colour);
    li.innerHTML = `<span class="dot" aria-hidden="true"></span>${esc(`${t("head")} ${nth(l.head)}`)}: ` +
      esc(topKeys(view, l.matrix[q], q, 2).join(", "));
    return li;
  })));
  drawLines($("lines"), view, layers, q, S.scale, {preview: handlers.previewQuery, select: q2 => handlers.select(q2)},
            JSON.stringify([S.gen, S.kind, S.words, lang()]));
}

export function renderResult(S) {
  const d = S.data;
  $("result-kind").textContent = d.teacher_forced ? t("result.forced_long") : t("result.own", {
    score: d.score === null ? "" : d.score.toFixed(3)});
  $("translation").textContent = d.translation;
  const probs = d.target_tokens.map((p, i) => `<span class="tp" data-prob="${d.token_probs[i]}" title="p = ` +
    `${d.token_probs[i].toFixed(4)}">${esc(showPiece(p))}` +
    `<small>${(100 * d.token_probs[i]).toFixed(1)}%</small></span>`);
  $("token-probs").innerHTML = `<span class="note">${esc(t("result.probs"))}</span> ${probs.join(" ")}`;
  smoothingNote($("smoothing-note"), S.info);
}

function smoothingNote(box, info) {
  // label smoothing (§5.4) trains the right token towards 1 - eps + eps/V, not 1: a sure token shows about that
  const eps = info.label_smoothing, V = info.tgt_vocab_size;
  box.hidden = !(eps > 0);
  if (box.hidden) return;
  const cap = 1 - eps + eps / V;
  box.textContent = t("result.smoothing", {eps, V: V.toLocaleString("en"), cap: cap.toFixed(4),
                                           pct: (100 * cap).toFixed(1)});
}
