// The model in the browser (the static explorer): the `aiayn export-onnx` graphs run by onnxruntime-web's
// WebAssembly backend, the tokenizer by SentencePiece compiled to WebAssembly, both bundled in the site's
// vendor/ folder. Answers what /api/translate answers for the page's maps request, from greedy search or
// from a given target (teacher forcing): the same fields, the maps as float32 arrays (not rounded).
// Shapes: S source length with </s>, T decoder steps, L layers, H heads, V target vocabulary.

const loaded = {};  // {base: Promise of the engine} — one load per model folder

async function load(base) {
  const ort = await import(new URL("vendor/ort.wasm.min.mjs", document.baseURI).href);
  const sp = await import(new URL("vendor/sentencepiece.mjs", document.baseURI).href);
  ort.env.wasm.numThreads = 1;  // threads need cross-origin isolation, which a plain file server does not give
  ort.env.wasm.wasmPaths = new URL("vendor/", document.baseURI).href;
  const fetched = async (name, how) => {
    const response = await fetch(base + name);
    if (!response.ok) throw new Error(`${base}${name}: HTTP ${response.status}`);
    return how === "json" ? response.json() : new Uint8Array(await response.arrayBuffer());
  };
  const [facts, pieces, tokenizerModel] = await Promise.all(
    [fetched("model.json", "json"), fetched("pieces.json", "json"), fetched("tokenizer.model", "bytes")]);
  const tokenizer = await sp.loadTokenizer(tokenizerModel);
  const [encoder, decoder] = await Promise.all([facts.encoder, facts.decoder].map(async name =>
    ort.InferenceSession.create(await fetched(name, "bytes"), {executionProviders: ["wasm"]})));
  return {ort, facts, pieces, tokenizer, encoder, decoder};
}

export function engine(base) {
  if (!(base in loaded)) loaded[base] = load(base).catch(e => { delete loaded[base]; throw e; });
  return loaded[base];
}

function ids(E, list) { return new E.ort.Tensor("int64", BigInt64Array.from(list.map(BigInt)), [1, list.length]); }

function argmaxAllowed(E, row) {
  // aiayn's greedy step: the best next token, never <pad> or <s>
  let best = -1;
  for (let v = 0; v < row.length; v++) {
    if (!E.facts.forbidden_outputs.includes(v) && (best < 0 || row[v] > row[best])) best = v;
  }
  return best;
}

function outputLimit(E, sourceLength) {
  const f = E.facts;
  return Math.max(1, Math.min(Math.floor(sourceLength * f.max_len_a + f.max_len_b), f.max_positions));
}

async function greedy(E, src, memory, sourceLength) {
  // -> {tokens: output ids (</s> not included), last: the last decoder call (its maps cover every step)}
  const tokens = [E.facts.bos_id];
  let last = null;
  for (let t = 0; t < outputLimit(E, sourceLength); t++) {
    last = await E.decoder.run({src, memory, tgt_in: ids(E, tokens)});  // the whole prefix: no cache
    const V = last.logits.dims[2];
    const token = argmaxAllowed(E, last.logits.data.subarray((tokens.length - 1) * V, tokens.length * V));
    if (token === E.facts.eos_id) break;
    tokens.push(token);
  }
  return {tokens: tokens.slice(1), last};
}

function nested(tensor) {
  // (1, L, H, Q, K) float32 -> [layer][head][query][key] of numbers
  const [, L, H, Q, K] = tensor.dims, data = tensor.data, out = [];
  for (let l = 0; l < L; l++) {
    const heads = [];
    for (let h = 0; h < H; h++) {
      const rows = [];
      for (let q = 0; q < Q; q++) {
        const at = ((l * H + h) * Q + q) * K;
        rows.push(Array.from(data.subarray(at, at + K)));
      }
      heads.push(rows);
    }
    out.push(heads);
  }
  return out;
}

function tokenProbs(logits, targetIds) {
  // p(y_t | y_<t, x) of every target token (</s> included): the softmax of each row over the whole vocabulary
  const V = logits.dims[2], data = logits.data;
  return targetIds.map((id, t) => {
    const row = data.subarray(t * V, (t + 1) * V);
    let max = -Infinity, sum = 0;
    for (const x of row) max = Math.max(max, x);
    for (const x of row) sum += Math.exp(x - max);
    return Math.exp(row[id] - max) / sum;
  });
}

export function wordGroups(tokens) {
  // pieces -> [words, piece indices of each word]: aiayn.inspect.maps.capture.word_groups, the server's rule
  const special = new Set(["<s>", "</s>", "<pad>", "<unk>"]), starts = new Set(["<s>", "</s>", "<pad>"]);
  const words = [], groups = [];
  tokens.forEach((piece, i) => {
    if (!groups.length || piece.startsWith("▁") || special.has(piece) || starts.has(words[words.length - 1])) {
      words.push(special.has(piece) ? piece : piece.replace(/^▁+/, ""));
      groups.push([i]);
    } else {
      words[words.length - 1] += piece;
      groups[groups.length - 1].push(i);
    }
  });
  return [words, groups];
}

export async function translateInBrowser(base, {text, target = ""}) {
  // one sentence -> the page's translation answer; target (not blank): its maps, teacher-forced
  const E = await engine(base), f = E.facts;
  const sourceIds = [...E.tokenizer.encodeIds(text), f.eos_id];
  const forcedIds = target.trim() ? E.tokenizer.encodeIds(target) : null;
  if (sourceIds.length > f.max_positions || (forcedIds && forcedIds.length + 1 > f.max_positions)) {
    throw new RangeError(`${forcedIds && sourceIds.length <= f.max_positions ? "target" : "text"}: longer than ` +
                         `the model's ${f.max_positions} positions`);
  }
  const src = ids(E, sourceIds);
  const {memory, encoder_self: encoderSelf} = await E.encoder.run({src});
  let outputIds, last, eos;
  if (forcedIds) {
    outputIds = forcedIds; eos = true;
    last = await E.decoder.run({src, memory, tgt_in: ids(E, [f.bos_id, ...forcedIds])});
  } else {
    ({tokens: outputIds, last} = await greedy(E, src, memory, sourceIds.length));
    eos = last.cross.dims[3] === outputIds.length + 1;  // stopped by </s>, not by the length limit
  }
  const targetIds = eos ? [...outputIds, f.eos_id] : outputIds;
  const piece = id => E.pieces.target[id], sourceTokens = sourceIds.map(id => E.pieces.source[id]);
  const targetTokens = targetIds.map(piece), inputIds = [f.bos_id, ...targetIds.slice(0, -1)];
  const targetInputTokens = inputIds.map(piece);
  return {
    translation: forcedIds ? target : E.tokenizer.decodeIds(outputIds), arch: "transformer",
    teacher_forced: Boolean(forcedIds), source_tokens: sourceTokens, target_tokens: targetTokens,
    target_input_tokens: targetInputTokens, source_ids: sourceIds, target_input_ids: inputIds, score: null,
    stopped_at_limit: !eos, token_probs: tokenProbs(last.logits, targetIds),
    words: {source: wordGroups(sourceTokens), target: wordGroups(targetTokens),
            target_input: wordGroups(targetInputTokens)},
    alignment: null, warnings: [],
    maps: {encoder_self: nested(encoderSelf), decoder_self: nested(last.decoder_self), cross: nested(last.cross)},
  };
}
