"""The Translator: one object behind the Python API, the CLI and the web server. Two engines behind it,
with the same options and results: native (aiayn's own beam search, attention maps on request) and ct2
(CTranslate2 on an export cached in the model directory: aiayn.decoding.ct2_engine)."""

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aiayn.decoding.beam import LP_FORMS, SearchParams, beam_search
from aiayn.decoding.greedy import max_lengths
from aiayn.decoding.sampling import SamplingOptions, sample_translations
from aiayn.decoding.translate_batch import encode_sources, length_sorted_batches, max_positions, pad_batch
from aiayn.errors import AiaynError

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


MAX_ALPHA = 10.0  # ((5 + |Y|) / 6) ** alpha overflows a float for large alpha; useful values are below 2


def _check_int(name: str, value, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AiaynError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise AiaynError(f"{name}={value} must be {bound}")


def check_options(beam: int, n_best: int, alpha: float, batch_size: int) -> None:
    """The decoding options of every entry point (API, CLI, server), checked in one place."""
    _check_int("beam", beam, 1)
    _check_int("n_best", n_best, 1, beam)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= MAX_ALPHA:
        raise AiaynError(f"alpha (length penalty) must be a number in [0, {MAX_ALPHA:g}], got {alpha!r}")
    _check_int("batch_size", batch_size, 1)


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


def check_controls(min_length: int, no_repeat_ngram_size: int, max_tokens: int | None) -> None:
    _check_int("min_length", min_length, 0)
    _check_int("no_repeat_ngram_size", no_repeat_ngram_size, 0)
    if max_tokens is not None:
        _check_int("max_tokens", max_tokens, 1)


def check_prefixes(prefixes, n_sentences: int) -> None:
    """None, or one text per sentence ("" for none), valid UTF-8 like the sentences."""
    if prefixes is None:
        return
    check_sentences(prefixes, "target prefix")
    if len(prefixes) != n_sentences:
        raise AiaynError(f"target_prefix has {len(prefixes)} entries for {n_sentences} sentences: give one per "
                         f"sentence (\"\" for none)")


ENGINES = ("native", "ct2")


MAX_WORKERS_PER_CORE = 4  # beyond the cores workers only wait for each other; far beyond, a typo forks hundreds


def check_workers(workers: int) -> None:
    _check_int("workers", workers, 1)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if workers > MAX_WORKERS_PER_CORE * cores:
        raise AiaynError(f"--workers {workers}: this process may use {cores} CPU cores, and workers beyond the cores "
                         f"only wait for each other (each with its own buffers): give at most "
                         f"{MAX_WORKERS_PER_CORE * cores}, best the number of cores")


def even_batch_size(n: int, batch_size: int, workers: int) -> int:
    """The size, at most batch_size, that cuts n sentences into a multiple of `workers` batches of about
    equal size: 400 sentences at 64 are 7 batches, and the 2 workers' last one ran alone for a fifth of
    the call (measured); as 8 batches of 50 they end together."""
    batches = -(-n // batch_size)
    batches = -(-batches // workers) * workers
    return -(-n // batches)


class Translator:
    def __init__(self, model, tokenizer, decode_cfg, device="cpu", model_dir: Path | None = None, *,
                 ct2=None, pool=None, compiled=None):
        """ct2: a loaded aiayn.decoding.ct2_engine.CT2Engine to decode with (None: the native engine).
        pool: an aiayn.decoding.workers.WorkerPool that runs the native engine's beam searches (None: this
        process runs them). compiled: an aiayn.decoding.compiled.CompiledDecoder of the model, whose compiled
        step this process's beam searches use (not those with attention maps). The model is kept either way:
        its size limits, its arch, inspection (aiayn attention, /api/step), attention maps."""
        self.model, self.tokenizer, self.decode_cfg = model.eval(), tokenizer, decode_cfg
        self.device = torch.device(device)
        self.model_dir = model_dir
        self.ct2 = ct2
        self.pool = pool
        self.compiled = compiled

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str = "cpu", use_ema: bool = False, *,
                        engine: str = "native", compute_type: str | None = None, workers: int = 1,
                        compile: bool = False) -> "Translator":
        """engine: "native" or "ct2"; compute_type (ct2 only): a CTranslate2 compute type, e.g. float32,
        int8 (default: CTranslate2's default for the device, the export's float32 on CPU). workers: batches
        decoded at once on a CPU, each on one core: CTranslate2's inter_threads, or for the native engine
        that many worker processes (aiayn.decoding.workers; close() ends them); 1: this process alone.
        compile: beam searches (without attention maps) take a compiled encoder and decoding step
        (aiayn.decoding.compiled: faster at every batch size), compiled before this returns (about 90 s the
        first time, then loaded from the cache, aiayn.decoding.compiled_cache; forked workers share it).
        Also sets glibc to reuse freed memory in this process
        (aiayn.device.keep_freed_memory): decoding is faster."""
        from aiayn.checkpoint import load_checkpoint, resolve_model_dir
        from aiayn.device import keep_freed_memory, resolve_device

        if engine not in ENGINES:
            raise AiaynError(f"--engine {engine!r}: give one of {', '.join(ENGINES)}")
        if compute_type is not None and engine != "ct2":
            raise AiaynError(f"--compute-type {compute_type} applies to --engine ct2 only (the native engine "
                             f"decodes in the model's own precision)")
        check_workers(workers)
        if compile and engine != "native":
            raise AiaynError("--compile compiles the native engine's decoding step; CTranslate2 is compiled "
                             "already: drop --compile, or use --engine native")
        device = resolve_device(device)
        if workers > 1 and device.type != "cpu":
            raise AiaynError(f"--workers {workers} runs batches side by side on CPU cores; on {device} use one "
                             f"(a GPU decodes a batch at a time)")
        keep_freed_memory()
        model_dir = resolve_model_dir(path)
        model, cfg, tokenizer = load_checkpoint(model_dir, device, use_ema)
        ct2 = None
        if engine == "ct2":
            from aiayn.decoding.ct2_engine import load_engine

            if cfg.model.arch != "transformer":
                raise AiaynError("--engine ct2 runs Transformer models (CTranslate2 has no RNN seq2seq); "
                                 "use --engine native")
            ct2 = load_engine(model_dir, lambda: (model.cpu(), cfg, tokenizer), tokenizer, device, compute_type,
                              use_ema, inter_threads=workers)
            model.to(device)
        compiled = None
        if compile:
            from aiayn.decoding.compiled import check_compilable

            check_compilable(model, device)
        pool = None
        if engine == "native" and workers > 1:
            from aiayn.decoding.workers import WorkerPool

            pool = WorkerPool(model=model, model_dir=model_dir, workers=workers, device=str(device), use_ema=use_ema,
                              compile=compile)
        elif compile:
            from aiayn.decoding.compiled import CompiledDecoder

            compiled = CompiledDecoder(model)
            compiled.warm_up(cfg.decode.beam)
        return cls(model, tokenizer, cfg.decode, device, model_dir, ct2=ct2, pool=pool, compiled=compiled)

    def close(self) -> None:
        """Ends the worker processes, if any (they also end when this process exits)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def __enter__(self) -> "Translator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def engine(self) -> str:
        return "native" if self.ct2 is None else "ct2"

    def length_penalty_form(self, form: str | None = None, alpha: float | None = None) -> str:
        """The length penalty's form for a request (None: the model's decode.length_penalty_form).
        CTranslate2 has only |Y|^alpha, aiayn's "hf" form: with the ct2 engine the model's default becomes
        hf, and an explicit gnmt is refused (unless alpha is 0, where both forms are 1)."""
        alpha = self.decode_cfg.length_penalty if alpha is None else alpha
        chosen = self.decode_cfg.length_penalty_form if form is None else form
        if chosen not in LP_FORMS:
            raise AiaynError(f"length_penalty_form must be one of {', '.join(LP_FORMS)}, got {chosen!r}")
        if self.ct2 is None or chosen == "hf":
            return chosen
        if form is not None and alpha != 0:
            raise AiaynError("--length-penalty-form gnmt ((5 + |Y|) / 6)^alpha: CTranslate2 has only |Y|^alpha; "
                             "use --length-penalty-form hf (the default with --engine ct2), or --engine native")
        return "hf"

    def early_stopping(self, value: bool | None = None) -> bool:
        """Whether a request's beam search ends a sentence at K finished hypotheses (None: the model's
        decode.early_stopping). CTranslate2 always does (patience 1): with the ct2 engine the default becomes
        True, and an explicit False is refused."""
        if value is not None and not isinstance(value, bool):
            raise AiaynError(f"early_stopping must be true or false, got {value!r}")
        if self.ct2 is None:
            return self.decode_cfg.early_stopping if value is None else value
        if value is False:
            raise AiaynError("early_stopping false (--no-early-stopping: search on while a live hypothesis could "
                             "still win): CTranslate2 ends a sentence at beam-size finished hypotheses; drop it, or "
                             "use --engine native")
        return True

    @property
    def parallel_batches(self) -> int:
        """Batches of plain translations this translator decodes at once: its worker processes, or
        CTranslate2's inter_threads; 1 in this process alone."""
        if self.pool is not None:
            return self.pool.workers
        return self.ct2.inter_threads if self.ct2 is not None else 1

    @property
    def arch(self) -> str:
        return "rnn" if hasattr(self.model, "encoder") else "transformer"

    def translate(self, sentences: list[str], beam: int | None = None, n_best: int = 1,
                  alpha: float | None = None, return_attention: bool = False,
                  batch_size: int = 64, *, max_output_len: int | None = None,
                  time_limit: float | None = None, length_penalty_form: str | None = None,
                  min_length: int = 0, no_repeat_ngram_size: int = 0, target_prefix: list[str] | None = None,
                  max_tokens: int | None = None, early_stopping: bool | None = None,
                  spread: bool = True) -> list[Translation]:
        """Beam-search translations, in input order. max_output_len caps every output's length (tokens);
        time_limit (seconds) bounds the whole call: past it, BudgetExceeded. length_penalty_form: "gnmt"
        or "hf" (default: the model's decode.length_penalty_form; see aiayn.decoding.beam).
        min_length: output tokens before </s> may end a translation; no_repeat_ngram_size: no n-gram twice
        in an output (0: off); target_prefix: per sentence a text the translation must start with ("" for
        none; the search continues after it). max_tokens: batches hold at most this many source tokens,
        padding included (as fairseq's --max-tokens and CTranslate2's batch_type "tokens"), and at most
        batch_size sentences. early_stopping: end a sentence's search at K finished hypotheses (default: the
        model's decode.early_stopping, see Translator.early_stopping). With the ct2 engine: the form is hf
        (see length_penalty_form), early stopping is on, attention is refused, and time_limit is checked
        between CTranslate2 calls (one for all sentences, then one per length limit reached, see ct2_engine).
        spread: with parallel_batches > 1, cut the call into a multiple of that many batches of about equal
        size, so that every worker is busy to the end (even_batch_size); False: batches of batch_size, as
        in one process (the server, which gives each worker a batch of its own, passes False)."""
        beam = self.decode_cfg.beam if beam is None else beam
        alpha = self.decode_cfg.length_penalty if alpha is None else alpha
        check_options(beam, n_best, alpha, batch_size)
        check_controls(min_length, no_repeat_ngram_size, max_tokens)
        form = self.length_penalty_form(length_penalty_form, alpha)
        early_stopping = self.early_stopping(early_stopping)
        if return_attention and self.ct2 is not None:
            raise AiaynError("attention maps need the native engine (--engine native): CTranslate2 returns at "
                             "most one averaged cross-attention matrix, not aiayn's maps of every layer and head")
        check_sentences(sentences)
        check_prefixes(target_prefix, len(sentences))
        if max_output_len is not None:
            _check_int("max_output_len", max_output_len, 1)
        deadline = None if time_limit is None else time.monotonic() + time_limit
        tok = self.tokenizer
        max_output_len = min(max_output_len or self.max_positions, self.max_positions)  # step t reads position t
        results, filled, sources, truncated = self.prepare(sentences)
        prefixes = self._prefix_ids(target_prefix, filled, max_output_len)
        params = SearchParams(bos_id=tok.bos_id, eos_id=tok.eos_id, pad_id=tok.pad_id, beam=beam, alpha=alpha,
                              lp_form=form, max_len_a=self.decode_cfg.max_len_a, max_len_b=self.decode_cfg.max_len_b,
                              max_output_len=max_output_len, n_best=n_best, min_length=min_length,
                              no_repeat_ngram_size=no_repeat_ngram_size, early_stopping=early_stopping,
                              return_attention=return_attention, deadline=deadline)
        pooled = self.pool is not None and not return_attention  # maps come from this process's model
        parallel = 1 if return_attention else self.parallel_batches
        if spread and parallel > 1 and max_tokens is None and sources:  # every worker busy to the end
            batch_size = even_batch_size(len(sources), batch_size, parallel)
        if self.ct2 is not None:
            self._translate_ct2(results, filled, sources, truncated, params, prefixes, batch_size, max_tokens)
            return results
        batches = length_sorted_batches([len(s) for s in sources], batch_size, max_tokens)
        if pooled:
            found = self.pool.search([[sources[i] for i in b] for b in batches], params,
                                     [[prefixes[i] for i in b] for b in batches])
        else:
            found = (self._search_here([sources[i] for i in b], params, [prefixes[i] for i in b]) for b in batches)
        for indices, nbest in zip(batches, found):
            for row, i in enumerate(indices):
                results[filled[i]] = self._result(nbest[row], sources[i], return_attention)
                results[filled[i]].truncated = truncated[i]
        return results

    def _search_here(self, sources: list[list[int]], params: SearchParams, prefixes: list[list[int]]) -> list:
        """One batch's beam search in this process -> per sentence its n-best Hypotheses."""
        src = pad_batch(sources, self.tokenizer.pad_id, self.device)
        model = self.compiled if self.compiled is not None and not params.return_attention else self.model
        with torch.inference_mode():
            return beam_search(model, src, params, prefixes)

    def _prefix_ids(self, target_prefix: list[str] | None, filled: list[int], max_output_len: int) -> list[list[int]]:
        """Target ids of each non-blank sentence's prefix ([] for none), each checked to fit the output."""
        if target_prefix is None:
            return [[] for _ in filled]
        texts = [target_prefix[i] for i in filled]
        ids = [p if text.strip() else [] for p, text in zip(self.tokenizer.encode_target(texts), texts)]
        for number, p in zip(filled, ids):
            if len(p) >= max_output_len:
                raise AiaynError(f"target prefix {number + 1}: {len(p)} tokens, but outputs are at most "
                                 f"{max_output_len} tokens with </s>: shorten it")
        return ids

    def prepare(self, sentences: list[str]):
        """-> (results: a blank Translation per sentence, indices of the non-blank ones, their source ids
        with </s>, whether each was cut to the model's positions). A blank line translates to a blank line:
        the model would invent a sentence for a lone </s>."""
        tok, limit = self.tokenizer, self.max_positions
        results = [Translation(text="", score=0.0, tokens=[], src_tokens=[], n_best=[("", 0.0)]) for _ in sentences]
        filled = [i for i, s in enumerate(sentences) if s.strip()]
        sources = encode_sources(tok, [sentences[i] for i in filled])
        truncated = [len(s) > limit for s in sources]
        sources = [s[: limit - 1] + [tok.eos_id] if cut else s for s, cut in zip(sources, truncated)]
        return results, filled, sources, truncated

    def sample(self, sentences: list[str], *, options: SamplingOptions, batch_size: int = 64,
               max_output_len: int | None = None, time_limit: float | None = None) -> list[Translation]:
        """Sampled translations (temperature, top-k, top-p; reproducible with options.seed), in input order;
        each Translation's score is the summed log-probability of its tokens. Native engine only."""
        if self.ct2 is not None:
            raise AiaynError("sampling needs the native engine (--engine native)")
        check_sentences(sentences)
        _check_int("batch_size", batch_size, 1)
        if max_output_len is not None:
            _check_int("max_output_len", max_output_len, 1)
        deadline = None if time_limit is None else time.monotonic() + time_limit
        return sample_translations(self, sentences, options, batch_size, max_output_len, deadline)

    def _translate_ct2(self, results, filled, sources, truncated, params: SearchParams, prefixes, batch_size,
                       max_tokens) -> None:
        tok = self.tokenizer
        limits = max_lengths(pad_batch(sources, tok.pad_id, "cpu"), tok.pad_id, params.max_len_a, params.max_len_b,
                             params.max_output_len).tolist() if sources else []  # the native engine's a * |x| + b
        limits = [max(limit, len(p) + 1) for limit, p in zip(limits, prefixes)]  # as beam_search: room after it
        nbest = self.ct2.translate(sources, limits, params, prefixes, batch_size, max_tokens)
        for i, hyps in enumerate(nbest):
            ids, score = hyps[0]
            results[filled[i]] = Translation(
                text=tok.decode(ids), score=score, tokens=tok.id_to_piece(ids),
                src_tokens=tok.source_id_to_piece(sources[i]), n_best=[(tok.decode(h), s) for h, s in hyps],
                truncated=truncated[i])

    @property
    def max_positions(self) -> int:
        """The longest source (with </s>) and output the model takes: its position table's size."""
        return max_positions(self.model) or 1024

    def _result(self, hyps, source_ids, return_attention) -> Translation:
        tok, best = self.tokenizer, hyps[0]
        attention = None
        if return_attention:
            attention = self._attention_maps(best, source_ids)
        n_best = [(tok.decode(h.tokens), h.score) for h in hyps]
        return Translation(text=tok.decode(best.tokens), score=best.score, tokens=tok.id_to_piece(best.tokens),
                           src_tokens=tok.source_id_to_piece(source_ids), n_best=n_best, attention=attention)

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
