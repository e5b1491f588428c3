// The rest of the layer for the step view's row (aiayn.inspect.steps.layer_step): every head's output,
// Concat · W^O (§3.2.2), the residual and LayerNorm (§3.1), the FFN (§3.3) and its Add & Norm: the
// layer's output; in the decoder's last layer the next-token distribution's top k.
import {esc, showPiece} from "./api.js";
import {nth, t} from "./i18n.js";
import {bar, vec} from "./vectors.js";

function headsList(s, l) {
  const d = l.heads[0].length;
  return l.heads.map((h, i) => `<li class="${i === s.head ? "current" : ""}">${esc(t("head"))} ${nth(i)}: ` +
    `${vec(h, "head " + (i + 1), 3)}</li>`).join("") + `<li class="note">${esc(t("layer.heads_note", {d}))}</li>`;
}

function addNorm(l, x, after, name) {
  return l.norm_first
    ? `x + ${name} = ${vec(after, "x + " + name)} <span class="note">(${esc(t("layer.pre_ln"))})</span>`
    : `LayerNorm(x + ${name}) = ${vec(after, "LayerNorm")}`;
}

function nextTokens(l) {
  if (!l.next_tokens) return "";
  const items = l.next_tokens.map(o => `<li data-id="${o.id}" data-prob="${o.prob}">` +
    `<b>${esc(showPiece(o.token))}</b> ` +
    `${(100 * o.prob).toFixed(2)}% ${bar(o.prob)}</li>`).join("");
  const T = l.temperature || 1;
  const slider = `<label class="temperature" data-testid="temperature">${esc(t("layer.temperature"))} ` +
    `<input type="range" min="0.1" max="3" step="0.1" value="${T}" aria-label="${esc(t("layer.temperature"))}"> ` +
    `<output>${T.toFixed(1)}</output></label>`;
  return `<h4>${esc(t("layer.next"))}</h4><p class="explain">${esc(t("layer.next_explain"))}</p>` + slider +
    `<p class="explain">${esc(t("layer.temperature_explain"))}</p>` +
    `<ol class="top" data-testid="step-next-token" data-flow="next" data-temperature="${T}">${items}</ol>`;
}

export function layerSection(s, l) {
  const cross = l.after_cross ? `<li>${esc(t("layer.cross_sublayer"))} = ${vec(l.after_cross, "cross")}</li>` : "";
  return `<h4>${esc(t("layer.title"))}</h4>
<p class="explain">${esc(t("layer.explain"))}</p>
<ol class="eq" id="layer-steps">
<li>${esc(t("layer.heads", {n: l.n_heads}))}<ul class="heads">${headsList(s, l)}</ul></li>
<li data-flow="concat">Concat(head<sub>1</sub>, …, head<sub>h</sub>) = ${vec(l.concat, "concat")}</li>
<li>Concat · W<sup>O</sup> (${l.concat.length} × ${l.projected.length}) = ${vec(l.projected, "W^O")}</li>
<li>x + ${esc(t("layer.attn"))} = ${vec(l.residual_sum, "x + attention")}</li>
<li id="layer-after-attention" data-flow="norm1">${addNorm(l, null, l.after_attention, esc(t("layer.attn")))}</li>
${cross}
<li data-flow="ffn">FFN: max(0, x W<sub>1</sub> + b<sub>1</sub>) (d<sub>ff</sub> = ${l.d_ff})
 = ${vec(l.ffn_hidden, "FFN hidden")}
 · W<sub>2</sub> + b<sub>2</sub> = ${vec(l.ffn_output, "FFN")}</li>
<li id="layer-output" data-flow="norm2">${esc(t("layer.output"))}: ${addNorm(l, null, l.layer_output, "FFN")}</li>
</ol>
${nextTokens(l)}`;
}
