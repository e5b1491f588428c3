// Vectors and weights as the step views show them: a coloured strip of every entry, a few entries in
// numbers, the rest folded; a bar per weight.
// Each vector carries its full numbers (data-values) for whoever reads the page closely.
import {esc, fmt} from "./api.js";

const FOLD = 6;  // vector entries shown before "…"; the rest open with a click

export function strip(values) {
  // the whole vector as a strip of cells beside its numbers, one cell an entry: blue positive, red negative,
  // as dark as |value| over the vector's largest |value| (one CSS gradient, not one element an entry)
  const n = values.length, m = Math.max(...values.map(Math.abs), 1e-12), w = 100 / n;
  const stops = values.map((v, i) => {
    const colour = `rgba(${v >= 0 ? "29, 78, 216" : "220, 38, 38"}, ${(Math.abs(v) / m).toFixed(2)})`;
    return `${colour} ${(i * w).toFixed(3)}% ${((i + 1) * w).toFixed(3)}%`;
  });
  const width = Math.min(160, Math.max(24, 3 * n));
  return `<span class="strip" data-n="${n}" aria-hidden="true" style="width: ${width}px; ` +
    `background: linear-gradient(to right, ${stops.join(", ")})"></span>`;
}

export function vec(values, name, fold = FOLD) {
  const shown = values.slice(0, fold).map(v => fmt(v, 3)).join(", ");
  const text = `${strip(values)}[${shown}${values.length > fold ? ", …" : ""}]`;
  const data = `data-values="${esc(JSON.stringify(values))}"`;
  if (values.length <= fold) return `<span class="vec" ${data}>${text}</span>`;
  return `<details class="vec" ${data}><summary aria-label="${esc(name)}: ${values.length}">${text} ` +
    `<i>(${values.length})</i></summary>` +
    `<div class="vec-full">[${values.map(v => fmt(v, 4)).join(", ")}]</div></details>`;
}

export function bar(w) { return `<span class="bar" style="width:${Math.round(60 * w)}px"></span>`; }
