// "Download this view": the current matrix as a PNG (drawn here, with its caption and labels) or as
// JSON (its weights, or contributions with the measure switch on them, as "weights"; "measure" says which;
// labels, kind, layer and head, 1-based as the page shows them).
import {nth} from "./i18n.js";
import {caption, currentMatrix, currentView} from "./render.js";

function save(blob, name) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob); a.download = name;
  document.body.appendChild(a); a.click(); a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

function json(S, view, matrix) {
  return JSON.stringify({caption: caption(S), measure: S.data.measure || "weights", kind: S.kind, layer: nth(S.layer),
                         head: nth(S.head), words: S.words,
                         teacher_forced: S.data.teacher_forced,
                         queries: view.rows.map(r => `${r.label} ${r.sub || ""}`.trim()),
                         keys: view.cols.map(c => c.label), weights: matrix.map(row => Array.from(row))}, null, 1);
}

function png(S, view, matrix, done) {
  const cell = 28, left = 160, top = 120, Q = matrix.length, K = matrix[0].length;
  const canvas = document.createElement("canvas");
  canvas.width = left + K * cell + 20; canvas.height = top + Q * cell + 20;
  const ctx = canvas.getContext("2d");
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
  ctx.fillStyle = "#111"; ctx.font = "13px sans-serif"; ctx.fillText(caption(S).slice(0, 140), 8, 18);
  view.cols.forEach((c, k) => {
    ctx.save(); ctx.translate(left + k * cell + cell / 2, top - 6); ctx.rotate(-Math.PI / 3);
    ctx.fillText(c.label, 0, 0); ctx.restore();
  });
  matrix.forEach((row, q) => {
    ctx.fillStyle = "#111";
    ctx.fillText(`${view.rows[q].label} ${view.rows[q].sub || ""}`.trim(), 8, top + q * cell + 18);
    row.forEach((w, k) => {
      ctx.fillStyle = `rgba(29, 78, 216, ${Math.min(1, w).toFixed(3)})`;
      ctx.fillRect(left + k * cell, top + q * cell, cell - 1, cell - 1);
    });
  });
  canvas.toBlob(done, "image/png");
}

export function download(S, format) {
  if (!S.data) return;
  const view = currentView(S), matrix = currentMatrix(S, view);
  const name = `attention-${S.kind}-layer${nth(S.layer)}-head${nth(S.head)}`;
  if (format === "json") save(new Blob([json(S, view, matrix)], {type: "application/json"}), name + ".json");
  else png(S, view, matrix, blob => save(blob, name + ".png"));
}
