// Attention as it learns: when the served model's run kept maps at its validations (train.attention_timeline),
// a slider across those training steps redraws one stored map (GET /api/timeline/STEP?sentence=I) of a few
// fixed dev sentences, so the cross-attention can be watched becoming an alignment. The cells carry the
// stored values (data-value); nothing here is computed but the colour.
import {api, esc, showPiece} from "./api.js";
import {nth, t} from "./i18n.js";

const $ = id => document.getElementById(id);
const KINDS = ["cross", "encoder_self", "decoder_self"];

function axes(sentence, kind) {
  const src = sentence.source_tokens, tgt = sentence.target_input_tokens;
  if (kind === "encoder_self") return [src, src];
  return [tgt, kind === "cross" ? src : tgt];
}

function fill(select, values, current) {
  select.replaceChildren(...values.map(([value, label]) => new Option(label, value)));
  select.value = String(current);
}

function drawTable(box, rows, cols, matrix, caption) {
  const head = cols.map(c => `<th scope="col">${esc(showPiece(c))}</th>`).join("");
  const body = matrix.map((row, q) => `<tr data-q="${q}"><th scope="row">${esc(showPiece(rows[q]))}</th>` +
    row.map(w => `<td class="cell" data-value="${w}" title="${w.toFixed(3)}" ` +
      `style="background: rgba(37, 99, 235, ${Math.max(0, Math.min(1, w))})"></td>`).join("") + "</tr>").join("");
  box.innerHTML = `<table class="heat" aria-label="${esc(caption)}"><thead><tr><th></th>${head}</tr></thead>` +
    `<tbody>${body}</tbody></table>`;
}

export function createTimeline() {
  const T = {index: null, cache: new Map(), sentence: 0, kind: "cross", layer: null, head: 0, at: 0, gen: 0};

  async function snapshot(step, sentence) {
    const key = `${step}/${sentence}`;
    if (!T.cache.has(key)) T.cache.set(key, api(`/api/timeline/${step}?sentence=${sentence}`));
    return T.cache.get(key);
  }

  function setupSelectors(maps) {
    const kinds = KINDS.filter(k => k in maps);
    if (!kinds.includes(T.kind)) T.kind = kinds[0];
    fill($("tl-kind"), kinds.map(k => [k, t("kind." + k)]), T.kind);
    const L = maps[T.kind].length, H = maps[T.kind][0].length;
    if (T.layer === null || T.layer >= L) T.layer = L - 1;
    if (T.head >= H) T.head = 0;
    const numbered = n => [...Array(n).keys()].map(i => [nth(i), nth(i)]);  // 1-based values, as shown
    fill($("tl-layer"), numbered(L), nth(T.layer));
    fill($("tl-head"), numbered(H), nth(T.head));
  }

  async function draw() {
    const gen = ++T.gen, step = T.index.steps[T.at], sentence = T.index.sentences[T.sentence];
    $("tl-step").textContent = t("timeline.step", {step, n: T.at + 1, of: T.index.steps.length});
    let snap;
    try { snap = await snapshot(step, T.sentence); } catch (e) { $("tl-map").textContent = e.message; return; }
    if (gen !== T.gen) return;
    setupSelectors(snap.maps);
    const [rows, cols] = axes(sentence, T.kind);
    const caption = `${t("kind." + T.kind)} · ${t("layer")} ${nth(T.layer)} · ${t("head")} ${nth(T.head)} · ` +
      t("timeline.step", {step, n: T.at + 1, of: T.index.steps.length});
    const box = $("tl-map");
    box.dataset.step = String(step); box.dataset.sentence = String(T.sentence);
    box.dataset.kind = T.kind; box.dataset.layer = String(T.layer); box.dataset.head = String(T.head);
    drawTable(box, rows, cols, snap.maps[T.kind][T.layer][T.head], caption);
  }

  function labels() {
    fill($("tl-sentence"), T.index.sentences.map((s, i) =>
      [i, s.source_tokens.filter(p => p !== "</s>").map(showPiece).join(" ")]), T.sentence);
  }

  function wire() {
    const slider = $("tl-slider");
    slider.min = "0"; slider.max = String(T.index.steps.length - 1); slider.value = String(T.at);
    slider.addEventListener("input", () => { T.at = Number(slider.value); draw(); });
    $("tl-sentence").addEventListener("change", () => { T.sentence = Number($("tl-sentence").value); draw(); });
    $("tl-kind").addEventListener("change", () => { T.kind = $("tl-kind").value; draw(); });
    for (const [id, field] of [["tl-layer", "layer"], ["tl-head", "head"]]) {
      $(id).addEventListener("change", () => { T[field] = Number($(id).value) - 1; draw(); });
    }
  }

  return {
    async start() {
      try { T.index = await api("/api/timeline"); } catch { return; }  // an extra: the explorer works without
      if (!T.index.steps.length) return;
      T.at = T.index.steps.length - 1;
      $("timeline-panel").hidden = false;
      labels(); wire(); draw();
    },
    relabel() { if (T.index && T.index.steps.length) { labels(); draw(); } },
  };
}
