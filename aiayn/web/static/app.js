"use strict";
// The page's state and wiring. Every panel is drawn from S alone, and redrawn (or cleared) whenever
// the sentence, kind, layer, head, view or query changes; an answer that arrives after its question
// was replaced is dropped (S.gen for translations, the step panel's key for steps).
const $ = id => document.getElementById(id);
const S = {info: null, data: null, gen: 0, kind: "cross", layer: null, head: 0, words: false, scale: "global",
           numbers: false, lineHeads: [], query: null, preview: null, step: null};
const LANGS = {en: "English", de: "German", fr: "French", cs: "Czech"};
const KINDS = ["encoder_self", "decoder_self", "cross"];

function showError(message) { $("error").textContent = message; }

function clearMessages() { $("error").textContent = ""; $("warning").textContent = ""; }

async function loadInfo() {
  try { S.info = await api("/api/info"); } catch (e) { showError(e.message); return; }
  renderInfo();
}

function renderInfo() {
  const i = S.info;
  if (!i) return;
  const arch = i.arch === "rnn" ? `RNN seq2seq: ${i.rnn_cell}, ${i.decoder} attention, ${i.score_name} score`
                                : `Transformer (${i.norm})`;
  const facts = [["f.arch", arch], ["f.langs", i.src_lang ? `${LANGS[i.src_lang] || i.src_lang} → ${LANGS[i.tgt_lang] || i.tgt_lang}` : "?"],
    ["f.data", i.dataset || "?"], ["f.layers", `${i.n_encoder_layers} + ${i.n_decoder_layers}`],
    ["f.heads", i.n_heads], ["f.dims", i.d_k ? `${i.d_model} / ${i.d_k}` : i.d_model],
    ["f.params", Number(i.parameters).toLocaleString("en")]];
  $("model-facts").innerHTML = facts.map(([k, v]) => `<div><dt>${esc(t(k))}</dt><dd>${esc(String(v))}</dd></div>`).join("");
  const box = $("examples");
  box.querySelectorAll("button").forEach(b => b.remove());
  for (const example of i.examples) {
    const b = document.createElement("button");
    b.type = "button"; b.className = "example"; b.textContent = example;
    b.addEventListener("click", () => { $("text").value = example; translate(); });
    box.appendChild(b);
  }
  $("text").maxLength = i.max_text;
}

function setBusy(busy) {
  $("translate").disabled = busy;
  $("translate").setAttribute("aria-busy", String(busy));
  $("status").textContent = busy ? t("translating") : "";
}

function clearViews() {
  S.data = null; S.query = null; S.preview = null; S.step = null;
  $("translation").textContent = "";
  $("views").hidden = true; $("result").hidden = true; $("ready").hidden = false;
  for (const id of ["heatmap", "overview", "lines", "line-caption", "line-tops", "hover-view", "matrix-caption", "step"]) {
    $(id).replaceChildren();
  }
  $("lines").dataset.signature = "";
  $("step").dataset.key = "";
}

async function translate() {
  const text = $("text").value, max = S.info ? S.info.max_text : 500;
  clearMessages();
  if (!text.trim()) { showError(t("err.empty")); $("text").focus(); return; }
  if (text.length > max) { showError(t("err.long", {n: text.length, max})); return; }
  const gen = ++S.gen;
  clearViews();  // nothing of the previous sentence stays up while (or if) this one fails
  setBusy(true);
  try {
    const data = await api("/api/translate", {text, beam: Number($("beam").value)});
    if (gen !== S.gen) return;
    S.data = data;
    setupSelectors();
    $("translation").textContent = data.translation;
    const unk = S.info ? data.source_tokens.filter(p => p === S.info.unk_piece).length : 0;
    if (unk) $("warning").textContent = t("warn.unk", {n: unk, unk: S.info.unk_piece, data: S.info.dataset || "?"});
    $("views").hidden = false; $("result").hidden = false; $("ready").hidden = true;
    render();
  } catch (e) {
    if (gen === S.gen) showError(e.message);
  } finally {
    if (gen === S.gen) setBusy(false);
  }
}

function fill(select, values, current) {
  select.replaceChildren(...values.map(([value, label]) => new Option(label, value)));
  select.value = String(current);
}

function setupSelectors() {
  const kinds = KINDS.filter(k => k in S.data.maps);
  if (!kinds.includes(S.kind)) S.kind = kinds.includes("cross") ? "cross" : kinds[0];
  fill($("kind"), kinds.map(k => [k, kindName(k)]), S.kind);
  const maps = S.data.maps[S.kind], L = maps.length, H = maps[0].length;
  if (S.layer === null || (S.layer !== "mean" && S.layer >= L) || (S.layer === "mean" && L === 1)) S.layer = L - 1;
  if ((S.head !== "mean" && S.head >= H) || (S.head === "mean" && H === 1)) S.head = 0;
  S.lineHeads = H > 1 ? S.lineHeads.filter(h => h < H) : [];
  const numbered = n => [...Array(n).keys()].map(i => [String(i), String(i)]);
  fill($("layer"), (L > 1 ? [["mean", t("mean")]] : []).concat(numbered(L)), S.layer);
  fill($("head"), (H > 1 ? [["mean", t("mean")]] : []).concat(numbered(H)), S.head);
}

function currentView() { return axesView(S.data, S.kind, S.words); }

function currentMatrix(view) { return viewMatrix(view, pieceMatrix(S.data.maps[S.kind], S.layer, S.head)); }

function kindName(kind) { return S.data && S.data.arch === "rnn" ? t("kind.rnn") : t("kind." + kind); }

function caption() {
  const which = S.data.arch === "rnn" ? kindName(S.kind)
    : `${t("kind." + S.kind)} · ${t("layer")} ${S.layer === "mean" ? t("mean") : S.layer} · ` +
      `${t("head")} ${S.head === "mean" ? t("mean") : S.head}`;
  return `${which} · “${S.data.source_tokens.map(showPiece).join(" ")}” → “${S.data.translation}”`;
}

function render() {
  if (!S.data) return;
  const view = currentView(), matrix = currentMatrix(view);
  $("kind-explain").textContent = t("explain." + S.kind);
  $("words-rule").hidden = !S.words;
  $("row-note").hidden = S.kind === "encoder_self";
  $("matrix-caption").textContent = caption();
  drawLegend($("legend"), S.scale);
  drawOverview($("overview"), S.data.maps[S.kind], view, S, pickHead);
  drawMatrix($("heatmap"), view, matrix, {caption: caption(), query: S.query, scale: S.scale, numbers: S.numbers});
  renderFocus(view, matrix);
  renderStep(view);
}

function renderFocus(view = currentView(), matrix = currentMatrix(view)) {
  // what depends on the query shown: the hover line, the line view, the row highlight
  const q = S.preview ?? S.query;
  const row = q === null ? null : matrix[q];
  const r = q === null ? null : view.rows[q];
  $("hover-view").textContent = row ? `${(r.label + " " + (r.sub || "")).trim()} ${t("top")}: ${topKeys(view, row, q).join(", ")}` : "";
  document.querySelectorAll("#heatmap tr.hl").forEach(tr => tr.classList.remove("hl"));
  if (q !== null) document.querySelector(`#heatmap tbody tr[data-q="${q}"]`)?.classList.add("hl");
  renderLines(view, matrix, q);
}

function lineLayers(view, matrix) {
  // the heads chosen with the chips, each in its colour; none chosen: the matrix's own head (or mean)
  const maps = S.data.maps[S.kind];
  if (!S.lineHeads.length) return [{matrix, colour: headColour(S.head), head: S.head}];
  return S.lineHeads.map(h => ({matrix: viewMatrix(view, pieceMatrix(maps, S.layer, h)), colour: headColour(h), head: h}));
}

function renderLines(view, matrix, q) {
  const H = S.data.maps[S.kind][0].length, layers = lineLayers(view, matrix);
  $("head-pick").hidden = H === 1;
  drawHeadChips($("line-legend"), H, S.lineHeads, toggleLineHead);
  $("overlay").checked = H > 1 && S.lineHeads.length === H;
  $("overlay").indeterminate = S.lineHeads.length > 0 && S.lineHeads.length < H;
  const layer = S.layer === "mean" ? t("mean") : S.layer;
  const which = S.data.arch === "rnn" ? kindName(S.kind)
    : !S.lineHeads.length
      ? `${t("kind." + S.kind)} · ${t("layer")} ${layer} · ${t("head")} ${S.head === "mean" ? t("mean") : S.head} ${t("lines.as_matrix")}`
      : `${t("kind." + S.kind)} · ${t("layer")} ${layer} · ${t(S.lineHeads.length > 1 ? "lines.heads_n" : "head")} ${S.lineHeads.join(", ")}`;
  if ($("line-caption").textContent !== which) $("line-caption").textContent = which;  // announced only when it changes
  // the colours in words too: where each drawn head looks most, for the query shown
  $("line-tops").replaceChildren(...(q === null || layers.length < 2 ? [] : layers.map(l => {
    const li = document.createElement("li");
    li.style.setProperty("--c", l.colour);
    li.innerHTML = `<span class="dot" aria-hidden="true"></span>${esc(`${t("head")} ${l.head}`)}: ` +
      esc(topKeys(view, l.matrix[q], q, 2).join(", "));
    return li;
  })));
  drawLines($("lines"), view, layers, q, S.scale, {preview: previewQuery, select: q2 => selectQuery(q2, false)},
            JSON.stringify([S.gen, S.kind, S.words, LANG]));
}

function toggleLineHead(h) {
  S.lineHeads = S.lineHeads.includes(h) ? S.lineHeads.filter(x => x !== h) : [...S.lineHeads, h].sort((a, b) => a - b);
  if (S.data) renderFocus();
}

function previewQuery(q) { if (S.preview !== q) { S.preview = q; renderFocus(); } }

function selectQuery(q, focus) {
  S.query = q; S.preview = null;
  document.querySelectorAll("#heatmap tbody tr").forEach(tr => tr.classList.toggle("selected", Number(tr.dataset.q) === q));
  document.querySelectorAll("#heatmap button.q").forEach(b => { b.tabIndex = Number(b.dataset.q) === q ? 0 : -1; });
  if (focus) document.querySelector(`#heatmap button.q[data-q="${q}"]`)?.focus();
  const view = currentView();
  renderFocus(view);
  renderStep(view, true);
}

function pickHead(layer, head, scroll = true) {
  S.layer = layer; S.head = head;
  $("layer").value = String(layer); $("head").value = String(head);
  render();
  if (!scroll) return;
  $("matrix-panel").scrollIntoView({block: "start"});
  document.querySelector("#heatmap button.q[tabindex='0']")?.focus({preventScroll: true});
}

function stepRequestKey() { return JSON.stringify([S.gen, S.kind, S.layer, S.head, S.words, S.query]); }

async function renderStep(view, reveal = false) {
  const panel = $("step"), key = stepRequestKey();
  if (panel.dataset.key === key && panel.dataset.lang === LANG) return;
  panel.dataset.key = key; panel.dataset.lang = LANG;
  const title = `<h3>${esc(t("step.title"))}</h3>`;
  if (S.query === null) { panel.innerHTML = `${title}<p class="explain">${esc(t("step.empty"))}</p>`; return; }
  if (S.words) { panel.innerHTML = `${title}<p class="note">${esc(t("step.words"))}</p>`; return; }
  if (S.layer === "mean" || S.head === "mean") { panel.innerHTML = `${title}<p class="note">${esc(t("step.mean"))}</p>`; return; }
  const r = view.rows[S.query], query = (r.label + " " + (r.sub || "")).trim();
  const cap = S.data.arch === "rnn" ? t("step.rnn_for", {row: S.query, query})
    : t("step.for", {kind: t("kind." + S.kind), layer: S.layer, head: S.head, query, row: S.query});
  const keys = view.cols.map(c => c.label);
  if (S.step && S.step.key === key) { show(panel, S.step.answer, keys, cap, reveal); return; }
  panel.innerHTML = `${title}<p class="busy">${esc(t("computing"))}</p>`;
  panel.setAttribute("aria-busy", "true");
  try {
    const answer = await api("/api/step", {source_ids: S.data.source_ids, target_input_ids: S.data.target_input_ids,
      kind: S.kind, layer: Number(S.layer), head: Number(S.head), query: S.query});
    if (panel.dataset.key !== key) return;  // the question changed while this was computed
    S.step = {key, answer};
    show(panel, answer, keys, cap, reveal);
  } catch (e) {
    if (panel.dataset.key === key) panel.innerHTML = `${title}<p class="error" role="alert">${esc(e.message)}</p>`;
  } finally {
    if (panel.dataset.key === key) panel.setAttribute("aria-busy", "false");
  }
}

function show(panel, answer, keys, cap, reveal) {
  panel.innerHTML = answer.arch === "rnn" ? rnnStep(answer, keys, cap) : transformerStep(answer, keys, cap);
  const box = panel.getBoundingClientRect();
  if (reveal && (box.top > window.innerHeight - 80 || box.bottom < 0)) panel.scrollIntoView({block: "start"});
}

function onMatrixKey(e) {
  const button = e.target.closest("button.q");
  if (!button) return;
  const q = Number(button.dataset.q), n = document.querySelectorAll("#heatmap button.q").length;
  const moves = {ArrowDown: q + 1, ArrowUp: q - 1, Home: 0, End: n - 1};
  if (e.key in moves) {
    e.preventDefault();
    selectQuery(Math.max(0, Math.min(n - 1, moves[e.key])), true);
  }
}

function wire() {
  $("translate").addEventListener("click", translate);
  $("text").addEventListener("keydown", e => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); translate(); } });
  $("kind").addEventListener("change", () => {
    S.kind = $("kind").value; S.query = null; S.preview = null; setupSelectors(); render();
  });
  for (const id of ["layer", "head"]) {
    $(id).addEventListener("change", () => { S[id] = $(id).value === "mean" ? "mean" : Number($(id).value); render(); });
  }
  $("words").addEventListener("change", () => { S.words = $("words").checked; S.query = null; S.preview = null; render(); });
  $("scale").addEventListener("change", () => { S.scale = $("scale").value; render(); });
  $("numbers").addEventListener("change", () => { S.numbers = $("numbers").checked; render(); });
  $("overlay").addEventListener("change", () => {
    S.lineHeads = $("overlay").checked && S.data ? [...Array(S.data.maps[S.kind][0].length).keys()] : [];
    if (S.data) renderFocus();
  });
  const heat = $("heatmap");
  heat.addEventListener("click", e => { const b = e.target.closest("button.q"); if (b) selectQuery(Number(b.dataset.q), false); });
  heat.addEventListener("mouseover", e => { const th = e.target.closest("th.query"); if (th) previewQuery(Number(th.dataset.q)); });
  heat.addEventListener("focusin", e => { const b = e.target.closest("button.q"); if (b) previewQuery(Number(b.dataset.q)); });
  heat.addEventListener("mouseleave", () => { if (S.data) previewQuery(null); });
  heat.addEventListener("keydown", onMatrixKey);
  $("lang").addEventListener("click", () => {
    toggleLanguage(); renderInfo();
    if (S.data) { setupSelectors(); render(); }
  });
}

applyLanguage();
wire();
loadInfo();
