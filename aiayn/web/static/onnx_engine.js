// The model in the browser (the static explorer): the `aiayn export-onnx` graphs run by onnxruntime-web's
// WebAssembly backend, the tokenizer by SentencePiece compiled to WebAssembly, both bundled in the site's
// vendor/ folder. Answers what /api/translate answers for the page's maps request, from aiayn's beam search
// (beam 1: greedy) or a given target (teacher forcing): the same fields, the maps as float32 (not rounded).
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

function outputLimit(E, sourceLength) {
  // aiayn's max_lengths: a * |src| + b (|src| with </s>), at least 1, at most the model's positions
  const f = E.facts;
  return Math.min(Math.max(1, Math.floor(sourceLength * f.max_len_a + f.max_len_b)), f.max_positions);
}

function repeated(E, tensor, G) {
  // (1, ...) -> (G, ...): the source and memory once per live hypothesis
  const data = new tensor.data.constructor(tensor.data.length * G);
  for (let g = 0; g < G; g++) data.set(tensor.data, g * tensor.data.length);
  return new E.ort.Tensor(tensor.type, data, [G, ...tensor.dims.slice(1)]);
}

function logSoftmax(row) {
  let max = -Infinity, sum = 0;
  for (const x of row) max = Math.max(max, x);
  for (const x of row) sum += Math.exp(x - max);
  const shift = max + Math.log(sum);
  return Float64Array.from(row, x => x - shift);
}

function candidates(E, logits, T, scores, n, forced) {
  // the n best extensions over every live row, [value, row, token], best first (beam.top_candidates);
  // <pad> and <s> are never outputs (search_rules.forbid_specials); forced (a prefix's token at this step, or
  // null): the only extension, at the model's log-prob for it
  const V = logits.dims[2], all = [];
  scores.forEach((score, g) => {
    const lp = logSoftmax(logits.data.subarray((g * T + T - 1) * V, (g * T + T) * V));
    if (forced !== null) { all.push([score + lp[forced], g, forced]); return; }
    for (let v = 0; v < V; v++) if (!E.facts.forbidden_outputs.includes(v)) all.push([score + lp[v], g, v]);
  });
  return all.sort((a, b) => b[0] - a[0]).slice(0, n);
}

async function beamSearch(E, src, memory, sourceLength, {beam: K, alpha, form}, prefix = []) {
  // aiayn's beam search (aiayn.decoding.beam) for one sentence, with a target prefix (its ids, forced first)
  // and without the other controls (constraints, min_length, no-repeat): of the 2K best extensions,
  // </s>-ended ones in the top K finish, the first K others stay live; done at the length limit, or with K
  // finished that the best live one could not beat. Beam 1 is greedy search. (aiayn keeps rows of -inf
  // beside a forced token; they never finish nor win, so they are left out here.) -> the finished
  // hypotheses, best first: {tokens (no </s>), eos, score (log-prob / length penalty)}
  const f = E.facts, limit = Math.max(outputLimit(E, sourceLength), prefix.length + 1), finished = [];
  const lp = n => (form === "hf" ? n ** alpha : ((5 + n) / 6) ** alpha);
  let history = [[]], scores = [0];
  for (let t = 0; t < limit; t++) {
    const G = history.length, rows = history.flatMap(h => [f.bos_id, ...h]);  // the whole prefix: no cache
    const tgtIn = new E.ort.Tensor("int64", BigInt64Array.from(rows.map(BigInt)), [G, t + 1]);
    const {logits} = await E.decoder.run({src: repeated(E, src, G), memory: repeated(E, memory, G), tgt_in: tgtIn});
    const top = candidates(E, logits, t + 1, scores, 2 * K, t < prefix.length ? prefix[t] : null);
    const lpNow = lp(t + 1), atLimit = t + 1 >= limit;
    const isEos = top.map(([value, , token]) => token === f.eos_id && value !== -Infinity);
    const ended = top.map((_, j) => j).filter(j => j < K && isEos[j]);
    const live = top.map((_, j) => j).filter(j => !isEos[j]).slice(0, K);
    const picks = [...ended.map(j => [j, true]),
                   ...(atLimit ? live.filter(j => top[j][0] !== -Infinity).map(j => [j, false]) : [])];
    for (const [j, eos] of picks) {
      const [value, row, token] = top[j];
      finished.push({tokens: eos ? history[row] : [...history[row], token], eos, score: value / lpNow});
    }
    finished.sort((a, b) => b.score - a.score);  // stable: ties keep the order they finished in
    const canWin = finished.length >= K && live.length > 0 && top[live[0]][0] / lpNow > finished[K - 1].score;
    if (atLimit || (finished.length >= K && !canWin)) break;
    history = live.map(j => [...history[top[j][1]], top[j][2]]);
    scores = live.map(j => top[j][0]);
  }
  return finished;
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

function wordAlignment(cross, words) {
  // the server's default word alignment (aiayn.web.alignment, `aiayn translate --alignment`): the last decoder
  // layer's mean over its heads, subwords merged (keys summed per word, queries averaged per word); each output
  // word (not </s>) linked to the source word (not </s>) it attends most. cross: [layer][head][query][key]
  const layer = cross[cross.length - 1], [srcWords, srcGroups] = words.source, [tgtWords, tgtGroups] = words.target;
  const nSrc = srcWords.length - (srcWords.at(-1) === "</s>"), nTgt = tgtWords.length - (tgtWords.at(-1) === "</s>");
  const weight = (j, i) => layer.reduce((total, head) => total + tgtGroups[j].reduce((rows, q) =>
    rows + srcGroups[i].reduce((keys, k) => keys + head[q][k], 0), 0) / tgtGroups[j].length, 0) / layer.length;
  const links = [];
  for (let j = 0; j < nTgt; j++) {
    let best = 0;
    for (let i = 1; i < nSrc; i++) if (weight(j, i) > weight(j, best)) best = i;  // the first of equals
    links.push(`${best}-${j}`);
  }
  return {links: links.join(" "), layer: cross.length - 1, head: null, chosen: "default"};
}

function warnings(E, sourceTokens, stopped) {
  // aiayn.inspect.quality.warnings.input_warnings' codes that need no more than the pieces: unknown and byte
  // pieces (mostly_unknown above half of them), and an output that stopped at its length limit
  const unk = E.pieces.source[E.facts.unk_id];
  const pieces = sourceTokens.filter(p => p !== "</s>" && p !== "▁");  // a lone word boundary carries no text
  const unknown = pieces.filter(p => p === unk).length;
  const bytes = pieces.filter(p => p.startsWith("<0x") && p.endsWith(">")).length;
  const found = [];
  if (pieces.length && (unknown + bytes) / pieces.length > 0.5) {
    found.push({code: "mostly_unknown", n: unknown + bytes, of: pieces.length});
  } else if (unknown) {
    found.push({code: "unk", n: unknown, unk});
  }
  if (stopped) found.push({code: "stopped_at_limit"});
  return found;
}

export class TooLong extends Error {
  // a text or target of n pieces (with </s>) where at most max fit: the page words it (err.too_many_tokens)
  constructor(n, max) { super(`${n} subword tokens, at most ${max}`); this.n = n; this.max = max; }
}

function encoded(E, text, target, maxSource) {
  // -> [source ids with </s>, the target's ids or null], within the server's source limit and the model's
  // positions
  const f = E.facts, sourceIds = [...E.tokenizer.encodeIds(text), f.eos_id];
  const forcedIds = target.trim() ? E.tokenizer.encodeIds(target) : null;
  const max = Math.min(maxSource, f.max_positions);
  if (sourceIds.length > max) throw new TooLong(sourceIds.length, max);
  if (forcedIds && forcedIds.length + 1 > f.max_positions) throw new TooLong(forcedIds.length + 1, f.max_positions);
  return [sourceIds, forcedIds];
}

export async function translateInBrowser(base, {text, target = "", targetPrefix = "", beam = 1, alpha = 0.6,
                                                form = "gnmt", nBest = 0, maxSource = Infinity}) {
  // one sentence -> the page's translation answer, or with nBest > 0 the plain answer {translation, score,
  // n_best: [[text, score], ...]}; target (not blank): its maps, teacher-forced; targetPrefix: a text the
  // translation starts with (a post-edit's pick); maxSource: the source's most pieces, with </s>
  const E = await engine(base), f = E.facts, [sourceIds, forcedIds] = encoded(E, text, target, maxSource);
  const prefix = targetPrefix.trim() ? E.tokenizer.encodeIds(targetPrefix) : [];
  const src = ids(E, sourceIds);
  const {memory, encoder_self: encoderSelf} = await E.encoder.run({src});
  let best = {tokens: forcedIds, eos: true, score: null};
  if (!forcedIds) {
    const found = await beamSearch(E, src, memory, sourceIds.length, {beam, alpha, form}, prefix);
    if (nBest > 0) {
      const hyps = found.slice(0, nBest).map(h => [E.tokenizer.decodeIds(h.tokens), h.score]);
      return {translation: hyps[0][0], score: hyps[0][1], n_best: hyps};
    }
    best = found[0];
  }
  // the maps along the chosen output: one call over its whole prefix (each row sees only the rows before it)
  const targetIds = best.eos ? [...best.tokens, f.eos_id] : best.tokens;
  const inputIds = [f.bos_id, ...targetIds.slice(0, -1)];
  const last = await E.decoder.run({src, memory, tgt_in: ids(E, inputIds)});
  const piece = id => E.pieces.target[id], sourceTokens = sourceIds.map(id => E.pieces.source[id]);
  const targetTokens = targetIds.map(piece), targetInputTokens = inputIds.map(piece);
  const words = {source: wordGroups(sourceTokens), target: wordGroups(targetTokens),
                 target_input: wordGroups(targetInputTokens)};
  const maps = {encoder_self: nested(encoderSelf), decoder_self: nested(last.decoder_self), cross: nested(last.cross)};
  return {
    translation: forcedIds ? target : E.tokenizer.decodeIds(best.tokens), arch: "transformer",
    teacher_forced: Boolean(forcedIds), source_tokens: sourceTokens, target_tokens: targetTokens,
    target_input_tokens: targetInputTokens, source_ids: sourceIds, target_input_ids: inputIds, score: best.score,
    stopped_at_limit: !best.eos, token_probs: tokenProbs(last.logits, targetIds),
    words, alignment: wordAlignment(maps.cross, words), warnings: warnings(E, sourceTokens, !best.eos), maps,
  };
}

export async function alternativesInBrowser(base, {source_ids: sourceIds, target_input_ids: inputIds, k}) {
  // the post-editing answer (aiayn.web.postedit.alternatives): at the position after inputIds, the model's k
  // likeliest tokens, each with the text that picking it makes and whether that text encodes back to the
  // same pieces (then it can be a target prefix); special tokens are shown, never offered
  const E = await engine(base), f = E.facts, src = ids(E, sourceIds);
  const {memory} = await E.encoder.run({src});
  const {logits} = await E.decoder.run({src, memory, tgt_in: ids(E, inputIds)});
  const V = logits.dims[2], T = inputIds.length, lp = logSoftmax(logits.data.subarray((T - 1) * V, T * V));
  const special = new Set([f.pad_id, f.bos_id, f.eos_id, f.unk_id]), before = inputIds.slice(1);
  const order = [...lp.keys()].sort((a, b) => lp[b] - lp[a]).slice(0, Math.min(k, V));
  return {position: T - 1, alternatives: order.map(id => {
    const pieces = [...before, id];
    const prefix = E.tokenizer.decodeIds(pieces.filter(i => i !== f.pad_id && i !== f.bos_id && i !== f.eos_id));
    const encoded = E.tokenizer.encodeIds(prefix);
    const exact = !special.has(id) && encoded.length === pieces.length && encoded.every((i, n) => i === pieces[n]);
    return {id, piece: E.pieces.target[id], prob: Math.exp(lp[id]), prefix, exact, pickable: exact};
  })};
}
