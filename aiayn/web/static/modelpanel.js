// The model panel: what the loaded model is (architecture, size), what it learned from (data, training
// steps, dev BLEU, or the model it was imported from) and how it decodes (beam, length penalty).
import {esc} from "./api.js";
import {languageName, t} from "./i18n.js";

function known(value, digits) {
  if (value === null || value === undefined) return t("f.unknown");
  return digits === undefined ? String(value) : Number(value).toFixed(digits);
}

function architecture(i) {
  return i.multi_head ? t("f.transformer", {norm: t(String(i.norm).startsWith("pre-LN") ? "f.pre_ln" : "f.post_ln")})
    : t("f.rnn", {cell: i.rnn_cell, decoder: i.decoder, score: i.score_name});
}

function training(i) {
  if (i.imported_from) return [["f.imported", i.imported_from]];
  const probe = i.pronoun_probe ? [["f.probe", t("f.probe_value", {weight: i.pronoun_probe})]] : [];
  return [["f.steps", known(i.steps)], ["f.bleu", known(i.dev_bleu, 2)], ...probe];
}

export function facts(i) {
  const langs = i.src_lang ? `${languageName(i.src_lang)} → ${languageName(i.tgt_lang)}` : t("f.unknown");
  return [["f.arch", architecture(i)], ["f.langs", langs], ["f.data", i.dataset || t("f.unknown")],
    ...training(i), ["f.params", Number(i.parameters).toLocaleString("en")],
    ["f.layers", `${i.n_encoder_layers} + ${i.n_decoder_layers}`],
    ...(i.multi_head ? [["f.heads", i.n_heads]] : []),  // a recurrent decoder's one attention has no heads
    [i.multi_head ? "f.d_model" : "f.d_hidden", i.d_model],
    ...(i.d_k ? [["f.d_k", i.d_k]] : []),
    ...(i.d_ff ? [["f.dff", i.d_ff]] : []),
    ["f.decode", t("f.decode_value", {beam: i.decode.beam, alpha: i.decode.alpha})]];
}

export function renderInfo(i, onExample) {
  document.getElementById("model-facts").innerHTML = facts(i).map(([k, v]) =>
    `<div data-fact="${k}"><dt>${esc(t(k))}</dt><dd>${esc(String(v))}</dd></div>`).join("");
  const box = document.getElementById("examples");
  box.querySelectorAll("button").forEach(b => b.remove());
  for (const example of i.examples) {
    const b = document.createElement("button");
    b.type = "button"; b.className = "example"; b.textContent = example;
    b.addEventListener("click", () => onExample(example));
    box.appendChild(b);
  }
  const source = i.src_lang ? languageName(i.src_lang) : t("f.unknown");
  document.getElementById("input-label").textContent = t("input.label", {lang: source});
  document.getElementById("decode-note").textContent = t("decode.note", {beam: i.decode.beam, alpha: i.decode.alpha});
}
