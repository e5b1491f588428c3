// The overview: a thumbnail of every layer x head of the chosen kind, plus each layer's mean; and the
// line view (bertviz's "head view"): lines from a query token to the keys it attends to, for any set of
// heads at once, each head in its own colour (the head chips are both its picker and its legend).
// Layers and heads are numbered from 1 where the user reads them (nth).
import {esc} from "./api.js";
import {lang, layerName, nth, t} from "./i18n.js";
import {isMasked, pieceMatrix, shade, viewMatrix} from "./matrix.js";

const HEAD_COLOURS = ["#1d4ed8", "#dc2626", "#059669", "#d97706", "#7c3aed", "#db2777", "#0891b2", "#65a30d",
                      "#4b5563", "#b45309", "#2563eb", "#be123c", "#0f766e", "#a21caf", "#ca8a04", "#475569"];
const MEAN_COLOUR = "#1f2328";

export function headColour(h) { return h === "mean" ? MEAN_COLOUR : HEAD_COLOURS[h % HEAD_COLOURS.length]; }

function drawThumb(canvas, view, matrix, scale) {
  // a square picture whatever the shape: cells stretch (a 30 x 8 matrix would otherwise be a tall strip);
  // shaded on the matrix's colour scale (global, or per row)
  const Q = matrix.length, K = matrix[0].length, size = 84, w = size / K, h = size / Q;
  canvas.width = size; canvas.height = size;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, size, size);
  matrix.forEach((row, q) => row.forEach((value, k) => {
    const a = shade(value, Math.max(...row), scale);
    ctx.fillStyle = isMasked(view, q, k) ? "#d4d4d8" : `rgba(29, 78, 216, ${a.toFixed(3)})`;
    ctx.fillRect(Math.floor(k * w), Math.floor(q * h), Math.ceil(w), Math.ceil(h));
  }));
}

export function drawOverview(box, maps, view, selected, onPick) {
  // rows = layers; columns = heads, then the layer's mean
  const L = maps.length, H = maps[0].length;
  const grid = document.createElement("div");
  grid.className = "thumbs";
  grid.style.gridTemplateColumns = `auto repeat(${H + (H > 1 ? 1 : 0)}, minmax(0, 96px))`;
  grid.appendChild(document.createElement("span"));
  for (let h = 0; h < H; h++) grid.appendChild(label(`${t("head")} ${nth(h)}`));
  if (H > 1) grid.appendChild(label(t("mean")));
  for (let l = 0; l < L; l++) {
    grid.appendChild(label(layerName(l)));
    const heads = [...Array(H).keys()].concat(H > 1 ? ["mean"] : []);
    for (const h of heads) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "thumb";
      button.dataset.testid = h === "mean" ? "layer-mean-thumb" : "head-thumb";
      button.dataset.layer = l; button.dataset.head = h;
      button.setAttribute("aria-label", `${t("layer")} ${nth(l)}, ${t("head")} ${nth(h)}`);
      if (String(selected.layer) === String(l) && String(selected.head) === String(h)) {
        button.classList.add("current"); button.setAttribute("aria-pressed", "true");
      }
      const canvas = document.createElement("canvas");
      drawThumb(canvas, view, viewMatrix(view, pieceMatrix(maps, l, h)), selected.scale);
      button.appendChild(canvas);
      button.addEventListener("click", () => onPick(l, h));
      grid.appendChild(button);
    }
  }
  box.replaceChildren(grid);
}

function label(text) {
  const s = document.createElement("span");
  s.className = "thumb-label"; s.textContent = text;
  return s;
}

function svg(tag, attrs) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

const LINE_STEP = 20;

function clip(text, n = 22) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

function buildLines(view, handlers, boxWidth) {
  // the tokens, built once per sentence/kind/view: redrawing them would drop the keyboard focus. The
  // drawing is as wide as its box (at most 480 units, then scaled up), so that on a phone its 12 px
  // labels stay 12 px instead of shrinking with a 480-unit drawing; the labels are clipped to fit.
  const Q = view.rows.length, K = view.cols.length, height = Math.max(Q, K) * LINE_STEP + 10;
  const width = Math.round(Math.min(480, Math.max(240, boxWidth || 480)));
  const qx = Math.round(width * 0.4), kx = width - qx, chars = Math.max(6, Math.floor(qx / 7.5));
  const root = svg("svg", {viewBox: `0 0 ${width} ${height}`, width: "100%", role: "group",
                           "aria-label": t("lines.title"), "data-qx": qx, "data-kx": kx});
  root.style.maxWidth = "600px";
  root.appendChild(svg("g", {class: "lines"}));
  view.rows.forEach((r, q) => {
    const text = svg("text", {x: qx, y: 15 + q * LINE_STEP, "text-anchor": "end", class: "lq", tabindex: -1,
                              role: "button", "data-q": q});
    text.textContent = clip(r.label ? `${r.label} ${r.sub || ""}`.trim() : r.sub || "", chars);  // "": a lone ▁
    text.setAttribute("aria-label", text.textContent);
    text.addEventListener("mouseenter", () => handlers.preview(q));
    text.addEventListener("focus", () => handlers.preview(q));
    text.addEventListener("click", () => handlers.select(q));
    text.addEventListener("keydown", e => {
      const next = {ArrowDown: q + 1, ArrowUp: q - 1}[e.key];
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); handlers.select(q); }
      if (next !== undefined && next >= 0 && next < Q) {
        e.preventDefault(); root.querySelector(`text.lq[data-q="${next}"]`).focus();
      }
    });
    root.appendChild(text);
  });
  view.cols.forEach((c, k) => {
    const text = svg("text", {x: kx, y: 15 + k * LINE_STEP, class: "lk", "data-k": k});
    text.textContent = clip(c.label, chars);
    root.appendChild(text);
  });
  return root;
}

export function drawHeadChips(box, H, chosen, onToggle) {
  // one toggle button per head, coloured like its lines; built once per head count and language so that
  // pressing one keeps the keyboard focus on it
  const signature = `${H}|${lang()}`;
  if (box.dataset.signature !== signature) {
    box.replaceChildren(...[...Array(H).keys()].map(h => {
      const b = document.createElement("button");
      b.type = "button"; b.className = "chip"; b.dataset.head = h; b.dataset.testid = "head-chip";
      b.style.setProperty("--c", headColour(h));
      b.innerHTML = `<span class="dot" aria-hidden="true"></span>${esc(t("head"))} ${nth(h)}`;
      b.addEventListener("click", () => onToggle(h));
      return b;
    }));
    box.dataset.signature = signature;
  }
  box.querySelectorAll("button.chip").forEach(b => {
    b.setAttribute("aria-pressed", String(chosen.includes(Number(b.dataset.head))));
  });
}

export function drawLines(box, view, layers, query, scale, handlers, signature) {
  // layers: [{matrix, colour, head}] drawn over each other, each a little apart so that heads that agree
  // still show both colours; query: the row whose lines are drawn (null: every row, faintly). Only the
  // lines and the highlights change when the query does.
  if (box.dataset.signature !== signature || !box.firstChild) {
    box.replaceChildren(buildLines(view, handlers, box.clientWidth));
    box.dataset.signature = signature;
  }
  const root = box.firstChild, group = root.querySelector("g.lines"), Q = view.rows.length;
  const x1 = Number(root.dataset.qx) + 5, x2 = Number(root.dataset.kx) - 5;
  const spread = Math.min(3, 8 / layers.length);
  group.replaceChildren();
  layers.forEach(({matrix, colour, head}, i) => {
    const dy = layers.length > 1 ? (i - (layers.length - 1) / 2) * spread : 0;
    for (const q of query === null ? [...Array(Q).keys()] : [query]) {
      const rowMax = Math.max(...matrix[q]);
      matrix[q].forEach((w, k) => {
        const a = shade(w, rowMax, scale) * (query === null ? 0.35 : 1);
        if (a < 0.02 || isMasked(view, q, k)) return;
        const line = svg("line", {x1, y1: 11 + q * LINE_STEP + dy, x2, y2: 11 + k * LINE_STEP + dy,
                                  stroke: colour, "stroke-width": (0.5 + 3.5 * a).toFixed(2),
                                  "stroke-opacity": a.toFixed(3), "data-head": head});
        if (query !== null) {
          const title = svg("title", {});
          const who = head === "mean" ? t("mean") : `${t("head")} ${nth(head)}`;
          const row = clip(`${view.rows[q].label} ${view.rows[q].sub || ""}`.trim());
          title.textContent = `${who}: ${row} → ${view.cols[k].label} ${w.toFixed(3)}`;
          line.appendChild(title);
        }
        group.appendChild(line);
      });
    }
  });
  const focusable = root.querySelector("text.lq:focus") ? null : (query ?? 0);
  root.querySelectorAll("text.lq").forEach(text => {
    const q = Number(text.dataset.q);
    text.classList.toggle("on", q === query);
    if (focusable !== null) text.setAttribute("tabindex", q === focusable ? 0 : -1);
  });
  root.querySelectorAll("text.lk").forEach(text => {
    text.classList.toggle("masked", query !== null && isMasked(view, query, Number(text.dataset.k)));
  });
}
