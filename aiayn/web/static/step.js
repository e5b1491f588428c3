"use strict";
// The step view: how one row of one head is computed. Transformer (seed 003, §3.2.1-§3.2.3):
// x -> q = x W^Q, K, V -> q.k -> / sqrt(d_k) -> mask (-inf) -> exp -> / sum -> weighted sum of V.
// RNN (seed 002): e^t = score(s_t, h_i) -> alpha^t = softmax(e^t) -> a_t -> tanh(W_c[a_t; s_t]) -> y^_t.

const FOLD = 6;  // vector entries shown before "…"; the rest open with a click

function vec(values, name, fold = FOLD) {
  const shown = values.slice(0, fold).map(v => fmt(v, 3)).join(", ");
  const text = `[${shown}${values.length > fold ? ", …" : ""}]`;
  if (values.length <= fold) return `<span class="vec">${text}</span>`;
  return `<details class="vec"><summary aria-label="${esc(name)}: ${values.length}">${text} <i>(${values.length})</i></summary>` +
    `<div class="vec-full">[${values.map(v => fmt(v, 4)).join(", ")}]</div></details>`;
}

function scaleVec(values, w) { return values.map(v => v * w); }

function bar(w) { return `<span class="bar" style="width:${Math.round(80 * w)}px"></span>`; }

function transformerStep(s, keys, caption) {
  const sqrt = Math.sqrt(s.d_k);
  const rows = s.weights.map((w, i) => {
    const masked = !s.mask[i];
    return `<tr class="${masked ? "masked" : ""}" data-weight="${w}" data-masked="${masked}">` +
      `<th scope="row">${esc(keys[i])}</th><td>${fmt(s.dots[i])}</td>` +
      `<td>${masked ? `<span class="minf">−∞ (masked)</span>` : fmt(s.scores[i])}</td>` +
      `<td>${fmt(s.exps[i], 4)}</td><td class="w">${fmt(w)}</td><td>${bar(w)}</td><td>${vec(s.keys[i], "k", 2)}</td>` +
      `<td>${vec(s.values[i], "v", 2)}</td><td>${vec(scaleVec(s.values[i], w), "softmax × v", 2)}</td></tr>`;
  }).join("");
  return `<h3>${esc(t("step.title"))}: ${esc(caption)}</h3>
<p class="explain">${STEP_TEXT[LANG].transformer}</p>
<ol class="eq">
<li><b>x</b> (d<sub>model</sub> = ${s.d_model}) = ${vec(s.x_vector, "x")}</li>
<li><b>q</b> = x · W<sup>Q</sup><sub>h</sub> (${s.d_model} × ${s.d_k}) = ${vec(s.query_vector, "q")} (d<sub>k</sub> = ${s.d_k})</li>
<li><b>k</b><sub>j</sub> = x<sub>j</sub> · W<sup>K</sup><sub>h</sub>, <b>v</b><sub>j</sub> = x<sub>j</sub> · W<sup>V</sup><sub>h</sub>: ${STEP_TEXT[LANG].rows}${s.kind === "cross" ? " " + STEP_TEXT[LANG].cross : ""}</li>
<li>score<sub>j</sub> = q·k<sub>j</sub> / √d<sub>k</sub> = q·k<sub>j</sub> / ${sqrt.toFixed(3)}; ${STEP_TEXT[LANG].mask}</li>
<li>softmax<sub>j</sub> = exp(score<sub>j</sub> − max) / Σ exp = exp / ${fmt(s.exp_sum, 4)}</li>
</ol>
<div class="table-box"><table class="step" id="step-table">
<thead><tr><th>key</th><th>q·k</th><th>÷ √d<sub>k</sub></th><th>exp</th><th>softmax</th><th></th><th>k</th><th>v</th><th>softmax × v</th></tr></thead>
<tbody>${rows}</tbody></table></div>
<p><b>${STEP_TEXT[LANG].output}</b> Σ softmax<sub>j</sub> · v<sub>j</sub> = <span id="step-output">${vec(s.output, "output")}</span></p>`;
}

function rnnStep(s, keys, caption) {
  const rows = s.weights.map((w, i) => {
    const masked = !s.mask[i];
    return `<tr class="${masked ? "masked" : ""}" data-weight="${w}" data-masked="${masked}">` +
      `<th scope="row">${esc(keys[i])}</th>` +
      `<td>${masked ? `<span class="minf">−∞ (masked)</span>` : fmt(s.scores[i])}</td><td class="w">${fmt(w)}</td>` +
      `<td>${bar(w)}</td><td>${vec(s.keys[i], "h", 2)}</td><td>${vec(scaleVec(s.keys[i], w), "alpha × h", 2)}</td></tr>`;
  }).join("");
  const top = s.top.map(o => `<li><b>${esc(showPiece(o.token))}</b> ${(100 * o.prob).toFixed(1)}%</li>`).join("");
  const decoder = s.decoder === "luong" ? "Luong (2015)" : "Bahdanau (2015)";
  return `<h3>${esc(t("step.title"))}: ${esc(caption)}</h3>
<p class="explain">${STEP_TEXT[LANG].rnn} ${decoder}, ${esc(s.rnn_cell)}.</p>
<ol class="eq">
<li><b>${esc(s.query_name)}</b> (${STEP_TEXT[LANG].state}, D = ${s.d_model}) = ${vec(s.query_vector, s.query_name)}</li>
<li>e<sup>t</sup><sub>i</sub> = score(s, h<sub>i</sub>): <b>${esc(s.score_name)}</b>, <code>${esc(s.score_formula)}</code></li>
<li>α<sup>t</sup> = softmax(e<sup>t</sup>)</li>
</ol>
<div class="table-box"><table class="step" id="step-table">
<thead><tr><th>source</th><th>e<sup>t</sup><sub>i</sub></th><th>α<sup>t</sup><sub>i</sub></th><th></th><th>h<sub>i</sub></th><th>α<sup>t</sup><sub>i</sub> h<sub>i</sub></th></tr></thead>
<tbody>${rows}</tbody></table></div>
<ol class="eq" start="4">
<li>a<sub>t</sub> = Σ α<sup>t</sup><sub>i</sub> h<sub>i</sub> = <span id="step-output">${vec(s.context, "a_t")}</span></li>
<li><code>${esc(s.output_formula)}</code> = ${vec(s.output_vector, "output")}</li>
<li>ŷ<sub>t</sub> = softmax(W<sub>y</sub> s̃<sub>t</sub> + b<sub>y</sub>): <ol class="top">${top}</ol></li>
</ol>`;
}

const STEP_TEXT = {
  en: {
    transformer: "x is this position's input to the layer. The head's matrices W<sup>Q</sup>, W<sup>K</sup>, W<sup>V</sup> (d<sub>model</sub> × d<sub>k</sub>) turn it into a query q and every position into a key k and a value v (§3.2.2). A key's score is q·k divided by √d<sub>k</sub> (§3.2.1); softmax turns the scores into weights that sum to 1; the output is the weighted sum of the values.",
    rows: "one row per key in the table below (click a vector to unfold it).",
    mask: "a masked key (padding, or the future in the decoder, §3.2.3) gets −∞, so exp(−∞) = 0.",
    output: "Output of this head:",
    cross: "In cross attention x<sub>j</sub> is the encoder's output at source position j; q comes from the decoder.",
    rnn: "Seed 002's decoder step: compare the decoder state with every encoder state h<sub>i</sub> (the score), softmax the scores into the attention distribution α<sup>t</sup>, take the weighted sum a<sub>t</sub> (the attention value, or context vector), combine it with the state and predict the next token. Decoder:",
    state: "decoder state",
  },
  ko: {
    transformer: "x는 이 위치가 층에 들어가는 입력입니다. 헤드의 행렬 W<sup>Q</sup>, W<sup>K</sup>, W<sup>V</sup> (d<sub>model</sub> × d<sub>k</sub>)가 이를 쿼리 q로, 모든 위치를 키 k와 값 v로 바꿉니다 (§3.2.2). 키의 점수는 q·k를 √d<sub>k</sub>로 나눈 값이고 (§3.2.1), 소프트맥스가 점수를 합이 1인 가중치로 바꾸며, 출력은 값들의 가중합입니다.",
    rows: "아래 표에 키마다 한 행 (벡터를 클릭하면 펼쳐집니다).",
    mask: "마스킹된 키(패딩, 또는 디코더의 미래 위치, §3.2.3)는 −∞가 되어 exp(−∞) = 0입니다.",
    output: "이 헤드의 출력:",
    cross: "크로스 어텐션에서 x<sub>j</sub>는 소스 위치 j의 인코더 출력이고, q는 디코더에서 옵니다.",
    rnn: "seed 002의 디코더 한 시점: 디코더 상태를 인코더의 모든 은닉 상태 h<sub>i</sub>와 비교하고(어텐션 스코어), 소프트맥스로 어텐션 분포 α<sup>t</sup>를 만들고, 가중합 a<sub>t</sub>(어텐션 값, 컨텍스트 벡터)를 구해 상태와 결합한 뒤 다음 토큰을 예측합니다. 디코더:",
    state: "디코더 상태",
  },
};
