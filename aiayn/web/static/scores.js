// One head's whole score matrix through the steps of §3.2.1, a stage at a time: q·kᵀ, ÷ √dₖ, the mask
// (−∞, decoder self-attention's future), and the softmax, which gives the matrix above. Every row comes
// from /api/step (the step view's numbers), asked for one row at a time when the reader presses the
// button; an answer whose head was replaced meanwhile is dropped. Pieces, not words: the softmax is per piece.
import {api, esc, fmt, showPiece} from "./api.js";
import {nth, t} from "./i18n.js";

const STAGES = ["dots", "scaled", "masked", "weights"];
const $ = id => document.getElementById(id);

function headKey(S) { return JSON.stringify([S.gen, S.kind, S.layer, S.head]); }

export function stageMatrix(rows, stage) {
  // rows: /api/step answers, one a query -> (Q, K) numbers of the stage; -Infinity where masked (from "masked")
  const root = Math.sqrt(rows[0].d_k);
  return rows.map(r => r.dots.map((d, k) => {
    if (stage === "dots") return d;
    if (stage === "scaled") return d / root;
    if (stage === "masked") return r.mask[k] ? d / root : -Infinity;
    return r.weights[k];
  }));
}

function shadeOf(v, stage, largest) {
  // scores: blue positive, red negative, as dark as |v| over the stage's largest; weights: blue, 0 to 1
  if (v === -Infinity) return "";
  const a = stage === "weights" ? v : Math.abs(v) / largest;
  return `background: rgba(${v >= 0 ? "29, 78, 216" : "220, 38, 38"}, ${Math.min(1, a).toFixed(3)})`;
}

function table(S, rows, stage) {
  const m = stageMatrix(rows, stage), finite = m.flat().filter(Number.isFinite);
  const largest = Math.max(...finite.map(Math.abs), 1e-12);
  const keys = S.kind === "decoder_self" ? S.data.target_input_tokens : S.data.source_tokens;
  const queries = S.kind === "encoder_self" ? S.data.source_tokens : S.data.target_input_tokens;
  const head = keys.map(k => `<th class="key" scope="col">${esc(showPiece(k))}</th>`).join("");
  const hatched = (q, k) => (stage === "masked" || stage === "weights") && !rows[q].mask[k];  // as the matrix above
  const body = m.map((row, q) => `<tr><th class="query" scope="row">${esc(showPiece(queries[q]))}</th>` +
    row.map((v, k) => hatched(q, k)
      ? `<td class="cell masked" data-value="${v}" title="${v === -Infinity ? "−∞" : fmt(v)}"></td>`
      : `<td class="cell" data-value="${v}" style="${shadeOf(v, stage, largest)}" title="${fmt(v)}"></td>`)
      .join("") + "</tr>").join("");
  return `<table class="heat" data-stage="${stage}"><thead><tr><td></td>${head}</tr></thead>` +
    `<tbody>${body}</tbody></table>`;
}

function drawStage(S, panel, state) {
  const stage = STAGES[state.stage];
  panel.querySelector("#scores-stage").textContent = t("scores." + stage, {sqrt: Math.sqrt(state.rows[0].d_k)
    .toFixed(3)});
  panel.querySelector("#scores-slider").value = String(state.stage);
  panel.querySelector("#scores-map").innerHTML = table(S, state.rows, stage);
}

async function load(S, panel, state) {
  // every query row of the head, in turn (the server computes one step at a time for a client)
  const key = headKey(S), n = (S.kind === "encoder_self" ? S.data.source_tokens : S.data.target_input_tokens).length;
  const status = panel.querySelector("#scores-status"), rows = [];
  for (let query = 0; query < n; query++) {
    status.textContent = t("scores.loading", {n: query + 1, of: n});
    rows.push(await api("/api/step", {source_ids: S.data.source_ids, target_input_ids: S.data.target_input_ids,
                                      kind: S.kind, layer: Number(S.layer), head: Number(S.head), query}));
    if (headKey(S) !== key) return;  // another head, kind or sentence: its own button will ask again
  }
  status.textContent = "";
  Object.assign(state, {key, rows, stage: 0});
  panel.querySelector("#scores-controls").hidden = false;
  drawStage(S, panel, state);
}

function play(S, panel, state) {
  // one stage a second, from q·k to the softmax
  clearInterval(state.timer);
  state.stage = 0; drawStage(S, panel, state);
  state.timer = setInterval(() => {
    if (state.stage >= STAGES.length - 1 || !state.rows) { clearInterval(state.timer); return; }
    state.stage += 1; drawStage(S, panel, state);
  }, 1000);
}

export function createScores() {
  const state = {key: null, rows: null, stage: 0, timer: null};
  return {
    render(S) {
      // a new head (or language): the panel offers to compute it again
      const panel = $("scores-body");
      clearInterval(state.timer);
      if (!S.data || !S.info.multi_head) { panel.replaceChildren(); return; }
      if (S.layer === "mean" || S.head === "mean") {
        panel.innerHTML = `<p class="note">${esc(t("step.mean"))}</p>`; return;
      }
      const loaded = state.key === headKey(S) && state.rows;
      if (!loaded) { state.key = null; state.rows = null; }
      const which = `${t("kind." + S.kind)} · ${t("layer.n", {n: nth(S.layer)})} · ${t("head")} ${nth(S.head)}`;
      panel.innerHTML = `<p class="explain">${esc(t("scores.explain"))}</p>
<div class="row"><button type="button" id="scores-go" data-testid="scores-go">${esc(t("scores.go", {which}))}</button>
<span id="scores-status" aria-live="polite"></span></div>
<div id="scores-controls" class="row" hidden><button type="button" id="scores-play">${esc(t("scores.play"))}</button>
<label class="timeline-slider"><span>${esc(t("scores.stage"))}</span>
<input id="scores-slider" type="range" min="0" max="${STAGES.length - 1}" step="1" value="0"></label></div>
<p id="scores-stage" class="caption" aria-live="polite"></p><div id="scores-map" class="scroll-box"></div>`;
      panel.querySelector("#scores-go").addEventListener("click", async e => {
        e.target.disabled = true;
        try { await load(S, panel, state); } catch (err) {
          panel.querySelector("#scores-status").textContent = err.message;
        } finally { e.target.disabled = false; }
      });
      panel.querySelector("#scores-play").addEventListener("click", () => play(S, panel, state));
      panel.querySelector("#scores-slider").addEventListener("input", e => {
        clearInterval(state.timer); state.stage = Number(e.target.value); drawStage(S, panel, state);
      });
      if (loaded) { panel.querySelector("#scores-controls").hidden = false; drawStage(S, panel, state); }
    },
  };
}
