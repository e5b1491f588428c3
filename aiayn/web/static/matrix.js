// What one attention matrix shows: its rows (queries) and columns (keys) as pieces or words (the
// server's word groups), its weights (one head, or a mean), which cells are masked, the cells of the
// server's word alignment, and the heatmap.
import {esc, showPiece} from "./api.js";
import {t} from "./i18n.js";

const PUNCTUATION = /^[\p{P}\p{S}]+$/u;

function pieceText(piece) { return piece.replace(/^▁/, ""); }

export function splitPunctuation([words, groups], pieces) {
  // a word's leading and trailing pieces that are punctuation only become words of their own ("tired." ->
  // "tired", "."), as far as the tokenizer made them separate pieces; a word inside ("didn't") stays whole
  const outWords = [], outGroups = [];
  const push = group => {
    outGroups.push(group);
    outWords.push(group.map(i => pieceText(pieces[i])).join(""));
  };
  groups.forEach((group, w) => {
    const punct = i => PUNCTUATION.test(pieceText(pieces[i]));
    let a = 0, b = group.length;
    while (a < b - 1 && punct(group[a])) a++;
    while (b > a + 1 && punct(group[b - 1])) b--;
    if (a === 0 && b === group.length) { outWords.push(words[w]); outGroups.push(group); return; }
    if (a > 0) push(group.slice(0, a));
    push(group.slice(a, b));
    if (b < group.length) push(group.slice(b));
  });
  return [outWords, outGroups];
}

export function wordAxes(data) {
  // the server's word groups of each side, punctuation split off
  return {source: splitPunctuation(data.words.source, data.source_tokens),
          target: splitPunctuation(data.words.target, data.target_tokens),
          target_input: splitPunctuation(data.words.target_input, data.target_input_tokens)};
}

export function axesView(data, kind, words) {
  // rows: decoder kinds are labelled by the decoder INPUT token (where the query comes from) and the
  // token that step predicts; encoder rows by the source token.
  const decoder = kind !== "encoder_self";
  const keyTokens = kind === "decoder_self" ? data.target_input_tokens : data.source_tokens;
  if (!words) {
    const rows = decoder
      ? data.target_input_tokens.map((p, i) => ({label: showPiece(p), sub: "→ " + showPiece(data.target_tokens[i])}))
      : data.source_tokens.map(p => ({label: showPiece(p)}));
    return {rows, cols: keyTokens.map(p => ({label: showPiece(p)})),
            qGroups: rows.map((_, i) => [i]), kGroups: keyTokens.map((_, i) => [i]), kind, words};
  }
  const axes = wordAxes(data);
  const [qWords, qGroups] = axes[decoder ? "target" : "source"];
  const [kWords, kGroups] = axes[kind === "decoder_self" ? "target_input" : "source"];
  // a decoder word's row: its input is the word before it (the first: the start token), as in the piece view
  const input = j => (j === 0 ? showPiece(data.target_input_tokens[0]) : qWords[j - 1]);
  const rows = qWords.map((w, j) => decoder ? {label: input(j), sub: "→ " + w} : {label: w});
  return {rows, cols: kWords.map(w => ({label: w})), qGroups, kGroups, kind, words};
}

export function isMasked(view, q, k) {
  // decoder self-attention: every piece of the key word lies after every piece of the query word
  return view.kind === "decoder_self" && Math.min(...view.kGroups[k]) > Math.max(...view.qGroups[q]);
}

export function pieceMatrix(maps, layer, head) {
  // maps [L][H][Q][K]; layer/head: a number or "mean"
  const layers = layer === "mean" ? maps.map((_, i) => i) : [layer];
  const heads = head === "mean" ? maps[0].map((_, i) => i) : [head];
  const Q = maps[0][0].length, K = maps[0][0][0].length, n = layers.length * heads.length;
  const out = Array.from({length: Q}, () => new Float64Array(K));
  for (const l of layers) for (const h of heads) {
    const m = maps[l][h];
    for (let q = 0; q < Q; q++) for (let k = 0; k < K; k++) out[q][k] += m[q][k] / n;
  }
  return out;
}

export function keySum(view, row, ki) {
  // one piece row's weight on key column ki: the sum over the key word's pieces (one piece: itself)
  let sum = 0;
  for (const k of view.kGroups[ki]) sum += row[k];
  return sum;
}

export function viewCell(view, pieces, qi, ki) {
  // keys of a word summed, queries of a word averaged (aiayn.inspect.maps.capture.merge_subwords); pieces[q]:
  // the row of piece q (only the rows of qi's pieces are read)
  if (isMasked(view, qi, ki)) return 0;
  let sum = 0;
  for (const q of view.qGroups[qi]) sum += keySum(view, pieces[q], ki);
  return sum / view.qGroups[qi].length;
}

export function viewMatrix(view, pieces) {
  return view.qGroups.map((_, qi) => view.kGroups.map((_, ki) => viewCell(view, pieces, qi, ki)));
}

export function alignedCells(data, view) {
  // the server's word links "i-j" (source word i, output word j) on the cross-attention's cells: in the
  // word view the cells of the shown words made of those words' pieces (punctuation split off: one or
  // more), in the piece view every cell of word j's pieces x word i's pieces; each link outlined as one
  // box. -> Map "q,k" -> {link, edges: [top, right, bottom, left]}
  const cells = new Map(), src = data.words.source[1], tgt = data.words.target[1];
  const shown = (groups, pieces) => groups.map((g, w) => [w, g]).filter(([, g]) => g.some(p => pieces.includes(p)))
    .map(([w]) => w);
  for (const link of data.alignment.links.split(" ").filter(Boolean)) {
    const [i, j] = link.split("-").map(Number);
    const rows = view.words ? shown(view.qGroups, tgt[j]) : tgt[j];
    const cols = view.words ? shown(view.kGroups, src[i]) : src[i];
    for (const q of rows) for (const k of cols) {
      cells.set(`${q},${k}`, {link, edges: [q === rows[0], k === cols.at(-1), q === rows.at(-1), k === cols[0]]});
    }
  }
  return cells;
}

function outline(edges) {
  // inset strokes on the box's outer edges (a box-shadow: the cell keeps its size and its shade)
  const [top, right, bottom, left] = edges, w = "3px", c = "var(--aligned)";
  return [top && `inset 0 ${w} 0 ${c}`, right && `inset -${w} 0 0 ${c}`, bottom && `inset 0 -${w} 0 ${c}`,
          left && `inset ${w} 0 0 ${c}`].filter(Boolean).join(", ");
}

export function shade(w, rowMax, scale) {
  const a = scale === "row" ? (rowMax > 0 ? w / rowMax : 0) : w;
  return Math.max(0, Math.min(1, a));
}

export function drawMatrix(box, view, matrix, opts) {
  const table = document.createElement("table");
  table.className = opts.numbers ? "heat numbers" : "heat";  // numbers: wider cells, 11 px text
  table.setAttribute("aria-label", opts.caption);
  const head = table.createTHead().insertRow();
  head.appendChild(document.createElement("td"));
  view.cols.forEach((c, k) => {
    const th = document.createElement("th");
    th.className = "key"; th.scope = "col"; th.textContent = c.label; th.dataset.k = k;
    head.appendChild(th);
  });
  const body = table.createTBody();
  matrix.forEach((row, q) => {
    const tr = body.insertRow();
    tr.dataset.q = q;
    if (q === opts.query) tr.classList.add("selected");
    const th = document.createElement("th");
    th.className = "query"; th.scope = "row"; th.dataset.q = q;
    const button = document.createElement("button");
    button.className = "q"; button.dataset.q = q; button.type = "button";
    button.tabIndex = q === (opts.query ?? 0) ? 0 : -1;
    const rowText = (view.rows[q].label + " " + (view.rows[q].sub || "")).trim();
    button.setAttribute("aria-label", `${rowText}: ${t("step.title")}`);
    button.innerHTML = `${esc(view.rows[q].label)}${view.rows[q].sub ? `<small>${esc(view.rows[q].sub)}</small>` : ""}`;
    th.appendChild(button);
    tr.appendChild(th);
    const rowMax = Math.max(...row);
    row.forEach((w, k) => {
      const td = tr.insertCell();
      const masked = isMasked(view, q, k);
      td.className = masked ? "cell masked" : "cell";
      td.dataset.value = w.toFixed(4);
      if (masked) {
        td.dataset.testid = "cell-masked";
        td.title = `${rowText} → ${view.cols[k].label}: ${t("legend.masked")}`;
      } else {
        td.title = `${rowText} → ${view.cols[k].label}: ${w.toFixed(3)}`;
        td.style.background = `rgba(29, 78, 216, ${shade(w, rowMax, opts.scale).toFixed(3)})`;
        if (shade(w, rowMax, opts.scale) > 0.55) td.classList.add("dark");
        if (opts.numbers) td.textContent = w.toFixed(2).replace(/^0/, "");  // the legend's units (0-1)
      }
      const aligned = opts.aligned && opts.aligned.get(`${q},${k}`);
      if (aligned) {
        td.dataset.aligned = aligned.link; td.classList.add("aligned"); td.style.boxShadow = outline(aligned.edges);
        td.title += ` · ${t("align.cell", {link: aligned.link})}`;
      }
    });
  });
  box.replaceChildren(table);
}

export function drawLegend(box, scale) {
  const right = scale === "row" ? t("legend.row_max") : "1.0";
  box.innerHTML = `<span>0</span><span class="ramp" aria-hidden="true"></span><span>${esc(right)}</span>` +
    `<span class="swatch masked" aria-hidden="true"></span><span>${esc(t("legend.masked"))}</span>`;
}

export function topKeys(view, row, q, n = 3) {
  return row.map((w, k) => [w, k]).filter(([, k]) => !isMasked(view, q, k)).sort((a, b) => b[0] - a[0])
    .slice(0, n).map(([w, k]) => `${view.cols[k].label} ${w.toFixed(2)}`);
}
