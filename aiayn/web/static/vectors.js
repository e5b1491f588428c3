// Vectors and weights as the step views show them: a few entries, the rest folded; a bar per weight.
// Each vector carries its full numbers (data-values) for whoever reads the page closely.
import {esc, fmt} from "./api.js";

const FOLD = 6;  // vector entries shown before "…"; the rest open with a click

export function vec(values, name, fold = FOLD) {
  const shown = values.slice(0, fold).map(v => fmt(v, 3)).join(", ");
  const text = `[${shown}${values.length > fold ? ", …" : ""}]`;
  const data = `data-values="${esc(JSON.stringify(values))}"`;
  if (values.length <= fold) return `<span class="vec" ${data}>${text}</span>`;
  return `<details class="vec" ${data}><summary aria-label="${esc(name)}: ${values.length}">${text} ` +
    `<i>(${values.length})</i></summary>` +
    `<div class="vec-full">[${values.map(v => fmt(v, 4)).join(", ")}]</div></details>`;
}

export function bar(w) { return `<span class="bar" style="width:${Math.round(60 * w)}px"></span>`; }
