"""CTranslate2 as a decoding engine behind the Translator (optional extra `aiayn[export]`).

The model is exported (aiayn.interop.ctranslate2.build_spec: same weights, sinusoids and vocabularies) once into a
cache inside the model directory, MODEL/ct2/fp32 (MODEL/ct2/fp32-ema for EMA weights), and exported
again when it is stale: its marker records size, mtime and SHA-256 of every file the export was made
from (weights, config.yaml, tokenizer files) and the CTranslate2 version. The marker also records size,
mtime and SHA-256 of the export's own files, checked before each use (a file whose mtime changed is hashed
again): a truncated or altered cache is exported again, with a warning, rather than loaded (CTranslate2
fails on it with a traceback every run). The cache is always float32; CTranslate2 converts the weights to
the requested compute type (int8, ...) when it loads them.

What makes the results equal to the native engine's (tests/decoding/test_ct2_engine.py):
- the source side is aiayn's source pieces with the final </s>; <pad> and <s> are never output
  (suppress_sequences), no minimum length, no input truncation by CTranslate2 (the Translator cuts);
- the length limit a * |x| + b is per sentence in aiayn but per call in CTranslate2: all sentences are
  decoded in one call with the largest limit, and those whose search came within a step of their own limit
  again, in groups of equal limit (the others ended before it, so their limit changed nothing);
- CTranslate2's length penalty is |Y|^alpha, aiayn's "hf" form; the GNMT form cannot be expressed and
  is refused (see Translator.length_penalty_form).
- CTranslate2's beam search ends a sentence at K finished hypotheses (patience 1): aiayn's early_stopping,
  which the Translator turns on for this engine (an explicit false is refused).
What differs: CTranslate2 renormalizes the softmax over the tokens it may output, aiayn does not (it
sets <pad> and <s> to -inf after the softmax, as transformers does), so CTranslate2's scores are higher
by the probability mass of those two tokens: nothing for a trained model, a few percent for an
untrained one, where the renormalized scores can rank beam hypotheses differently."""

import contextlib
import json
import logging
import time
from pathlib import Path

from aiayn.data.file_hash import sha256_of
from aiayn.decoding.batches import pad_batch
from aiayn.decoding.beam import Hypothesis
from aiayn.decoding.engines import Capabilities
from aiayn.decoding.search_rules import max_lengths
from aiayn.errors import AiaynError, BudgetExceeded

log = logging.getLogger(__name__)
COMPUTE_TYPES = ("default", "auto", "float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16",
                 "float16", "bfloat16")
CACHE_DIR = "ct2"
CACHE_KIND = "ct2-cache"  # the "output" of the cache's marker (checkpoint.EXPORT_MARKER)
CACHE_FORMAT = 2  # bump when the export changes: older caches are then stale (2: the export's own files)


def import_ctranslate2():
    try:
        import ctranslate2
    except ImportError as err:
        raise AiaynError("--engine ct2 needs CTranslate2: pip install 'aiayn[export]' (or use --engine native)") \
            from err
    return ctranslate2


def check_ct2_compute_type(compute_type: str, device=None) -> None:
    """As check_compute_type, for the engine registry (CTranslate2 itself says what a device cannot run, at
    load)."""
    check_compute_type(compute_type)


def check_compute_type(compute_type: str) -> None:
    if compute_type not in COMPUTE_TYPES:
        raise AiaynError(f"--compute-type {compute_type!r} is not a CTranslate2 compute type; give one of "
                         f"{', '.join(COMPUTE_TYPES)}")


# ---- the cache inside the model directory -------------------------------------------------------------
def _sources(model_dir: Path, use_ema: bool) -> list[Path]:
    """The files an export is made from: what changes the weights, the architecture or the vocabularies."""
    from aiayn.data.tokenizer import TOKENIZER_FILES

    weights = model_dir / ("ema.safetensors" if use_ema else "model.safetensors")
    names = [weights.name, "config.yaml", *TOKENIZER_FILES]
    return [model_dir / n for n in names if (model_dir / n).is_file()]


def _stat(path: Path) -> dict:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _fingerprints(files: list[Path], known: dict) -> dict:
    """name -> size, mtime_ns, sha256; the hash is taken from `known` when size and mtime are unchanged."""
    out = {}
    for path in files:
        stat, old = _stat(path), known.get(path.name, {})
        same = old.get("size") == stat["size"] and old.get("mtime_ns") == stat["mtime_ns"] and "sha256" in old
        out[path.name] = {**stat, "sha256": old["sha256"] if same else sha256_of(path)}
    return out


def _read_marker(cache: Path) -> dict:
    from aiayn.checkpoint import EXPORT_MARKER

    with contextlib.suppress(OSError, ValueError):
        marker = json.loads((cache / EXPORT_MARKER).read_text(encoding="utf-8"))
        if isinstance(marker, dict) and marker.get("output") == CACHE_KIND:
            return marker
    return {}


def cache_dir(model_dir: Path, use_ema: bool) -> Path:
    ema = use_ema and (Path(model_dir) / "ema.safetensors").is_file()  # load_checkpoint's rule
    return Path(model_dir) / CACHE_DIR / ("fp32-ema" if ema else "fp32")


def ensure_cache(model_dir: str | Path, load_model, use_ema: bool = False) -> Path:
    """The CTranslate2 export of the checkpoint in `model_dir`, made (atomically) when missing, stale or
    damaged. load_model() -> (model, cfg, tokenizer) is called only then."""
    ctranslate2 = import_ctranslate2()
    model_dir = Path(model_dir)
    cache = cache_dir(model_dir, use_ema)
    files = _sources(model_dir, use_ema and cache.name.endswith("ema"))
    marker = _read_marker(cache)
    now = _fingerprints(files, marker.get("sources", {}))
    current = marker.get("format") == CACHE_FORMAT and marker.get("ctranslate2") == ctranslate2.__version__ \
        and _hashes(marker.get("sources", {})) == _hashes(now)
    if current:
        outputs, damage = _check_outputs(cache, marker.get("outputs"))
        if damage is None:
            if marker["sources"] != now or marker["outputs"] != outputs:  # touched or copied, same bytes
                _write_marker(cache, {**marker, "sources": now, "outputs": outputs})
            return cache
        log.warning("the CTranslate2 cache %s is damaged (%s); exporting the model again", cache, damage)
    else:
        log.info("exporting %s to CTranslate2 into %s (%s)", model_dir, cache, "stale" if marker else "missing")
    _export(cache, load_model, now, ctranslate2)
    return cache


def _hashes(fingerprints: dict) -> dict:
    return {k: v.get("sha256") for k, v in fingerprints.items() if isinstance(v, dict)}


def _check_outputs(cache: Path, recorded) -> tuple[dict, str | None]:
    """(the export's files' fingerprints now, None) where they are as exported; else (_, what is wrong)."""
    if not isinstance(recorded, dict) or not recorded or not all(isinstance(v, dict) for v in recorded.values()):
        return {}, "its marker does not record its files"
    for name, want in recorded.items():
        path = cache / name
        if not path.is_file():
            return {}, f"{name} is missing"
        if path.stat().st_size != want.get("size"):
            return {}, f"{name} has {path.stat().st_size} bytes, {want.get('size')} when it was exported"
    now = _fingerprints([cache / name for name in recorded], recorded)
    changed = [name for name in recorded if now[name]["sha256"] != recorded[name].get("sha256")]
    return now, (f"{changed[0]} differs from what was exported" if changed else None)


def _write_marker(cache: Path, marker: dict) -> None:
    from aiayn.checkpoint import EXPORT_MARKER
    from aiayn.io import write_text_atomic

    with contextlib.suppress(OSError):  # a read-only model directory: the hashes are taken again next time
        write_text_atomic(cache / EXPORT_MARKER, json.dumps(marker) + "\n")


def _export(cache: Path, load_model, sources: dict, ctranslate2) -> None:
    from aiayn.checkpoint import EXPORT_MARKER, check_output_dir
    from aiayn.errors import OutputError
    from aiayn.interop.ctranslate2 import write_ctranslate2
    from aiayn.io import atomic_dir

    for path in (cache.parent, cache):
        if path.is_symlink() or (path.exists() and not path.is_dir()):  # a user's link or file: never written through
            raise OutputError(f"{path} is not the plain directory aiayn keeps its CTranslate2 cache in; move it "
                              f"away (aiayn then exports the model there again)")
    try:  # replaces only an earlier cache that holds nothing but its own files
        check_output_dir(cache, CACHE_KIND, force=True)
    except OutputError:
        raise OutputError(f"the CTranslate2 cache {cache} holds files aiayn did not write; move them away "
                          f"(aiayn then exports the model there again)") from None
    model, cfg, tokenizer = load_model()
    try:
        with atomic_dir(cache) as tmp:
            write_ctranslate2(model, cfg, tokenizer, tmp)
            outputs = _fingerprints(sorted(tmp.iterdir()), {})  # checked before each use: _check_outputs
            marker = {"output": CACHE_KIND, "format": CACHE_FORMAT, "ctranslate2": ctranslate2.__version__,
                      "files": sorted(outputs), "sources": sources, "outputs": outputs}
            (tmp / EXPORT_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    except (PermissionError, OutputError) as err:  # atomic_dir words a write error (read-only, full) as an OutputError
        reason = err.strerror if isinstance(err, PermissionError) else str(err).split(": could not write it: ")[-1]
        raise AiaynError(f"cannot write the CTranslate2 cache in {cache.parent} ({reason}); make room or make the "
                         f"model directory writable, or use --engine native") from None


# ---- decoding ---------------------------------------------------------------------------------------------
def _device(device) -> tuple[str, int]:
    kind, index = str(device).partition(":")[::2]
    return kind, int(index or 0)


class CT2Engine:
    """A loaded CTranslate2 model and the pieces it needs from aiayn's tokenizer: a decoding engine
    (aiayn.decoding.engines) for beam search without attention maps."""

    # |Y|^alpha only, and a sentence ends at K finished hypotheses (patience 1); no maps, no sampling
    capabilities = Capabilities(name="ct2", attention_maps=False, sampling=False, length_penalty_forms=("hf",),
                                late_stopping=False, constraints=False, devices=("cpu", "cuda"), traces=False)

    def __init__(self, path: Path, tokenizer, device="cpu", compute_type: str = "default", *,
                 intra_threads: int = 1, inter_threads: int = 1):
        """Threads: 1 intra-op thread (BENCHMARKS.md: 2 spin-wait on a 2-vCPU machine), 1 batch at a time."""
        ctranslate2 = import_ctranslate2()
        check_compute_type(compute_type)
        kind, index = _device(device)
        try:
            self.model = ctranslate2.Translator(str(path), device=kind, device_index=index, compute_type=compute_type,
                                                intra_threads=intra_threads, inter_threads=inter_threads)
        except ValueError as err:  # a compute type this device cannot run
            supported = sorted(ctranslate2.get_supported_compute_types(kind))
            raise AiaynError(f"--compute-type {compute_type}: CTranslate2 cannot run it on {kind} ({err}); "
                             f"this device supports {', '.join(supported)}") from None
        self.compute_type, self.inter_threads = compute_type, inter_threads
        self.tokenizer = tokenizer
        self.piece_ids = {p: i for i, p in enumerate(tokenizer.id_to_piece(list(range(tokenizer.tgt_vocab_size))))}
        self.suppress = [[p] for p in dict.fromkeys(tokenizer.id_to_piece([tokenizer.pad_id, tokenizer.bos_id]))]

    @property
    def parallel_batches(self) -> int:
        return self.inter_threads

    def search(self, sources: list[list[int]], params, prefixes: list[list[int]], batching,
               constraints=None) -> list[list[Hypothesis]]:
        """The engines' search: each sentence's length limit as the native beam search sets it (a * |x| + b
        within the cap, room for the prefix and min_length), then translate(). No constraints (refused by
        the Translator: capabilities.constraints is false)."""
        assert constraints is None, "CTranslate2 has no lexical constraints"
        limits = max_lengths(pad_batch(sources, params.pad_id, "cpu"), params.pad_id, params.max_len_a,
                             params.max_len_b, params.max_output_len).tolist() if sources else []
        limits = [max(limit, len(p) + 1, params.min_length + 1) for limit, p in zip(limits, prefixes)]
        found = self.translate(sources, limits, params, prefixes, batching.batch_size, batching.max_tokens)
        return [[Hypothesis(ids, score, None) for ids, score in hyps] for hyps in found]

    def sample(self, sources, params, batching) -> list[list[Hypothesis]]:
        raise AiaynError("sampling needs the native engine (--engine native)")  # refused before: capabilities

    def close(self) -> None:
        pass

    def score(self, sources: list[list[int]], targets: list[list[int]], *, bos_id: int, pad_id: int,
              batching) -> list[list[float]]:
        """CTranslate2's score_batch: per pair the log-prob of each target token, </s> included (the targets
        are given without it: CTranslate2 adds it, and <s> before them)."""
        if not sources:
            return []
        size = {"max_batch_size": batching.batch_size} if batching.max_tokens is None else \
            {"max_batch_size": batching.max_tokens, "batch_type": "tokens"}
        results = self.model.score_batch([self.tokenizer.source_id_to_piece(s) for s in sources],
                                         [self.tokenizer.id_to_piece(t[:-1]) for t in targets],
                                         max_input_length=0, **size)
        return [list(r.log_probs) for r in results]

    def translate(self, sources: list[list[int]], limits: list[int], params, prefixes: list[list[int]],
                  batch_size: int, max_tokens: int | None = None) -> list[list[tuple[list[int], float]]]:
        """Source ids (with </s>), each one's output length limit and target prefix ids ([] for none), the
        search's SearchParams (early_stopping: what CTranslate2 always does) -> per sentence its n_best
        (target ids without </s>, score), best first. max_tokens: CTranslate2's batch_type "tokens".

        One call for all, at the largest limit, then one per distinct limit for the sentences whose search
        reached within a step of their own (decoding each group of equal limit at once cost a server batch
        of 32 mixed sentences as many calls as it had source lengths)."""
        if not sources:
            return []
        by_length = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        out = self._call(sources, prefixes, by_length, max(limits), params, batch_size, max_tokens)
        groups: dict[int, list[int]] = {}
        for i in by_length:
            if not ended_before(out[i], limits[i]):
                groups.setdefault(limits[i], []).append(i)
        for limit, indices in groups.items():
            out.update(self._call(sources, prefixes, indices, limit, params, batch_size, max_tokens))
        return [out[i][: params.n_best] for i in range(len(sources))]

    def _call(self, sources, prefixes, indices, limit, params, batch_size, max_tokens) -> dict:
        """One CTranslate2 call on sources[indices] with output limit `limit` -> {index: all beam
        hypotheses [(ids, score)], best first} (all of them, so that ended_before sees the longest)."""
        if params.deadline is not None and time.monotonic() > params.deadline:
            raise BudgetExceeded("decoding stopped: over its time budget")
        batching = {"max_batch_size": batch_size} if max_tokens is None else \
            {"max_batch_size": max_tokens, "batch_type": "tokens"}
        batch = [self.tokenizer.source_id_to_piece(sources[i]) for i in indices]
        prefix = [self.tokenizer.id_to_piece(prefixes[i]) or None for i in indices]
        results = self.model.translate_batch(
            batch, prefix if any(prefix) else None, **batching, beam_size=params.beam,
            num_hypotheses=params.beam, length_penalty=params.alpha, max_decoding_length=limit,
            min_decoding_length=params.min_length, no_repeat_ngram_size=params.no_repeat_ngram_size,
            max_input_length=0, return_scores=True, suppress_sequences=self.suppress)
        return {i: [([self.piece_ids[p] for p in hyp], score) for hyp, score in zip(result.hypotheses, result.scores)]
                for i, result in zip(indices, results)}


def ended_before(hypotheses: list[tuple[list[int], float]], limit: int) -> bool:
    """Whether a search that returned these (all its beam's finished hypotheses) would have run the same
    under `limit`. It ended at the step that finished the last of them (with patience 1 CTranslate2 stops
    at beam-size finished hypotheses, so that one is among those returned): the step of its </s>, at
    position len + 1. Under `limit`, step limit - 1 is the last and cuts every live hypothesis, so the
    search is the same only if it ended before that step: len + 1 < limit for the longest."""
    return max(len(ids) for ids, _ in hypotheses) + 1 < limit


def load_engine(model_dir: Path, load_model, tokenizer, device="cpu", compute_type: str | None = None,
                use_ema: bool = False, *, inter_threads: int = 1) -> CT2Engine:
    compute_type = compute_type or "default"
    check_compute_type(compute_type)  # before any export
    return CT2Engine(ensure_cache(model_dir, load_model, use_ema), tokenizer, device, compute_type,
                     inter_threads=inter_threads)

