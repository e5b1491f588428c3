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

function block(part, key, S, stack) {
  // stack: "encoder" or "decoder"; current: the attention shown; open: the panel shown (the FFN in its own stack)
  const current = part === S.kind;
  const open = part === S.open && (part !== "ffn" || stack === ffnStack(S.kind));
  const where = t("arch.here", {layer: nth(S.layer), head: nth(S.head)});
  const here = current ? ` <span class="here">${esc(where)}</span>` : "";
  const tag = ["pe", "ffn", "encoder_self", "decoder_self", "cross"].includes(part) ? "button" : "div";
  const type = tag === "button" ? ' type="button"' : "";
  return `<${tag}${type} class="blk blk-${part}${current ? " current" : ""}${open ? " open" : ""}"` +
    ` data-part="${part}" data-stack="${stack}"${["pe", "ffn"].includes(part) ? ` aria-expanded="${open}"` : ""}` +
    `${current ? ' aria-current="true"' : ""}>${esc(t(key))}${here}</${tag}>`;
}

// the stack whose FFN the step view's row goes through: the encoder's for encoder self-attention, else the decoder's
export function ffnStack(kind) { return kind === "encoder_self" ? "encoder" : "decoder"; }

export function drawArch(box, S, info, onPart) {
  const stack = (name, parts, n, which) => `<div class="stack">` +
    `<h3>${esc(t(name))} <span class="nx">× ${n}</span></h3>` +
    parts.map(([part, key]) => block(part, key, S, which)).join("") + `</div>`;
  box.innerHTML = `<div class="arch">${stack("arch.encoder", ENCODER, info.n_encoder_layers, "encoder")}` +
    `${stack("arch.decoder", DECODER, info.n_decoder_layers, "decoder")}</div>`;
  box.querySelectorAll("button.blk").forEach(b => b.addEventListener("click", () => onPart(b.dataset.part,
                                                                                         b.dataset.stack)));
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

function dotsMap(dots) {
  // PE(i) · PE(j) as a square (P x P) with its axes: j across, i down, ticks every 10 positions
  const P = dots.length, flat = dots.flat(), lo = Math.min(...flat), hi = Math.max(...flat);
  const m = Math.max(Math.abs(lo), Math.abs(hi)), pad = 22, size = 300, c = size / P;
  const cells = dots.map((row, i) => row.map((v, j) => `<rect x="${(pad + j * c).toFixed(2)}" y="${(pad + i * c)
    .toFixed(2)}" width="${(c + 0.05).toFixed(2)}" height="${(c + 0.05).toFixed(2)}" fill="${v >= 0 ? "rgb(29,78,216)"
    : "rgb(220,38,38)"}" fill-opacity="${(Math.abs(v) / m).toFixed(3)}"/>`).join("")).join("");
  const ticks = [...Array(Math.ceil(P / 10)).keys()].map(k => k * 10).map(p =>
    `<text x="${pad + (p + 0.5) * c}" y="${pad - 6}" text-anchor="middle">${p}</text>` +
    `<text x="${pad - 4}" y="${pad + (p + 0.5) * c + 4}" text-anchor="end">${p}</text>`).join("");
  return `<figure class="pe-square"><div class="axis">${esc(t("pe.axis_j"))}</div>` +
    `<svg id="pe-dots" viewBox="0 0 ${pad + size + 2} ${pad + size + 2}" role="img" ` +
    `aria-label="${esc(t("pe.dots"))}">${ticks}${cells}</svg><div class="axis">${esc(t("pe.axis_i"))}</div></figure>`;
}

function curveDims(d) {
  // a few sine dimensions from fast to slow: 0, 2 and two further along (even, below d)
  return [...new Set([0, 2, 2 * Math.floor(d / 16), 2 * Math.floor(d / 6)])].filter(i => i < d);
}

function curves(table) {
  // the chosen dimensions' values over the positions, one polyline each, with their axes
  const P = table.length, w = 420, h = 150, left = 30, top = 8, bottom = 22, colours = ["#1d4ed8", "#dc2626",
    "#059669", "#b45309"];
  const x = p => left + (p / Math.max(1, P - 1)) * (w - left - 6);
  const y = v => top + (1 - (v + 1) / 2) * (h - top - bottom);
  const dims = curveDims(table[0].length);
  const lines = dims.map((i, n) => `<polyline data-dim="${i}" fill="none" stroke="${colours[n]}" stroke-width="2" ` +
    `points="${table.map((row, p) => `${x(p).toFixed(1)},${y(Math.max(-1, Math.min(1, row[i]))).toFixed(1)}`)
      .join(" ")}"/>`).join("");
  const grid = [-1, 0, 1].map(v => `<line x1="${left}" x2="${w - 6}" y1="${y(v)}" y2="${y(v)}" stroke="#d0d7de"/>` +
    `<text x="${left - 4}" y="${y(v) + 4}" text-anchor="end">${v}</text>`).join("");
  const ticks = [...Array(Math.ceil(P / 10)).keys()].map(k => k * 10).map(p =>
    `<text x="${x(p)}" y="${h - 6}" text-anchor="middle">${p}</text>`).join("");
  const legend = dims.map((i, n) => `<li style="--c: ${colours[n]}"><span class="dot" aria-hidden="true"></span>` +
    `${esc(t("pe.dim", {i}))}</li>`).join("");
  return `<svg id="pe-curves" class="pe-curves" viewBox="0 0 ${w} ${h}" role="img"` +
    ` aria-label="${esc(t("pe.curves"))}">` +
    `${grid}${ticks}${lines}</svg><p class="axis">${esc(t("pe.axis_pos"))}</p><ul class="line-tops">${legend}</ul>`;
}

export function drawPositions(box, pe) {
  if (!pe) { box.innerHTML = `<p class="note">${esc(t("pe.none"))}</p>`; return; }
  const offsets = pe.dots[0].slice(0, 12)
    .map((v, k) => `<li data-offset="${k}" data-dot="${v}">${k}: ${fmt(v, 2)}</li>`);
  const sine = pe.kind === "sinusoidal" ? `<p class="explain">${esc(t("pe.curves"))}</p>` : "";
  box.innerHTML = `<p class="explain">${esc(t(pe.kind === "sinusoidal" ? "pe.explain" : "pe.learned"))}</p>
${sine}${curves(pe.table)}
<p class="caption">${esc(t("pe.table", {p: pe.table.length, d: pe.d_model, max: pe.max_len}))}</p>
<p class="axis">${esc(t("pe.axis_dim"))}</p>
<div class="pe-table"><span class="axis axis-side">${esc(t("pe.axis_rows"))}</span>
<canvas id="pe-heat" class="pe-heat" aria-label="${esc(t("pe.table_label"))}"></canvas></div>${numbersTable(pe.table)}
<p class="caption">${esc(t("pe.dots"))}</p>${dotsMap(pe.dots)}
<p class="caption">${esc(t("pe.offsets"))}</p><ul class="offsets">${offsets.join("")}</ul>`;
  heat(box.querySelector("#pe-heat"), pe.table, -1, 1);
}

export function drawFfn(box, info, step, where) {
  // where: {stack, layer, token} of the step view's row, or null when no row is chosen
  const l = step && step.layer_step;
  const head = `<p class="explain">${esc(t("ffn.explain", {d: info.d_model, dff: info.d_ff}))}</p>`;
  if (!l || !where) { box.innerHTML = head + `<p class="note">${esc(t("ffn.pick"))}</p>`; return; }
  const n = where.stack === "encoder" ? 2 : 3;  // self-attention, FFN; self-attention, cross-attention, FFN
  const title = t("ffn.where", {stack: t("ffn." + where.stack), layer: where.layer, sub: n, n, token: where.token});
  const active = l.ffn_hidden.filter(v => v > 0).length;
  const top = l.ffn_hidden.map((v, i) => [v, i]).sort((a, b) => b[0] - a[0]).slice(0, 8)
    .map(([v, i]) => `<li data-unit="${i}" data-value="${v}">${esc(t("ffn.unit"))} ${i}: ${fmt(v, 3)}</li>`).join("");
  box.innerHTML = head + `<p class="caption" data-testid="ffn-where" data-stack="${where.stack}">${esc(title)}</p>
<p>${esc(t("ffn.active", {n: active, of: l.d_ff}))}</p>
<canvas id="ffn-strip" class="pe-heat"></canvas><p class="caption">${esc(t("ffn.top"))}</p><ol class="top">${top}</ol>`;
  const rows = [], width = 64;
  for (let i = 0; i < l.ffn_hidden.length; i += width) rows.push(l.ffn_hidden.slice(i, i + width));
  const last = rows[rows.length - 1];
  while (last.length < width) last.push(0);
  const flat = l.ffn_hidden;
  heat(box.querySelector("#ffn-strip"), rows, Math.min(...flat), Math.max(...flat, 1e-9));
}
