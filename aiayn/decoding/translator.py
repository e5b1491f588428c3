"""The Translator: one object behind the Python API, the CLI and the web server. It holds the model, its
tokenizer and decode settings, and one decoding engine (aiayn.decoding.engines: native, compiled, worker
pool, or CTranslate2, aiayn.decoding.ct2_engine), picked once in from_pretrained; every engine takes the
same options (checked against its Capabilities by DecodeOptions.for_model) and gives the same results."""

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aiayn.cpu import prepare_for_cpu, set_compute_type
from aiayn.data.memory_budget import check_decoding
from aiayn.decoding.batches import encode_sources, max_positions, pad_batch
from aiayn.decoding.beam import SearchParams
from aiayn.decoding.beam_trace import BeamTrace, trace_search
from aiayn.decoding.constraints import check_constraints, encode_constraints, reserved_in
from aiayn.decoding.drift import warn_if_drifting
from aiayn.decoding.engines import Batching, NativeEngine, PoolEngine, SampleParams
from aiayn.decoding.ensemble import check_weights, load_ensemble
from aiayn.decoding.options import DecodeOptions
from aiayn.decoding.registry import EngineSettings, check_engine_flags, check_ensemble, load_engine
from aiayn.decoding.sampling import SamplingOptions
from aiayn.decoding.scoring import Score, encode_pairs, scores_of
from aiayn.decoding.search_rules import max_lengths
from aiayn.errors import AiaynError
from aiayn.heatmap import translation_html

log = logging.getLogger(__name__)


@dataclass
class Translation:
    text: str
    score: float  # length-normalized log-probability of the best hypothesis
    tokens: list[str]  # target subword pieces (without bos/eos)
    src_tokens: list[str]  # source subword pieces (with the final </s>)
    n_best: list[tuple[str, float]] = field(default_factory=list)
    attention: dict | None = None  # numpy arrays: "cross" (L, H, T, S), "decoder_self" (L, H, T, T), ...
    truncated: bool = False  # the source was longer than the model's maximum and was cut
    stopped_at_limit: bool = False  # the output reached its length limit (a * |src| + b, the cap) without </s>
    constraints_met: bool = True  # False: it reached its length limit before writing every constraint
    log_prob: float | None = None  # summed log-probability of the best hypothesis (None: ct2, a blank line)
    diagnostics: dict | None = None  # flags and signals (aiayn.inspect.quality.diagnostics.translate_diagnosed)

    def _repr_html_(self) -> str:
        """Jupyter: the text, the score and, with attention maps, the last layer's cross-attention."""
        return translation_html(self)


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """Sentences ready for a search (Translator.prepare): results, a blank Translation per sentence (a blank
    line stays one); filled, the indices of the non-blank sentences; sources, their source ids with </s>;
    truncated, per source whether it was cut to the model's positions."""

    results: list[Translation]
    filled: list[int]
    sources: list[list[int]]
    truncated: list[bool]


def check_sentences(sentences, what: str = "sentence") -> None:
    """A list of text strings, each encodable as UTF-8 (argv and JSON can carry lone surrogates from
    bytes that were not UTF-8). what: how an error names one of them."""
    if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences):
        raise AiaynError(f"give a list of strings, one per {what}")
    for number, sentence in enumerate(sentences, start=1):
        try:
            sentence.encode("utf-8")
        except UnicodeEncodeError as err:
            raise AiaynError(f"{what} {number}: not valid UTF-8 text (character {err.start + 1}); "
                             f"re-encode the input as UTF-8, e.g. iconv -t UTF-8") from None


def check_prefixes(prefixes, n_sentences: int) -> None:
    """None, or one text per sentence ("" for none), valid UTF-8 like the sentences."""
    if prefixes is None:
        return
    check_sentences(prefixes, "target prefix")
    if len(prefixes) != n_sentences:
        raise AiaynError(f"target_prefix has {len(prefixes)} entries for {n_sentences} sentences: give one per "
                         f"sentence (\"\" for none)")


def unwritable(tokenizer, text: str) -> list[str]:
    """The characters of `text` the tokenizer's target side can only write as <unk>, each once, in order."""
    chars = dict.fromkeys(c for c in text if not c.isspace())
    return [c for c in chars if tokenizer.unk_id in tokenizer.encode_target([c])[0]]


def even_batch_size(n: int, batch_size: int, workers: int) -> int:
    """The size, at most batch_size, that cuts n sentences into a multiple of `workers` batches of about
    equal size: 400 sentences at 64 are 7 batches, and the 2 workers' last one ran alone for a fifth of
    the call (measured); as 8 batches of 50 they end together."""
    batches = -(-n // batch_size)
    batches = -(-batches // workers) * workers
    return -(-n // batches)


class Translator:
    def __init__(self, model, tokenizer, decode_cfg, device="cpu", model_dir: Path | None = None, *,
                 backend=None):
        """backend: the decoding engine (aiayn.decoding.engines; default: NativeEngine, this process on
        the model). The model is kept whatever the engine: its size limits, its arch, inspection (aiayn
        attention, /api/step), attention maps. The model is prepared for CPU decoding in place
        (aiayn.cpu.prepare_for_cpu: the same outputs, faster)."""
        self.model, self.tokenizer, self.decode_cfg = prepare_for_cpu(model).eval(), tokenizer, decode_cfg
        self.device = torch.device(device)
        self.model_dir = model_dir
        self.backend = backend or NativeEngine(model=self.model, device=self.device)

    @classmethod
    def from_pretrained(cls, path: str | Path | list, device: str = "cpu", use_ema: bool = False, *,
                        engine: str = "native", compute_type: str | None = None, workers: int = 1,
                        compile: bool = False, weights: list[float] | None = None) -> "Translator":
        """path: a model directory, or a list of them: an ensemble (aiayn.decoding.ensemble; one shared
        vocabulary; weights: one per model, > 0, default equal; the native engine in this process).
        engine: "native" or "ct2" (aiayn.decoding.registry). compute_type: the precision of the products, as
        CTranslate2 spells it: for the native engine float32 (the default), bfloat16 or int8
        (aiayn.cpu.compute_types: the weights' products in that precision, attention maps as ever); for ct2
        any CTranslate2 compute type, e.g. int8_float32 (default: CTranslate2's default for the device, the
        export's float32 on CPU). workers: batches
        decoded at once on a CPU, each on one core: CTranslate2's inter_threads, or for the native engine
        that many worker processes (aiayn.decoding.workers; close() ends them); 1: this process alone.
        compile: beam searches (without attention maps) take a compiled encoder and decoding step
        (aiayn.decoding.compiled: faster at every batch size), compiled before this returns (about 90 s the
        first time, then loaded from the cache, aiayn.decoding.compiled_cache; forked workers share it).
        Also sets glibc to reuse freed memory in this process
        (aiayn.device.keep_freed_memory): decoding is faster."""
        from aiayn.checkpoint import load_checkpoint
        from aiayn.device import keep_freed_memory, resolve_device
        from aiayn.run_dir import resolve_model_dir

        paths = list(path) if isinstance(path, (list, tuple)) else [path]
        settings = EngineSettings(device=resolve_device(device), compute_type=compute_type, workers=workers,
                                  compile=compile, use_ema=use_ema)
        check_engine_flags(engine, settings)
        if weights is not None:
            check_weights(weights, len(paths))
        check_ensemble(len(paths), engine, settings)
        keep_freed_memory()
        if len(paths) > 1:
            model, cfg, tokenizer, model_dir = load_ensemble(paths, weights, settings.device, use_ema)
            set_compute_type(prepare_for_cpu(model), compute_type or "float32")
            warn_if_drifting(model, tokenizer)
            return cls(model, tokenizer, cfg.decode, settings.device, model_dir)
        model_dir = resolve_model_dir(paths[0])
        model, cfg, tokenizer = load_checkpoint(model_dir, settings.device, use_ema)
        prepare_for_cpu(model)  # here, not only in __init__: forked worker processes take this model
        if compile:
            from aiayn.decoding.compiled import check_compilable

            check_compilable(model, settings.device)
        backend = load_engine(engine, model, cfg, tokenizer, model_dir, settings)
        return cls(model, tokenizer, cfg.decode, settings.device, model_dir, backend=backend)

    def close(self) -> None:
        """Ends the worker processes, if any (they also end when this process exits)."""
        self.backend.close()

    def __enter__(self) -> "Translator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def engine(self) -> str:
        """"native" or "ct2": the engine's name (--engine)."""
        return self.backend.capabilities.name

    @property
    def pool(self):
        """The worker processes (aiayn.decoding.workers.WorkerPool) of a worker-pool engine; None otherwise
        or once closed."""
        return self.backend.pool if isinstance(self.backend, PoolEngine) else None

    def resolve(self, options: DecodeOptions | None = None, **overrides) -> DecodeOptions:
        """The options a call runs with: `options` (default: DecodeOptions()) with `overrides`, the model's
        decode settings filled in, checked against this model and engine (DecodeOptions.for_model)."""
        options = (options or DecodeOptions()).overridden(**overrides)
        return options.for_model(self.decode_cfg, vocab_size=self.tokenizer.tgt_vocab_size,
                                 max_positions=self.max_positions, capabilities=self.backend.capabilities)

    @property
    def parallel_batches(self) -> int:
        """Batches of plain translations this translator decodes at once: its worker processes, or
        CTranslate2's inter_threads; 1 in this process alone."""
        return self.backend.parallel_batches

    @property
    def arch(self) -> str:
        return self.model.arch

    def translate(self, sentences: list[str], *, options: DecodeOptions | None = None,
                  target_prefix: list[str] | None = None, constraints: list[list[str]] | None = None,
                  **overrides) -> list[Translation]:
        """Translations of `sentences`, in input order, by beam search (or sampling: options.sampling).
        options: a DecodeOptions (default: the model's own decode settings); overrides: any of its fields
        by name, e.g. translate(lines, beam=5, n_best=2). target_prefix: per sentence a text the translation
        must start with ("" for none; the search continues after it). constraints: per sentence the phrases
        its translation must contain ([] for none; lexically constrained beam search, native engine,
        aiayn.decoding.constraints). With the ct2 engine the length
        penalty's form is hf and early stopping is on (DecodeOptions.for_model), and time_limit is checked
        between CTranslate2 calls (one for all sentences, then one per length limit reached)."""
        options = self.resolve(options, **overrides)
        check_sentences(sentences)
        check_prefixes(target_prefix, len(sentences))
        self._check_constraints(constraints, len(sentences), options)
        if target_prefix is not None and options.sampling is not None:
            raise AiaynError("sampling draws one translation per sentence: drop target_prefix")
        prepared = self.prepare(sentences)
        results, filled, sources = prepared.results, prepared.filled, prepared.sources
        self.check_memory(options, sources)
        prefixes = self._prefix_ids(target_prefix, filled, options.max_output_len)
        wanted = self._constraint_ids(constraints, filled, prefixes, options.max_output_len)
        for i, hyps in enumerate(self._search(options, sources, prefixes, wanted)):
            results[filled[i]] = self._result(hyps, sources[i], options.return_attention, prepared.truncated[i])
            results[filled[i]].constraints_met = hyps[0].unmet == 0
        self._mark_limits(results, filled, sources, prefixes, options, wanted)
        return results

    def trace(self, sentence: str, options: DecodeOptions | None = None, *, target_prefix: str | None = None,
              constraints: list[str] | None = None, **overrides) -> BeamTrace:
        """The beam search of one sentence, step by step (aiayn.decoding.beam_trace): each step's candidates
        with their tokens, log-prob, normalised score and status; BeamTrace.replay() gives its n-best list.
        Runs aiayn's own search on the model in this process (the native engine's, not compiled)."""
        options = self.resolve(options, **overrides)
        if options.sampling is not None:
            raise AiaynError("a trace shows a beam search: drop sampling")
        if not self.backend.capabilities.traces:
            raise AiaynError(f"a trace shows aiayn's own beam search; the {self.engine} engine's is not shown: use "
                             f"--engine native")
        self._check_constraints(None if constraints is None else [constraints], 1, options)
        check_sentences([sentence])
        check_prefixes(None if target_prefix is None else [target_prefix], 1)
        prepared = self.prepare([sentence])
        filled, sources = prepared.filled, prepared.sources
        if not filled:
            raise AiaynError("the sentence is blank: give some text to trace")
        prefix = self._prefix_ids(None if target_prefix is None else [target_prefix], filled, options.max_output_len)
        wanted = self._constraint_ids(None if constraints is None else [constraints], filled, prefix,
                                      options.max_output_len)
        src = pad_batch(sources, self.tokenizer.pad_id, self.device)
        return trace_search(self.model, src, self._search_params(options, None), prefix[0],
                            wanted[0] if wanted else [], self.tokenizer)

    def check_memory(self, options: DecodeOptions, sources: list[list[int]]) -> None:
        """The search's cache and scores against free memory (aiayn.data.memory_budget.check_decoding), before
        any batch is decoded: an upper bound, a full batch (batch_size sentences) of the longest source with
        its output length limit; options: resolved (self.resolve)."""
        if not sources:
            return
        cfg, members = self.decode_cfg, [m.config for m in getattr(self.model, "members", [self.model])]
        longest = max(len(s) for s in sources)
        output = max(min(options.max_output_len, int(longest * cfg.max_len_a + cfg.max_len_b)), options.min_length + 1)
        parallel = 1 if options.return_attention or options.sampling is not None else self.parallel_batches
        check_decoding(multi_head=members[0].multi_head, layers=sum(m.n_decoder_layers for m in members),
                       d_model=max(m.d_model for m in members), vocab_size=self.tokenizer.tgt_vocab_size,
                       beam=1 if options.sampling is not None else options.beam,
                       sentences=min(options.batch_size, len(sources)), source_len=longest, output_len=output,
                       parallel=parallel)

    def check_constraints(self, sentences: list[str], constraints, target_prefix, options: DecodeOptions) -> None:
        """The checks translate() makes of constraints, before any search (the server makes them before it
        queues texts); options: resolved (self.resolve)."""
        self._check_constraints(constraints, len(sentences), options)
        filled = self.prepare(sentences).filled
        prefixes = self._prefix_ids(target_prefix if any(target_prefix or []) else None, filled, options.max_output_len)
        self._constraint_ids(constraints, filled, prefixes, options.max_output_len)

    def _check_constraints(self, constraints, n_sentences: int, options: DecodeOptions) -> None:
        check_constraints(constraints, n_sentences)
        if constraints is not None and options.sampling is not None:
            raise AiaynError("sampling draws one translation per sentence: drop constraints")
        if constraints is not None and any(constraints) and not self.backend.capabilities.constraints:
            raise AiaynError(f"constraints need the native engine (--engine native): the {self.engine} engine "
                             f"has no lexical constraints, only a target prefix")

    def _constraint_ids(self, constraints, filled: list[int], prefixes: list[list[int]], max_output_len: int):
        if constraints is None or not any(constraints[i] for i in filled):
            return None
        return encode_constraints(self.tokenizer, [constraints[i] for i in filled], [i + 1 for i in filled],
                                  prefixes, max_output_len, unwritable=unwritable)

    def _search(self, options: DecodeOptions, sources: list[list[int]], prefixes: list[list[int]],
                constraints: list[list[list[int]]] | None = None) -> list:
        """The engine's n-best Hypotheses per source, by sampling or beam search."""
        tok, cfg = self.tokenizer, self.decode_cfg
        deadline = None if options.time_limit is None else time.monotonic() + options.time_limit
        if options.sampling is not None:
            params = SampleParams(options=options.sampling, bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id,
                                  max_len_a=cfg.max_len_a, max_len_b=cfg.max_len_b,
                                  max_output_len=options.max_output_len, deadline=deadline)
            return self.backend.sample(sources, params, Batching(batch_size=options.batch_size))
        batch_size, parallel = options.batch_size, 1 if options.return_attention else self.parallel_batches
        if options.spread and parallel > 1 and options.max_tokens is None and sources:  # all busy to the end
            batch_size = even_batch_size(len(sources), batch_size, parallel)
        return self.backend.search(sources, self._search_params(options, deadline), prefixes,
                                   Batching(batch_size=batch_size, max_tokens=options.max_tokens),
                                   constraints=constraints)

    def _mark_limits(self, results, filled, sources, prefixes, options: DecodeOptions, constraints=None) -> None:
        """stopped_at_limit: the best output is as long as its length limit, beam_search's (a * |src| + b within
        the cap, room for the prefix and min_length), so it ended there and not at </s>."""
        if not sources:
            return
        cfg, pad = self.decode_cfg, self.tokenizer.pad_id
        limits = max_lengths(pad_batch(sources, pad, "cpu"), pad, cfg.max_len_a, cfg.max_len_b,
                             options.max_output_len).tolist()
        for i, (limit, prefix) in enumerate(zip(limits, prefixes)):
            wanted = sum(len(p) for p in constraints[i]) if constraints else 0
            limit = max(limit, len(prefix) + 1, options.min_length + 1, len(prefix) + wanted + 1 if wanted else 0)
            results[filled[i]].stopped_at_limit = len(results[filled[i]].tokens) >= limit

    def _search_params(self, options: DecodeOptions, deadline: float | None) -> SearchParams:
        tok, cfg = self.tokenizer, self.decode_cfg
        return SearchParams(bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id, beam=options.beam,
                            alpha=options.alpha, lp_form=options.length_penalty_form, max_len_a=cfg.max_len_a,
                            max_len_b=cfg.max_len_b, max_output_len=options.max_output_len, n_best=options.n_best,
                            min_length=options.min_length, no_repeat_ngram_size=options.no_repeat_ngram_size,
                            early_stopping=options.early_stopping, return_attention=options.return_attention,
                            deadline=deadline)

    def _prefix_ids(self, target_prefix: list[str] | None, filled: list[int], max_output_len: int) -> list[list[int]]:
        """Target ids of each non-blank sentence's prefix ([] for none), each checked to fit the output."""
        if target_prefix is None:
            return [[] for _ in filled]
        texts = [target_prefix[i] for i in filled]
        ids = [p if text.strip() else [] for p, text in zip(self.tokenizer.encode_target(texts), texts)]
        for number, p in zip(filled, ids):
            reserved = reserved_in(self.tokenizer, target_prefix[number], p)
            if reserved:
                raise AiaynError(f"target prefix {number + 1}: {reserved} is a piece the model reserves, not text "
                                 f"it writes: leave it out")
            if self.tokenizer.unk_id in p:
                chars = unwritable(self.tokenizer, target_prefix[number])
                raise AiaynError(f"target prefix {number + 1}: the model cannot write {' '.join(chars)} (not in "
                                 f"its target vocabulary), so no translation could start with it: leave them out")
            if len(p) >= max_output_len:
                raise AiaynError(f"target prefix {number + 1}: {len(p)} tokens, but outputs are at most "
                                 f"{max_output_len} tokens with </s>: shorten it")
        return ids

    def prepare(self, sentences: list[str]) -> Prepared:
        """The sentences encoded for a search (Prepared). A blank line translates to a blank line: the model
        would invent a sentence for a lone </s>."""
        tok, limit = self.tokenizer, self.max_positions
        results = [Translation(text="", score=0.0, tokens=[], src_tokens=[], n_best=[("", 0.0)]) for _ in sentences]
        filled = [i for i, s in enumerate(sentences) if s.strip()]
        sources = encode_sources(tok, [sentences[i] for i in filled])
        truncated = [len(s) > limit for s in sources]
        sources = [s[: limit - 1] + [tok.eos_id] if cut else s for s, cut in zip(sources, truncated)]
        return Prepared(results=results, filled=filled, sources=sources, truncated=truncated)

    def score(self, sources: list[str], targets: list[str], options: DecodeOptions | None = None,
              **overrides) -> list[Score]:
        """The log-probability of each given translation under the model, by teacher forcing
        (aiayn.decoding.scoring), in input order: per pair its score (length-normalized as beam search scores:
        options' alpha and length_penalty_form), log_prob, tokens (</s> included) and token_log_probs.
        Batched by options.batch_size and max_tokens (source + target tokens)."""
        options = self.resolve(options, **overrides)
        check_sentences(sources, "source")
        check_sentences(targets, "target")
        src_ids, tgt_ids = encode_pairs(self.tokenizer, sources, targets, self.max_positions)
        found = self.backend.score(src_ids, tgt_ids, bos_id=self.tokenizer.bos_id, pad_id=self.tokenizer.pad_id,
                                   batching=Batching(batch_size=options.batch_size, max_tokens=options.max_tokens))
        return scores_of(self.tokenizer, tgt_ids, found, options)

    def sample(self, sentences: list[str], *, options: SamplingOptions, batch_size: int = 64,
               max_output_len: int | None = None, time_limit: float | None = None) -> list[Translation]:
        """Sampled translations (temperature, top-k, top-p; reproducible with options.seed), in input order;
        each Translation's score is the summed log-probability of its tokens. Native engine only. The same
        as translate(sentences, sampling=options, ...)."""
        return self.translate(sentences, sampling=options, batch_size=batch_size, max_output_len=max_output_len,
                              time_limit=time_limit)

    @property
    def max_positions(self) -> int:
        """The longest source (with </s>) and output the model takes: its position table's size."""
        return max_positions(self.model) or 1024

    def _result(self, hyps, source_ids, return_attention, truncated: bool) -> Translation:
        """The one result builder: an engine's n-best Hypotheses of one source -> its Translation."""
        tok, best = self.tokenizer, hyps[0]
        attention = None
        if return_attention:
            attention = self._attention_maps(best, source_ids)
        n_best = [(tok.decode(h.tokens), h.score) for h in hyps]
        return Translation(text=tok.decode(best.tokens), score=best.score, tokens=tok.id_to_piece(best.tokens),
                           src_tokens=tok.source_id_to_piece(source_ids), n_best=n_best, attention=attention,
                           truncated=truncated, log_prob=best.log_prob)

    def _attention_maps(self, best, source_ids: list[int]) -> dict:
        """Maps of the best hypothesis: cross and decoder self from the search (cached decoding),
        encoder self from one encoder pass of this sentence alone."""
        src_len = len(source_ids)
        maps = {k: v[..., :src_len].float().cpu().numpy() if k == "cross" else v.float().cpu().numpy()
                for k, v in best.attention.items()}
        with torch.inference_mode():
            src = torch.tensor([source_ids], dtype=torch.long, device=self.device)  # (1, S)
            _, encoder_maps = self.model.encode(src, return_attention=True)
        if isinstance(encoder_maps, torch.Tensor):  # an RNN has none: {}
            maps["encoder_self"] = encoder_maps[0].float().cpu().numpy()
        return maps
