"""Decoding engines behind one protocol. The Translator picks one when it is made and hands it every
search: source ids (with </s>) in, per sentence its n-best Hypotheses out, in input order.

- NativeEngine: aiayn's own searches (beam search, sampling) in this process, attention maps on request;
- CompiledEngine: the same, with the compiled decoding step (aiayn.decoding.compiled) for beam searches
  without maps;
- PoolEngine: beam searches without maps in worker processes (aiayn.decoding.workers), batches side by side;
- CT2Engine (aiayn.decoding.ct2_engine): CTranslate2 on an export of the model.

Each declares what it can do (Capabilities); DecodeOptions.for_model refuses what it cannot, in one place.
"""

from dataclasses import dataclass
from typing import Protocol

import torch

from aiayn.decoding.batches import in_input_order, length_sorted_batches, pad_batch, search_in_batches
from aiayn.decoding.beam import LP_FORMS, Hypothesis, SearchParams, beam_search
from aiayn.decoding.sampling import SamplingOptions, sample_decode
from aiayn.decoding.scoring import native_token_log_probs


@dataclass(frozen=True, kw_only=True)
class Capabilities:
    """What an engine can do. name: "native" or "ct2" (Translator.engine, and --engine in messages).
    attention_maps: every attention map of the best hypothesis (return_attention); sampling: temperature,
    top-k, top-p instead of beam search; length_penalty_forms: the forms it scores with (the first is its
    default when the model's is not among them); late_stopping: it can search on after K hypotheses have
    finished (early_stopping false); target_prefix: translations forced to start with a text;
    constraints: phrases each translation must contain (lexically constrained beam search); devices:
    the torch device types it decodes on; ensembles: it decodes an ensemble of models (aiayn.decoding.ensemble:
    a model object in this process); compiles: --compile gives it a compiled decoding step; maps_in_workers:
    attention maps and samples come from worker processes too (False: from this process's model only);
    traces: its beam search is aiayn's own, which a trace (aiayn.decoding.beam_trace) replays step by step."""

    name: str
    attention_maps: bool = True
    sampling: bool = True
    length_penalty_forms: tuple[str, ...] = LP_FORMS
    late_stopping: bool = True
    target_prefix: bool = True
    constraints: bool = True
    devices: tuple[str, ...] = ("cpu", "cuda", "mps")
    ensembles: bool = False
    compiles: bool = False
    maps_in_workers: bool = False
    traces: bool = True


@dataclass(frozen=True, kw_only=True)
class Batching:
    """How a call's sentences are cut into batches: at most batch_size sentences, and with max_tokens at most
    that many source tokens (padding included)."""

    batch_size: int
    max_tokens: int | None = None


@dataclass(frozen=True, kw_only=True)
class SampleParams:
    """What sampling needs besides the model and the sources (the Translator fills it from DecodeOptions)."""

    options: SamplingOptions
    bos_id: int
    eos_id: int
    pad_id: int
    max_len_a: float
    max_len_b: int
    max_output_len: int
    deadline: float | None = None


class Engine(Protocol):
    capabilities: Capabilities
    parallel_batches: int  # batches of plain beam searches decoded at once

    def search(self, sources: list[list[int]], params: SearchParams, prefixes: list[list[int]],
               batching: Batching, constraints: list[list[list[int]]] | None = None) -> list[list[Hypothesis]]:
        """Beam search: per sentence its params.n_best Hypotheses, best first, in input order. constraints:
        per sentence its phrases' target ids ([] for none), only where capabilities.constraints."""

    def sample(self, sources: list[list[int]], params: SampleParams, batching: Batching) -> list[list[Hypothesis]]:
        """One sampled Hypothesis per sentence (score: summed log-probs), in input order."""

    def score(self, sources: list[list[int]], targets: list[list[int]], *, bos_id: int, pad_id: int,
              batching: Batching) -> list[list[float]]:
        """Teacher forcing (aiayn.decoding.scoring): per pair the log-prob of each target token (</s> included)."""

    def close(self) -> None:
        """Frees what the engine holds (worker processes); it decodes no more."""


class NativeEngine:
    """aiayn's searches on the model, in this process."""

    capabilities = Capabilities(name="native", ensembles=True, compiles=True)
    parallel_batches = 1

    def __init__(self, *, model, device):
        self.model, self.device = model, torch.device(device)

    def search(self, sources, params, prefixes, batching, constraints=None):
        return search_in_batches(sources, lambda b: self.search_batch(sources, params, prefixes, b, constraints),
                                 batching.batch_size, batching.max_tokens)

    def search_batch(self, sources, params: SearchParams, prefixes, indices: list[int],
                     constraints=None) -> list[list[Hypothesis]]:
        """One batch's beam search (sources[indices]) in this process -> per sentence its n-best Hypotheses."""
        src = pad_batch([sources[i] for i in indices], params.pad_id, self.device)
        with torch.inference_mode():
            return beam_search(self.model, src, params, [prefixes[i] for i in indices],
                               constraints=None if constraints is None else [constraints[i] for i in indices])

    def score(self, sources, targets, *, bos_id: int, pad_id: int, batching) -> list[list[float]]:
        """Teacher-forced log-probs on the model, in this process (every native engine: workers and the compiled
        step serve searches only)."""
        return native_token_log_probs(self.model, sources, targets, bos_id=bos_id, pad_id=pad_id, device=self.device,
                                      batch_size=batching.batch_size, max_tokens=batching.max_tokens)

    def sample(self, sources, params: SampleParams, batching):
        """Batches of sources as beam search gets them, one sample each, drawn from one generator in batch
        order (reproducible with options.seed; torch's global RNG is left alone)."""
        sampling = params.options
        generator = torch.Generator(device=self.device)
        if sampling.seed is None:
            generator.seed()
        else:
            generator.manual_seed(sampling.seed)

        def sample_batch(indices: list[int]) -> list[list[Hypothesis]]:
            src = pad_batch([sources[i] for i in indices], params.pad_id, self.device)
            with torch.inference_mode():
                hyps, scores = sample_decode(self.model, src, params.bos_id, params.eos_id, params.pad_id,
                                             sampling.temperature, sampling.top_k, sampling.top_p, params.max_len_a,
                                             params.max_len_b, generator, params.max_output_len, params.deadline)
            return [[Hypothesis(h, float(s), float(s))] for h, s in zip(hyps, scores)]

        return search_in_batches(sources, sample_batch, batching.batch_size)

    def close(self) -> None:
        pass


class CompiledEngine(NativeEngine):
    """The native engine whose beam searches without attention maps take the compiled encoder and step
    (a CompiledDecoder of the same model); searches with maps and sampling run the model itself."""

    capabilities = Capabilities(name="native", devices=("cpu",), compiles=True)

    def __init__(self, *, model, compiled):
        super().__init__(model=model, device="cpu")
        self.compiled = compiled

    def search_batch(self, sources, params, prefixes, indices, constraints=None):
        if params.return_attention:
            return super().search_batch(sources, params, prefixes, indices, constraints)
        src = pad_batch([sources[i] for i in indices], params.pad_id, self.device)
        with torch.inference_mode():  # with constraints every step is the compiled decode_step, not its candidates
            return beam_search(self.compiled, src, params, [prefixes[i] for i in indices],
                               step_candidates=self.compiled.step_candidates,
                               constraints=None if constraints is None else [constraints[i] for i in indices])


class PoolEngine(NativeEngine):
    """The native engine whose beam searches without attention maps run in worker processes, one batch per
    worker (a WorkerPool); searches with maps and sampling run in this process, on the model."""

    capabilities = Capabilities(name="native", devices=("cpu",), compiles=True)

    def __init__(self, *, model, pool):
        super().__init__(model=model, device="cpu")
        self.pool = pool

    @property
    def parallel_batches(self) -> int:
        return self.pool.workers if self.pool is not None else 1

    def search(self, sources, params, prefixes, batching, constraints=None):
        # maps come from this process's model; closed: here; constrained searches too (the workers take none)
        if params.return_attention or self.pool is None or constraints is not None:
            return super().search(sources, params, prefixes, batching, constraints)
        batches = length_sorted_batches([len(s) for s in sources], batching.batch_size, batching.max_tokens)
        found = self.pool.search([[sources[i] for i in b] for b in batches], params,
                                 [[prefixes[i] for i in b] for b in batches])
        return in_input_order(batches, found, len(sources))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
            self.pool = None
