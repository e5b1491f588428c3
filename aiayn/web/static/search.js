// "Which head does this?": for a query token and a key token of the current view, every layer x head of
// the current kind ranked by that weight, or contribution with the measure switch on contributions (the maps'
// own numbers, merged as the view merges words). When even the best is weak the page says so, why, and how
// to get a model whose heads do such things.
import {esc} from "./api.js";
import {layerName, nth, t} from "./i18n.js";
import {pieceMatrix, viewMatrix} from "./matrix.js";

export const WEAK = 0.3;  // a best weight below this: no head of this model does it well
const SHOWN = 12;  // ranked heads listed

export function rankHeads(maps, view, q, k) {
  const ranked = [];
  maps.forEach((layer, l) => layer.forEach((_, h) => {
    ranked.push({layer: l, head: h, weight: viewMatrix(view, pieceMatrix(maps, l, h))[q][k]});
  }));
  return ranked.sort((a, b) => b.weight - a.weight || a.layer - b.layer || a.head - b.head);
}

export function fillSearch(box, view) {
  const fill = (select, items) => {
    const keep = select.value;
    select.replaceChildren(...items.map((item, i) => new Option(item, String(i))));
    if (keep && Number(keep) < items.length) select.value = keep;
  };
  fill(box.querySelector("#search-query"), view.rows.map(r => `${r.label} ${r.sub || ""}`.trim()));
  fill(box.querySelector("#search-key"), view.cols.map(c => c.label));
}

function weakNote(info, best, layers) {  // layers: of the kind ranked (the decoder's may differ in number)
  const facts = info.imported_from ? t("search.weak_imported")
    : t("search.weak_why", {params: Number(info.parameters).toLocaleString("en"), layers,
                            heads: info.n_heads, d: info.d_model,
                            steps: info.steps === null || info.steps === undefined ? t("f.unknown") : info.steps});
  return `<div class="weak" data-testid="search-weak" role="status"><p>${esc(t("search.weak",
    {best: best.toFixed(3), min: WEAK}))}</p><p>${esc(facts)}</p><p>${esc(t("search.weak_fix"))}</p>
<pre><code>pip install 'aiayn[hf]'
aiayn import-hf Helsinki-NLP/opus-mt-${info.src_lang || "en"}-${info.tgt_lang || "de"} --out opus-mt
aiayn serve --model opus-mt</code></pre></div>`;
}

export function showRanking(box, ranked, info, onOpen, measure = "weights") {
  const items = ranked.slice(0, SHOWN).map((r, i) => `<li><button type="button" class="rank" data-layer="${r.layer}"
 data-head="${r.head}" data-weight="${r.weight}">${esc(layerName(r.layer))} · ${esc(t("head"))} ${nth(r.head)}:
 <b>${r.weight.toFixed(3)}</b>${i === 0 ? ` (${esc(t("search.opened"))})` : ""}</button></li>`).join("");
  const best = ranked.length ? ranked[0].weight : 0;
  const by = measure === "contributions" ? "_contributions" : "";  // what the matrix's numbers are
  const caption = ranked.length > SHOWN ? t("search.ranked_top" + by, {shown: SHOWN, n: ranked.length})
    : t("search.ranked" + by, {n: ranked.length});
  box.innerHTML = `<p class="caption">${esc(caption)}</p>` +
    `<ol class="ranking">${items}</ol>` +
    (best < WEAK ? weakNote(info, best, 1 + Math.max(...ranked.map(r => r.layer))) : "");
  box.querySelectorAll("button.rank").forEach(b => b.addEventListener("click",
    () => onOpen(Number(b.dataset.layer), Number(b.dataset.head))));
}
