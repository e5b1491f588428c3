// The step view: how one row of one head is computed. Transformer (§3.2.1-§3.2.3):
// x -> q = x W^Q, K, V -> q.k -> / sqrt(d_k) -> mask (-inf) -> exp -> / sum -> weighted sum of V, with the
// unscaled softmax(q.k) after it as a marked comparison (saturation), then the rest of the layer (layerstep.js).
// Beside each weight: ||f(x_j)|| = ||v_j W^O_h||, the length of what the key moves at weight 1, and the key's
// contribution alpha_j ||f(x_j)|| over the row's sum (the matrix's number with the measure on contributions).
// The table's columns follow the formula (q.k, / sqrt(d_k), exp, softmax): on a phone the weight is the
// last column in view, the comparison comes after it.
// RNN (Bahdanau / Luong): e^t = score(s_t, h_i) -> alpha^t = softmax(e^t) -> a_t -> tanh(W_c[a_t; s_t]) -> y^_t.
import {esc, fmt, showPiece} from "./api.js";
import {nth, t} from "./i18n.js";
import {layerSection} from "./layerstep.js";
import {bar, vec} from "./vectors.js";

function scaleVec(values, w) { return values.map(v => v * w); }


function keyRow(s, i, key) {
  const w = s.weights[i], u = s.unscaled_weights[i], masked = !s.mask[i];
  const norm = s.value_norms[i], share = s.contributions[i];
  return `<tr class="${masked ? "masked" : ""}" data-weight="${w}" data-unscaled="${u}" data-masked="${masked}" ` +
    `data-norm="${norm}" data-contribution="${share}">` +
    `<th scope="row">${esc(key)}</th><td>${fmt(s.dots[i])}</td>` +
    `<td>${masked ? `<span class="minf">−∞ (${esc(t("step.masked"))})</span>` : fmt(s.scores[i])}</td>` +
    `<td>${fmt(s.exps[i], 4)}</td><td class="w">${fmt(w)}</td><td>${bar(w)}</td>` +
    `<td class="norm" data-testid="step-norm">${fmt(norm)}</td><td>${fmt(share)}</td>` +
    `<td class="u cmp" data-testid="step-unscaled-cell">${fmt(u)} ${bar(u)}</td><td>${vec(s.keys[i], "k", 2)}</td>` +
    `<td>${vec(s.values[i], "v", 2)}</td><td>${vec(scaleVec(s.values[i], w), "softmax × v", 2)}</td></tr>`;
}

function saturation(s) {
  const top = xs => Math.max(...xs.filter((_, i) => s.mask[i]));
  return t("step.saturation", {unscaled: fmt(top(s.unscaled_weights)), scaled: fmt(top(s.weights)),
                               sqrt: Math.sqrt(s.d_k).toFixed(3)});
}

export function transformerStep(s, keys, caption) {
  const sqrt = Math.sqrt(s.d_k);
  const rows = s.weights.map((_, i) => keyRow(s, i, keys[i])).join("");
  return `<h3>${esc(t("step.title"))}: ${esc(caption)}</h3>
<p class="explain">${t("step.transformer")}</p>
<ol class="eq">
<li data-flow="x"><b>x</b> (d<sub>model</sub> = ${s.d_model}) = ${vec(s.x_vector, "x")}</li>
<li data-flow="qkv"><b>q</b> = x · W<sup>Q</sup><sub>h</sub> (${s.d_model} × ${s.d_k}) = ${vec(s.query_vector, "q")}
 (d<sub>k</sub> = ${s.d_k})</li>
<li><b>k</b><sub>j</sub> = x<sub>j</sub> · W<sup>K</sup><sub>h</sub>,
 <b>v</b><sub>j</sub> = x<sub>j</sub> · W<sup>V</sup><sub>h</sub>:
 ${esc(t("step.rows"))}${s.kind === "cross" ? " " + t("step.cross") : ""}</li>
<li data-flow="score">${esc(t("step.score_word"))}<sub>j</sub> = q·k<sub>j</sub> / √d<sub>k</sub>
 = q·k<sub>j</sub> / ${sqrt.toFixed(3)};
 ${esc(t("step.mask"))}</li>
<li>softmax<sub>j</sub> = exp(${esc(t("step.score_word"))}<sub>j</sub> − max) / Σ exp = exp / ${fmt(s.exp_sum, 4)}</li>
</ol>
<p class="note" data-testid="step-unscaled">${esc(saturation(s))}</p>
<p class="note" data-testid="step-norms">${esc(t("step.norms"))}</p>
<div class="table-box" data-flow="softmax"><table class="step" id="step-table">
<thead><tr><th>${esc(t("step.key"))}</th><th>q·k</th><th>÷ √d<sub>k</sub></th>
<th>exp</th><th class="w">softmax</th><th></th>
<th title="${esc(t("step.norm_title"))}">‖f(x<sub>j</sub>)‖</th>
<th title="${esc(t("step.share_title"))}">${esc(t("step.share"))}</th>
<th class="cmp" title="${esc(t("step.unscaled_title"))}">${esc(t("step.unscaled"))}</th>
<th>k</th><th>v</th><th>softmax × v</th></tr></thead>
<tbody>${rows}</tbody></table></div>
<p data-flow="out"><b>${esc(t("step.output"))}</b> Σ softmax<sub>j</sub> · v<sub>j</sub> =
 <span id="step-output">${vec(s.output, "output")}</span></p>
${s.layer_step ? layerSection(s, s.layer_step) : ""}`;
}

function rnnRow(s, i, key) {
  const w = s.weights[i], masked = !s.mask[i];
  return `<tr class="${masked ? "masked" : ""}" data-weight="${w}" data-masked="${masked}">` +
    `<th scope="row">${esc(key)}</th>` +
    `<td>${masked ? `<span class="minf">−∞ (${esc(t("step.masked"))})</span>` : fmt(s.scores[i])}</td>` +
    `<td class="w">${fmt(w)}</td><td>${bar(w)}</td><td>${vec(s.keys[i], "h", 2)}</td>` +
    `<td>${vec(scaleVec(s.keys[i], w), "alpha × h", 2)}</td></tr>`;
}

export function rnnStep(s, keys, caption) {
  const rows = s.weights.map((_, i) => rnnRow(s, i, keys[i])).join("");
  const top = s.top.map(o => `<li><b>${esc(showPiece(o.token))}</b> ${(100 * o.prob).toFixed(1)}%</li>`).join("");
  const decoder = s.decoder === "luong" ? "Luong (2015)" : "Bahdanau (2015)";
  return `<h3>${esc(t("step.title"))}: ${esc(caption)}</h3>
<p class="explain">${t("step.rnn")} ${decoder}, ${esc(s.rnn_cell)}.</p>
<ol class="eq">
<li><b>${esc(s.query_name)}</b> (${esc(t("step.state"))}, D = ${s.d_model}) = ${vec(s.query_vector, s.query_name)}</li>
<li>e<sup>t</sup><sub>i</sub> = score(s, h<sub>i</sub>): <b>${esc(s.score_name)}</b>,
 <code>${esc(s.score_formula)}</code>
 (${esc(t("step.rnn_score"))})</li>
<li>α<sup>t</sup> = softmax(e<sup>t</sup>) (${esc(t("step.rnn_alpha"))})</li>
</ol>
<div class="table-box"><table class="step" id="step-table">
<thead><tr><th>${esc(t("step.source"))}</th><th>e<sup>t</sup><sub>i</sub></th>
<th>α<sup>t</sup><sub>i</sub></th><th></th>
<th>h<sub>i</sub></th><th>α<sup>t</sup><sub>i</sub> h<sub>i</sub></th></tr></thead>
<tbody>${rows}</tbody></table></div>
<ol class="eq" start="4">
<li>a<sub>t</sub> = Σ α<sup>t</sup><sub>i</sub> h<sub>i</sub> (${esc(t("step.rnn_context"))}) =
 <span id="step-output">${vec(s.context, "a_t")}</span></li>
<li><code>${esc(s.output_formula)}</code> = ${vec(s.output_vector, "output")}</li>
<li>ŷ<sub>t</sub> = softmax(W<sub>y</sub> s̃<sub>t</sub> + b<sub>y</sub>): <ol class="top">${top}</ol></li>
</ol>`;
}

export function stepCaption(info, kind, layer, head, query, row) {
  // rows count from 1, as layers and heads (the URL's q= keeps the 0-based index)
  return !info.multi_head ? t("step.rnn_for", {row: nth(row), query})
    : t("step.for", {kind: t("kind." + kind), layer: nth(layer), head: nth(head), query, row: nth(row)});
}
