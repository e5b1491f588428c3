// Greedy translation in JavaScript over an `aiayn export-onnx` directory, as a page would run it:
// onnxruntime-web (its WebAssembly backend) and SentencePiece compiled to WebAssembly (@agnai/sentencepiece-js).
// node onnx_web_greedy.mjs DIR OUT.json SENTENCE... writes, per sentence, the source ids, the output ids and
// text, and the last decoder call's logits and maps (it covers every step) with the encoder's maps.
import fs from "node:fs";
import { createRequire } from "node:module";
import * as ort from "onnxruntime-web";

const require = createRequire(import.meta.url);
const { SentencePieceProcessor } = require("@agnai/sentencepiece-js");

const [dir, outFile, ...sentences] = process.argv.slice(2);
const facts = JSON.parse(fs.readFileSync(`${dir}/model.json`, "utf8"));
const sp = new SentencePieceProcessor();
await sp.load(`${dir}/tokenizer.model`);
ort.env.wasm.numThreads = 1;
const encoder = await ort.InferenceSession.create(fs.readFileSync(`${dir}/${facts.encoder}`));
const decoder = await ort.InferenceSession.create(fs.readFileSync(`${dir}/${facts.decoder}`));
const ids = (list) => new ort.Tensor("int64", BigInt64Array.from(list.map(BigInt)), [1, list.length]);

function argmaxAllowed(row) {
  let best = -1;
  for (let v = 0; v < row.length; v++) {
    if (!facts.forbidden_outputs.includes(v) && (best < 0 || row[v] > row[best])) best = v;
  }
  return best;
}

async function translate(sentence) {
  const source = [...sp.encodeIds(sentence), facts.eos_id];  // the source's ids, then </s>
  const src = ids(source);
  const { memory, encoder_self } = await encoder.run({ src });
  const limit = Math.max(1, Math.min(Math.floor(source.length * facts.max_len_a + facts.max_len_b), facts.max_positions));
  const tokens = [facts.bos_id];
  let last;
  for (let t = 0; t < limit; t++) {
    last = await decoder.run({ src, memory, tgt_in: ids(tokens) });  // the whole prefix: no cache
    const V = last.logits.dims[2];
    const token = argmaxAllowed(last.logits.data.subarray((tokens.length - 1) * V, tokens.length * V));
    if (token === facts.eos_id) break;
    tokens.push(token);
  }
  const output = tokens.slice(1);
  return { sentence, source, ids: output, text: sp.decodeIds(output), encoder_self: Array.from(encoder_self.data),
           decoder_self: Array.from(last.decoder_self.data), cross: Array.from(last.cross.data),
           logits: Array.from(last.logits.data) };
}

const results = [];
for (const sentence of sentences) results.push(await translate(sentence));
fs.writeFileSync(outFile, JSON.stringify(results));
