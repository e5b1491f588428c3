// The page's words in English (i18n.js); i18n_ko.js has the same keys in Korean.
export const TEXT_EN = {
  title: "aiayn: look inside attention",
  lead:
    "Type a sentence, translate it, then look at every attention head: which words each word looks at, " +
    "and how the numbers are made.",
  "model.title": "The loaded model", "model.examples": "Try an example:",
  "f.arch": "architecture", "f.langs": "languages", "f.data": "trained on", "f.layers": "layers, encoder + decoder (N)",
  "f.heads": "heads per layer (h)", "f.d_model": "model width (d_model)",
  "f.d_hidden": "hidden size (d_model)",
  "f.d_k": "each head's query and key width (d_k)", "f.dff": "feed-forward inner width (d_ff)",
  "f.params": "parameters",
  "f.probe": "auxiliary loss",
  "f.probe_value": "the encoder's output at \"it\" is also trained to predict the German pronoun " +
    "(weight {weight}); no attention head is told where to look",
  "f.steps": "training steps", "f.bleu": "dev BLEU", "f.imported": "imported from", "f.unknown": "not recorded",
  "f.post_ln": "post-LN, as the paper", "f.pre_ln": "pre-LN",
  "f.decode": "decoding", "f.decode_value": "beam {beam}, length penalty α = {alpha}",
  "f.transformer": "Transformer ({norm})", "f.rnn": "RNN seq2seq: {cell}, {decoder} attention, {score} score",
  "lang.en": "English", "lang.de": "German", "lang.fr": "French", "lang.cs": "Czech",
  "input.label": "Sentence in {lang} (the source language)",
  "input.placeholder": "Type a sentence in the source language (Enter translates)",
  "target.label": "Target (optional): the maps of this translation instead of the model's own (teacher forcing)",
  "target.placeholder": "Leave empty to see the model's own translation",
  "decode.note": "the model's own settings: beam {beam}, length penalty α = {alpha}",
  beam: "beam", translate: "Translate", translating: "translating…", computing: "computing…",
  "result.own": "The model's translation (beam search; score {score}):",
  "result.forced": "given target", "result.forced_long": "Maps of the given target (teacher forcing):",
  "postedit.hint":
    "Click a token in the row of probabilities above to see the model's other choices at that position; " +
    "pick one to re-translate the rest after it.",
  "postedit.token": "{token}: show the alternatives",
  "postedit.title":
    "Position {n} (now “{token}”): the model's likeliest tokens, p(token | source, the translation " +
    "before it)",
  "postedit.pick": "keep the translation up to here as “{prefix}” and re-translate the rest",
  "postedit.not_exact": "its text would be written with other pieces, so it cannot start a translation as it is",
  "postedit.end": "ends the translation here (pick the text before it instead)",
  "postedit.prefix": "The translation starts with:", "postedit.clear": "clear",
  "timeline.title": "Attention as it learned",
  "timeline.explain":
    "The maps this model's training run kept at its validations, for a few fixed dev sentences with " +
    "their reference translations: move the slider to see the cross-attention become an alignment.",
  "timeline.sentence": "sentence", "timeline.slider": "training step",
  "timeline.step": "step {step} ({n} of {of} validations)",
  "result.probs": "probability of each output token:",
  "nbest.title": "Other candidates of the beam (click one to see its maps)",
  "download.png": "download PNG", "download.json": "download JSON",
  kind: "kind", layer: "layer", head: "head", mean: "mean", "layer.n": "layer {n}", "layer.mean": "layer mean",
  "kind.encoder_self": "encoder self-attention", "kind.decoder_self": "decoder self-attention (masked)",
  "kind.cross": "encoder–decoder (cross) attention", "kind.rnn": "RNN decoder attention over the encoder states",
  "explain.encoder_self":
    "Each source token (row) looks at every source token (column), itself included (§3.2.2, §3.3). Rows " +
    "sum to 1.",
  "explain.decoder_self":
    "Each decoder step (row) may look only at the target tokens already produced: the future is masked " +
    "with −∞ before the softmax, so its weight is exactly 0 (§3.2.3, hatched cells).",
  "explain.cross":
    "Each decoder step (row) looks at the source tokens (columns): queries come from the decoder, keys " +
    "and values from the encoder's output (§3.2.3). An RNN model has only this kind.",
  words: "words",
  "words.rule":
    "Word view: a word starts at a piece beginning with ▁ (SentencePiece's space mark); the pieces after " +
    "it (shown ·like·this) join it. Columns of a word are summed (rows still sum to 1); rows of a word " +
    "are averaged.",
  scale: "colour scale", "scale.global": "global (0–1)", "scale.row": "per row (row max = darkest)",
  "legend.row_max": "row max", numbers: "show numbers",
  "overview.title": "Every head at once",
  "overview.explain":
    "One thumbnail per layer (rows) and head (columns) of this kind, and the mean of each layer, on the " +
    "matrix's colour scale. Multi-head attention runs these heads side by side and concatenates their " +
    "outputs (§3.2.2). Click one to open it.",
  "matrix.title": "Attention matrix",
  "axis.keys": "keys → (what is looked at)", "axis.queries": "queries ↓ (who is looking)",
  "axis.decoder_row": "row = decoder input → the token it predicts", "legend.masked": "masked: −∞ → 0",
  "align.toggle": "word alignment",
  "align.legend":
    "Outlined: the word alignment, each output word linked to the source word it attends to most in {from}, " +
    "</s> left out.",
  "align.own": "These are the links `aiayn translate --alignment` prints for this translation.",
  "align.forced": "The same rule applied to the maps of the given target.",
  "align.pieces": "In the piece view each link outlines all the pieces of its two words as one box.",
  "align.head": "decoder layer {layer}, head {head}", "align.layer_mean": "decoder layer {layer}, mean over its heads",
  "align.rnn": "the RNN decoder's attention",
  "align.chosen.default": "This is the default head; `aiayn serve --alignment-head L:H` chooses another.",
  "align.chosen.given": "Chosen with `--alignment-head {spec}`.",
  "align.chosen.best":
    "Chosen with `--alignment-head best`: the head with the lowest alignment error rate on the built-in task's gold " +
    "alignments.",
  "align.chosen.ranking": "Chosen with --alignment-head FILE: the best head of an `aiayn heads --json` ranking.",
  "align.cell": "aligned ({link})",
  "lines.title": "Lines: who looks at whom",
  "lines.explain":
    "Left: queries; right: keys. A line's strength is the weight. Hover, focus or click a token on the " +
    "left (or use ↑/↓ in the matrix); a click opens its step view. Press head buttons to overlay any " +
    "heads of this layer, each in its own colour; with none pressed the lines follow the matrix.",
  "lines.overlay": "all heads",
  "lines.heads": "Overlay heads:",
  "lines.heads_n": "heads",
  "lines.as_matrix": "(as in the matrix)",
  "search.title": "Which head does this?",
  "search.explain":
    "Pick a query token and a key token: every layer × head of this kind is ranked by the attention " +
    "weight from the one to the other, and the best one opens.",
  "search.query": "query", "search.key": "key", "search.go": "Find the heads",
  "search.ranked": "{n} heads ranked by that weight (the matrix's numbers):",
  "search.ranked_top": "The {shown} highest of the {n} heads, ranked by that weight (the matrix's numbers):",
  "search.opened": "opened",
  "search.weak": "No head of this model does this well: the best weight is {best}, under {min}.",
  "search.weak_why":
    "This model is small ({params} parameters, {layers} layers of {heads} heads, d_model {d}) and was " +
    "trained for {steps} steps; heads that specialise like this (a pronoun looking at its noun, a verb at " +
    "its subject) appear in larger models trained much longer on much more data.",
  "search.weak_imported":
    "This imported model's heads do not single this pair out; try another pair, another kind or a " +
    "sentence closer to its training data.",
  "search.weak_fix":
    "To look at a model whose heads do: import a trained OPUS-MT model (a Transformer trained on millions " +
    "of sentence pairs) and serve it:",
  "arch.title": "Where this sits in the Transformer",
  "arch.explain":
    "The paper's Figure 1. The highlighted block is the attention you are looking at; click an attention " +
    "block to switch to it, positional encoding or feed forward to open their panels.",
  "arch.encoder": "Encoder",
  "arch.decoder": "Decoder",
  "arch.embed": "Input embedding",
  "arch.out_embed": "Output embedding (shifted right)",
  "arch.pe": "+ Positional encoding",
  "arch.mha": "Multi-head attention",
  "arch.masked_mha": "Masked multi-head attention",
  "arch.cross_mha": "Multi-head attention (encoder–decoder)", "arch.addnorm": "Add & Norm", "arch.ffn": "Feed forward",
  "arch.linear": "Linear",
  "arch.softmax": "Softmax → next-token probabilities",
  "arch.here": "here: layer {layer}, head {head}",
  "pe.title": "Positional encoding",
  "pe.explain":
    "The model's own table (§3.5): PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(…). " +
    "Rows are positions, columns dimensions; blue positive, red negative.",
  "pe.learned":
    "This model learned its positions (Table 3, row E): its own table, rows are positions, columns " +
    "dimensions; blue positive, red negative.",
  "pe.table": "the first {p} positions × {d} dimensions (the model has {max} positions)",
  "pe.table_label": "positional-encoding table",
  "pe.corner": "pos \\ dimension",
  "pe.dots": "PE(i) · PE(j) for every pair of positions: for the sinusoids it depends only on the offset j − i.",
  "pe.offsets": "PE(0) · PE(k) by offset k:", "pe.none": "This model has no position table.",
  "ffn.title": "Position-wise feed-forward network",
  "ffn.explain":
    "FFN(x) = max(0, x W1 + b1) W2 + b2 (§3.3): the same two layers at every position, d_model {d} → d_ff " +
    "{dff} → d_model {d}.",
  "ffn.pick": "Click a row of the matrix: its FFN activations appear here.",
  "ffn.active": "{n} of {of} hidden units are active (above 0) for this row:",
  "ffn.top": "the most active units:",
  "ffn.unit": "unit",
  "step.title": "Step by step",
  "step.empty":
    "Click a row label of the matrix (or focus it and press Enter) to see how that row's weights are " +
    "computed.",
  "step.mean": "The step view shows one head: “mean” has no single q, K and V. Choose a layer and a head.",
  "step.word_for": "{kind}, layer {layer}, head {head}, the row of the word “{word}” (word row {row})",
  "step.word_rnn_for": "the row of the word “{word}” (word row {row})",
  "step.word_explain":
    "Word view: the row of “{word}” is the mean of the rows of its {n} pieces, and a key word's weight is the " +
    "sum of its pieces' weights, as the heatmap merges them. In the table, each piece column is one piece's " +
    "softmax row, computed step by step, with its keys merged into words; their mean is the word's row on the " +
    "heatmap.",
  "step.word_one":
    "Word view: “{word}” is a single piece, so its row is that piece's softmax row with the keys merged into " +
    "words (a key word's weight is the sum of its pieces' weights), as on the heatmap.",
  "step.key_word": "key word", "step.word_mean": "word row = mean",
  "step.word_check":
    "The heatmap draws the same row from maps rounded to 3 decimals; here each softmax is computed afresh.",
  "step.word_pick": "How each of its rows is computed:",
  "step.piece_for": "piece “{piece}” (row {row}) of the word “{word}”",
  "step.for": "{kind}, layer {layer}, head {head}, query “{query}” (row {row})",
  "step.rnn_for": "decoder step t = {row}, input “{query}”",
  "step.transformer":
    "x is this position's input to the layer. The head's matrices W<sup>Q</sup>, W<sup>K</sup>, " +
    "W<sup>V</sup> (d<sub>model</sub> × d<sub>k</sub>) turn it into a query q and every position into a " +
    "key k and a value v (§3.2.2). A key's attention score is q·k divided by √d<sub>k</sub> (§3.2.1); " +
    "softmax turns the scores into the attention distribution (weights summing to 1); the output is the " +
    "weighted sum of the values.",
  "step.rows": "one row per key in the table below (click a vector to unfold it).",
  "step.mask": "a masked key (padding, or the future in the decoder, §3.2.3) gets −∞, so exp(−∞) = 0.",
  "step.output": "Output of this head:", "step.masked": "masked", "step.key": "key", "step.source": "source",
  "step.score_word": "score", "step.saturation":
    "Without ÷ √dₖ the largest weight would be {unscaled}; with it, {scaled} (√dₖ = {sqrt}). Large dot " +
    "products push the softmax into saturation, where one key takes nearly everything and the gradients " +
    "vanish: the reason for the scaling (§3.2.1).",
  "step.cross":
    "In cross attention x<sub>j</sub> is the encoder's output at source position j; q comes from the " +
    "decoder.",
  "step.rnn":
    "The decoder's step: compare the decoder state with every encoder state h<sub>i</sub> (the attention " +
    "score), softmax the scores into the attention distribution α<sup>t</sup>, take the weighted sum " +
    "a<sub>t</sub> (the attention value, or context vector), combine it with the state and predict the " +
    "next token. Decoder:",
  "step.rnn_score": "attention score", "step.rnn_alpha": "attention distribution", "step.rnn_context": "context vector",
  "step.state": "decoder state",
  "layer.title": "The rest of the layer, for this row",
  "layer.explain":
    "Every head computes its own output as above; they are concatenated and projected by Wᴼ (§3.2.2), " +
    "added to the layer's input and normalised (§3.1), then the feed-forward network (§3.3) and another " +
    "Add & Norm give the layer's output.",
  "layer.heads": "the {n} heads' outputs for this row (the current one marked):",
  "layer.heads_note": "each dₖ = {d} numbers",
  "layer.attn": "attention",
  "layer.pre_ln": "pre-LN: the sum is the stream; LayerNorm comes at the next sublayer's input",
  "layer.cross_sublayer": "then the cross-attention sublayer (x + its output, normalised)",
  "layer.output": "the layer's output", "layer.next": "Next token",
  "layer.temperature": "temperature T",
  "layer.temperature_explain": "softmax(logits / T): below 1 the likeliest tokens take more of the probability, " +
    "above 1 the others catch up. Beam search and greedy decoding read T = 1; aiayn translate --sample " +
    "--temperature T draws from this distribution.",
  "layer.next_explain":
    "The last decoder layer's output, through the final Linear and softmax: the most likely next tokens.",
  ready: "Translate a sentence to see its attention.",
  "err.empty": "Type a sentence first.",
  "err.long": "The text is {n} characters; this server takes at most {max}. Shorten it: nothing is cut silently.",
  "err.too_many_tokens": "The text is {n} subword tokens (with </s>); this server takes at most {max}. Shorten it.",
  "err.network": "The server cannot be reached. Is `aiayn serve` still running? Reload the page when it is.",
  "err.status": "The server answered {status}; try again.",
  "err.json": "The server's answer could not be read; try again.",
  "warn.unk": "{n} piece(s) of your text are unknown to this model ({unk}); its training data: {data}. Try an example.",
  "warn.mostly_unknown":
    "{n} of the {of} pieces of your text are unknown or raw bytes to this model: it cannot read this text " +
    "(its training data: {data}). Try an example.",
  "warn.target_language": "This looks like {lang}, the model's target language; the model translates from {src}.",
  "warn.source_cut": "The text was longer than the model's {limit} positions: only its beginning was translated.",
  "warn.unknown_tag": "{tags}: not a tag of this model (it was trained with no such tag), so it steers nothing.",
  "warn.stopped_at_limit":
    "The translation stopped at the length limit before the model ended it (</s>): it may be cut off.",
  "hover.top": "{query} looks most at: {keys}",
  "step.unscaled": "for comparison: softmax(q·k) without ÷ √dₖ",
  "step.unscaled_title": "not the weight: what the softmax would give without the scaling",
  "jump.label": "more views of this sentence", "jump.overview": "Every head ↓", "jump.lines": "Lines ↓",
  "jump.search": "Which head does this? ↓", "jump.arch": "In the Transformer ↓",
  "result.smoothing":
    "Label smoothing ε = {eps} (§5.4): training aims the right token at 1 − ε + ε/V = {cap} (V = {V}), not 1, " +
    "so about {pct}% means sure.",
  "ffn.encoder": "encoder", "ffn.decoder": "decoder",
  "ffn.where": "{stack} layer {layer}, sublayer {sub} of {n} (the FFN), token “{token}”",
  "pe.axis_pos": "position →", "pe.axis_rows": "position ↓", "pe.axis_dim": "dimension →",
  "pe.axis_i": "position i ↓", "pe.axis_j": "position j →",
  "pe.curves": "Each dimension is a wave over the positions (dimension 2i: sin(pos / 10000^(2i/d)), 2i + 1: cos): " +
    "low dimensions change fast, high ones slowly, so together they tell every position apart (§3.5).",
  "pe.dim": "dimension {i}",
  "jump.scores": "Scores → weights ↓",
  "scores.title": "From scores to weights",
  "scores.explain":
    "One head's whole score matrix, a stage at a time (§3.2.1): the dot products q·kᵀ, divided by √dₖ, masked " +
    "(−∞ where a query may not look) and the softmax of each row, which is the matrix above. Rows and columns " +
    "are pieces.",
  "scores.go": "Compute every row of {which}", "scores.loading": "row {n} of {of}…", "scores.play": "Play",
  "scores.stage": "stage",
  "scores.dots": "1. q·kᵀ: the raw dot products (blue positive, red negative)",
  "scores.scaled": "2. ÷ √dₖ = {sqrt}: the same pattern, smaller numbers",
  "scores.masked": "3. The mask: a key the query may not see gets −∞ (hatched)",
  "scores.weights": "4. The softmax of each row: the attention weights, each row summing to 1",
  "flow.label": "the steps of this computation",
  "exp.title": "One-click lessons:",
  "exp.it_animal": "“it” → “animal” (too tired)", "exp.wide_street": "“it” → “street” (too wide)",
  "exp.note":
    "The head search ranked every encoder head by how much “{query}” looks at “{key}” in this one sentence: " +
    "layer {layer}, head {head} wins with {weight}. One sentence is an anecdote: `python bench/coreference.py " +
    "--model DIR` measures each head's share over 500 sentences, and the head that wins here is not always " +
    "the one that is right most often.",
  "exp.missing": "“{word}” is not a word of this translation's source: the lesson needs the sentence as written.",
  "measure.label": "show", "measure.weights": "weights", "measure.contributions": "contributions",
  "measure.note":
    "Contributions: each cell is α·‖f(x)‖, the weight times the length of the key's value vector after the " +
    "head's output projection (f(xⱼ) = vⱼ W^O), each row divided by its sum (Kobayashi et al. 2020). A key can " +
    "take much weight and still move little, when its vector is short. The step view shows ‖f(xⱼ)‖ beside " +
    "each weight.",
  "search.ranked_contributions": "{n} heads ranked by that contribution (the matrix's numbers):",
  "search.ranked_top_contributions":
    "The {shown} highest of the {n} heads, ranked by that contribution (the matrix's numbers):",
  "align.contributions": "These links are read from the contributions, not the weights.",
  "step.norm_title": "the length of the key's value vector after the head's output projection, vⱼ W^O: what " +
    "the key moves at weight 1",
  "step.share": "contribution", "step.share_title": "α·‖f(x)‖ of this key over the row's sum: the number the " +
    "matrix shows with the switch on contributions",
  "step.norms":
    "‖f(xⱼ)‖ = ‖vⱼ W^O‖ is how long a vector the key moves when it takes all the weight. The weight times it, " +
    "over the row's sum, is the key's contribution: a large weight on a short vector moves little.",
  lang: "한국어",
  "jump.beam": "Beam search ↓", "beam.title": "The beam search, step by step",
  "beam.explain":
    "At each step the search extends each hypothesis it keeps (a partial translation) by one token, ranks " +
    "these candidates by their score and keeps the K = {k} best; a candidate among them that ends with </s> " +
    "is finished and set aside.",
  "beam.lp_gnmt": "score = log P ÷ lp, the length penalty lp = ((5 + |Y|) / 6)^α with α = {alpha}.",
  "beam.lp_hf": "score = log P ÷ lp, the length penalty lp = |Y|^α with α = {alpha}.",
  "beam.listed":
    "Only the 2K = {2k} highest-scoring of the K × V extensions are listed; the search looks at no others.",
  "beam.ended": "The search ended at step {n}: {why}.",
  "beam.done.finished": "{n} hypotheses had finished (at least K = {k}) and no unfinished one could still beat the " +
    "{kth} best",
  "beam.done.finished_one": "1 hypothesis had finished (at least K = 1) and no unfinished one could still beat it",
  "beam.done.early": "K = {k} hypotheses had finished", "beam.done.early_one": "K = 1 hypothesis had finished",
  "beam.done.length_limit": "it reached the length limit",
  "beam.slider": "step", "beam.prev": "previous step", "beam.next": "next step", "beam.step_of": "step {n} of {of}",
  "beam.caption": "Step {n}: the candidates (lp = {lp}); the {k} best go on",
  "beam.caption_end": "Step {n}: the candidates (lp = {lp}); the search ends here",
  "beam.status": "what became of it", "beam.hypothesis": "hypothesis after this token", "beam.token": "new token",
  "beam.score": "score",
  "beam.s.kept": "✓ kept", "beam.s.pruned": "✗ pruned", "beam.s.finished": "■ finished",
  "beam.s.finished_at_limit": "■ finished at the length limit",
  "beam.s.dropped": "✗ dropped: ended with </s> outside the K best", "beam.s.ended": "✗ search ended",
  "beam.finished": "The finished hypotheses ({n}), best first:", "beam.best": "← the translation",
  "beam.best_forced": "← the model's translation", "beam.item": "{text} — score {score}",
  "beam.forced": "The maps are of the target you gave; this is the model's own search for the sentence.",
  "ablate.button": "without this head",
  "ablate.search": "Translate again without {which}",
  "ablate.title": "{which}, taken out: the sentence translated again with this head's output set to 0 before W^O",
  "ablate.every": "with every head", "ablate.without": "without this head", "ablate.score": "score",
  "ablate.same": "The translation stays the same; only its probability moves (Δ: without the head minus with it).",
  "ablate.changed":
    "The marked words changed: struck through with every head, underlined without this head (Δ: without the " +
    "head minus with it).",
  "ablate.forced": "Both are the model's own translations, not the target you gave.",
};
