// The paper's Figure 1 drawn by the page: the encoder and decoder stacks, where the current kind, layer
// and head sit, and buttons that open the positional-encoding panel (the model's own table, §3.5) and
// the FFN panel (§3.3, the step view's row).
import {esc, fmt} from "./api.js";
import {nth, t} from "./i18n.js";

const ENCODER = [["embed", "arch.embed"], ["pe", "arch.pe"], ["encoder_self", "arch.mha"], ["norm", "arch.addnorm"],
                 ["ffn", "arch.ffn"], ["norm", "arch.addnorm"]];
const DECODER = [["embed", "arch.out_embed"], ["pe", "arch.pe"], ["decoder_self", "arch.masked_mha"],
                 ["norm", "arch.addnorm"], ["cross", "arch.cross_mha"], ["norm", "arch.addnorm"], ["ffn", "arch.ffn"],
                 ["norm", "arch.addnorm"], ["linear", "arch.linear"], ["softmax", "arch.softmax"]];

function block(part, key, S) {
  const current = part === S.kind;
  const where = t("arch.here", {layer: nth(S.layer), head: nth(S.head)});
  const here = current ? ` <span class="here">${esc(where)}</span>` : "";
  const tag = ["pe", "ffn", "encoder_self", "decoder_self", "cross"].includes(part) ? "button" : "div";
  const type = tag === "button" ? ' type="button"' : "";
  return `<${tag}${type} class="blk blk-${part}${current ? " current" : ""}" data-part="${part}"` +
    `${current ? ' aria-current="true"' : ""}>${esc(t(key))}${here}</${tag}>`;
}

export function drawArch(box, S, info, onPart) {
  const stack = (name, parts, n) => `<div class="stack"><h3>${esc(t(name))} <span class="nx">× ${n}</span></h3>` +
    parts.map(([part, key]) => block(part, key, S)).join("") + `</div>`;
  box.innerHTML = `<div class="arch">${stack("arch.encoder", ENCODER, info.n_encoder_layers)}` +
    `${stack("arch.decoder", DECODER, info.n_decoder_layers)}</div>`;
  box.querySelectorAll("button.blk").forEach(b => b.addEventListener("click", () => onPart(b.dataset.part)));
}

function heat(canvas, rows, lo, hi) {
  // blue for positive, red for negative, white at 0
  const R = rows.length, C = rows[0].length, cell = Math.max(1, Math.floor(600 / C));
  canvas.width = C * cell; canvas.height = R * 4;
  const ctx = canvas.getContext("2d");
  rows.forEach((row, r) => row.forEach((v, c) => {
    const a = Math.min(1, Math.abs(v) / Math.max(Math.abs(lo), Math.abs(hi)));
    ctx.fillStyle = v >= 0 ? `rgba(29, 78, 216, ${a})` : `rgba(220, 38, 38, ${a})`;
    ctx.fillRect(c * cell, r * 4, cell, 4);
  }));
}

// columns are dimensions 0, 1, 2, …: dimension 2i is a sine, 2i + 1 a cosine
function numbersTable(table) {
  const P = Math.min(6, table.length), D = Math.min(6, table[0].length);
  const head = [...Array(D).keys()].map(i => `<th>${i}</th>`).join("");
  const rows = table.slice(0, P).map((row, p) => `<tr><th>${p}</th>` +
    row.slice(0, D).map((v, i) => `<td data-pos="${p}" data-dim="${i}" data-value="${v}">${fmt(v, 3)}</td>`).join("") +
    "</tr>").join("");
  const corner = `<th>${esc(t("pe.corner"))}</th>`;
  return `<div class="table-box"><table class="step pe-numbers"><thead><tr>${corner}${head}</tr></thead>` +
    `<tbody>${rows}</tbody></table></div>`;
}

export function drawPositions(box, pe) {
  if (!pe) { box.innerHTML = `<p class="note">${esc(t("pe.none"))}</p>`; return; }
  const offsets = pe.dots[0].slice(0, 12)
    .map((v, k) => `<li data-offset="${k}" data-dot="${v}">${k}: ${fmt(v, 2)}</li>`);
  box.innerHTML = `<p class="explain">${esc(t(pe.kind === "sinusoidal" ? "pe.explain" : "pe.learned"))}</p>
<p class="caption">${esc(t("pe.table", {p: pe.table.length, d: pe.d_model, max: pe.max_len}))}</p>
<canvas id="pe-heat" class="pe-heat" aria-label="${esc(t("pe.table_label"))}"></canvas>${numbersTable(pe.table)}
<p class="caption">${esc(t("pe.dots"))}</p><canvas id="pe-dots" class="pe-heat"></canvas>
<p class="caption">${esc(t("pe.offsets"))}</p><ol class="offsets" start="0">${offsets.join("")}</ol>`;
  heat(box.querySelector("#pe-heat"), pe.table, -1, 1);
  const flat = pe.dots.flat();
  heat(box.querySelector("#pe-dots"), pe.dots, Math.min(...flat), Math.max(...flat));
}

export function drawFfn(box, info, step) {
  const l = step && step.layer_step;
  const head = `<p class="explain">${esc(t("ffn.explain", {d: info.d_model, dff: info.d_ff}))}</p>`;
  if (!l) { box.innerHTML = head + `<p class="note">${esc(t("ffn.pick"))}</p>`; return; }
  const active = l.ffn_hidden.filter(v => v > 0).length;
  const top = l.ffn_hidden.map((v, i) => [v, i]).sort((a, b) => b[0] - a[0]).slice(0, 8)
    .map(([v, i]) => `<li data-unit="${i}" data-value="${v}">${esc(t("ffn.unit"))} ${i}: ${fmt(v, 3)}</li>`).join("");
  box.innerHTML = head + `<p>${esc(t("ffn.active", {n: active, of: l.d_ff}))}</p>
<canvas id="ffn-strip" class="pe-heat"></canvas><p class="caption">${esc(t("ffn.top"))}</p><ol class="top">${top}</ol>`;
  const rows = [], width = 64;
  for (let i = 0; i < l.ffn_hidden.length; i += width) rows.push(l.ffn_hidden.slice(i, i + width));
  const last = rows[rows.length - 1];
  while (last.length < width) last.push(0);
  const flat = l.ffn_hidden;
  heat(box.querySelector("#ffn-strip"), rows, Math.min(...flat), Math.max(...flat, 1e-9));
}
