"""A compiled decoding step for the Transformer: `Translator.from_pretrained(..., compile=True)`,
`aiayn translate/evaluate/serve --compile`. Opt-in, CPU, every compute type, beam search without attention maps.

Why: with beam 4 at batch 1 a decoding step multiplies 4 rows by every weight of the decoder, about 140
small torch operations, each paying Python's and torch's dispatch cost (2-10 us), and MKL's products of 4
rows are slow on this CPU ((4, 128) x (128, 512): 14 us). The step is compiled ahead of time with
AOTInductor (torch.export, then inductor): generated C++ kernels, the weights frozen in, GEMM micro-kernels
made for these shapes by max-autotune, and no Python between the kernels nor guards before them (dynamo's
guards and wrapper took ~0.3 ms of a 1.2 ms step with torch.compile). Measured on the 12-minute Multi30k
model, 4 rows: 1.63 ms a step eager, ~0.45 ms compiled (BENCHMARKS.md, decoding speed).

The encoder is compiled too, with every layer's cross-attention K/V, for small batches (1.5 ms eager for
a sentence, 0.7 ms compiled; MAX_ENCODE_TOKENS), and so is beam search's candidate search
(step_candidates: 0.15 ms a step eagerly, mostly per-operation costs). The costs, why it is not the
default: the first run of a model compiles for about a minute and a half (then it is kept:
aiayn/decoding/compiled_cache.py), it needs a C++ compiler, and the numbers differ from the eager ones in
the last bits (another summation order), so where two hypotheses nearly tie a beam output can differ.

Layout: the self-attention K and V of every layer in two tensors (C, L, R0, H, d_head), C the capacity in
positions (grown by CAPACITY_STEP when full), R0 slots; the step reads the first t + 1 positions, a
contiguous view. The step for rows r = 0..R-1 writes position t of slot r; a table of ancestors (R, t) says
in which slot each earlier position of a row's history is. When beam search reorders rows, only that table
is reordered, never the caches (copying them took more than the rest of the step). The cross-attention K/V
(L, B', H, S, d_head) and the source mask as an additive bias (B', S) are kept per sentence and selected
only when sentences leave the batch. The step is compiled twice: for few rows with inductor's own C++ GEMMs
(tuned for them), for many rows with ATen's (oneDNN/MKL: faster there); SMALL_ROWS divides them. The int8
step on a CPU with VNNI is compiled once, for every size (ONE_STEP).
"""

import contextlib
import functools
import math
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch
import torch._inductor.config
import torch.fx.experimental._config
from torch.export import Dim
from torch.nn import functional as F

from aiayn.cpu import compute_type_of
from aiayn.cpu.compute_types import traced_products
from aiayn.cpu.linear import PackedLinear, traced_forms
from aiayn.decoding.compiled_cache import cached, fingerprint
from aiayn.decoding.compiled_step import TracedEncoder, TracedStep, example_inputs
from aiayn.errors import AiaynError

CAPACITY_STEP = 32  # positions added to the self-attention cache when it is full
SMALL_ROWS = 64  # steps of up to this many rows take the step compiled for few rows (see INDUCTOR_CONFIG);
# 32, 64 and 128 decoded batch 64 alike (164.6-171.4 sentences/s, one thread, two runs each)
# int8 on a CPU without VNNI: up to 16 rows (batch 4 at beam 4), where products stream their weights and int8
# weights by bfloat16 inputs win (aiayn.cpu.compute_types.traced_products); from there oneDNN's int8 x int8
INT8_SMALL_ROWS = 16
# larger sources (B x S tokens, padding included) are encoded eagerly: the compiled encoder took 0.68 against
# 1.51 ms for 1 x 15 tokens, 1.92 against 2.33 for 2 x 20, but 3.88 against 3.31 for 4 x 20 and twice the
# eager time from 8 x 32 to 64 x 32 (its products tuned to the small example it was exported with)
MAX_ENCODE_TOKENS = 48


@dataclass
class CompiledState:
    """What the compiled step carries. self_k/self_v (C, L, R0, H, d_head): slot r of position t holds the
    keys/values of the row that was r at step t; the step writes [t, :, :R] in place; positions from t on
    are not yet written (uninitialized memory, never read). ancestors (R_prev, t + 1): for each row of the
    previous step, the slot of each of its positions (its history's path through the beams) and a last column
    for this step's (set by the step); rows (R,):
    which of those rows the next step continues (a pending select). cross_k/cross_v (L, B', H, S, d_head) and
    src_bias (B', S) per sentence; step: tokens decoded so far."""

    self_k: torch.Tensor
    self_v: torch.Tensor
    ancestors: torch.Tensor
    rows: torch.Tensor
    cross_k: torch.Tensor
    cross_v: torch.Tensor
    src_bias: torch.Tensor
    step: int

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> "CompiledState":
        """As TransformerState.select: rows index the current rows, sentences the current sentences. The
        caches are not copied: a row's slots are found through its ancestors."""
        pick = (lambda t, dim: t) if sentences is None else (lambda t, dim: t.index_select(dim, sentences))
        return CompiledState(self.self_k, self.self_v, self.ancestors, self.rows.index_select(0, rows),
                             pick(self.cross_k, 1), pick(self.cross_v, 1), pick(self.src_bias, 0), self.step)


# Shapes while exporting: without duck sizing and with size-oblivious sizes, the row count is not tied to
# other sizes that happen to be equal (4 rows, 4 heads, 4 layers) nor specialized at 1.
EXPORT_CONFIG = dict(backed_size_oblivious=True, use_duck_shape=False)
# Inductor: the weights frozen (constants: the products get packed weights and max-autotune's C++ GEMM
# micro-kernels, made for these shapes), no autotuning reports on stderr. The step for few rows takes only
# the C++ GEMMs: with ATen's as a choice, the output layer's (4, D) x (D, V) product took oneDNN's, 374 us a
# step against 185 us. The step for many rows takes only ATen's: the C++ GEMMs, tuned at 256 rows, made a
# 256-row step of the 3.1M-parameter model 35 ms against 27 ms (eager: 23 ms, before the caches were read
# only up to position t).
INDUCTOR_CONFIG = dict(freezing=True, max_autotune=True, autotune_num_choices_displayed=0,
                       max_autotune_report_choices_stats=False)
GEMMS = {"small": "CPP", "large": "ATEN"}
# products whose step for few rows serves every size: inductor's VNNI GEMM was as fast as oneDNN's int8 at
# many rows too (1 thread, EPYC-F: Multi30k model at batch 64, 577 / 559 / 611 against 557 / 548 / 560
# sentences/s; paper-base at batch 16, 40.9 / 41.4 / 40.5 against 38.3 / 40.2 / 39.9), so the step for many
# rows is not compiled (a third less compiling)
ONE_STEP = ("int8_uint8",)


def _gemms(products: str, kind: str) -> str:
    """Whose GEMMs a step of these products (aiayn.cpu.compute_types.traced_products) takes: GEMMS for
    float32, and inductor's C++ template for the int8 products of the step for few rows (its VNNI GEMM, or
    int8 weights by bfloat16 inputs). The other low-precision products take ATen's (oneDNN's bfloat16 and
    int8 x int8): without AMX inductor's bfloat16 GEMM multiplies in float32."""
    return GEMMS[kind] if products in ("float32", "int8_bfloat16", "int8_uint8") else "ATEN"


def _make_room(state: "CompiledState", rows: int) -> None:
    """Room for position state.step and for `rows` slots, in place of the caches that lack it: CAPACITY_STEP
    more positions when full; more slots when a search has more rows than before (after its first step,
    beam K > 2). The new room is left unwritten: the step reads a position only once it was written."""
    capacity, slots = state.self_k.size(0), state.self_k.size(2)
    if state.step < capacity and rows <= slots:
        return
    C = capacity + (CAPACITY_STEP if state.step >= capacity else 0)
    grown = []
    for cache in (state.self_k, state.self_v):
        room = cache.new_empty(C, cache.size(1), max(rows, slots), *cache.shape[3:])
        room[:state.step, :, :slots] = cache[:state.step]
        grown.append(room)
    state.self_k, state.self_v = grown


def compiler_present() -> bool:
    return any(shutil.which(c) for c in ("g++", "c++", "clang++"))


# torch.export of the encoder and steps for every size needs this torch: 2.11 guarded the encoder's batch
# size against 1 (seen on a GPU machine, 2026-11-26); 2.13 is the version tested (Makefile)
MIN_TORCH = "2.13"


def torch_supports_compile() -> bool:
    return torch.torch_version.TorchVersion(torch.__version__) >= MIN_TORCH


def check_compilable(model, device: torch.device) -> None:
    """Refuses what the compiled step does not cover, with what to do instead."""
    if not torch_supports_compile():
        raise AiaynError(f"--compile needs torch {MIN_TORCH} or newer (this is {torch.__version__}): upgrade "
                         f"torch, or decode without --compile")
    if device.type != "cpu":
        raise AiaynError(f"--compile makes a CPU decoding step; on {device} decode without it")
    if not model.multi_head:
        raise AiaynError("--compile covers the Transformer; an RNN model decodes without it")
    if next(model.parameters()).dtype != torch.float32:
        raise AiaynError("--compile covers float32 models; decode without it")
    if not compiler_present():
        raise AiaynError("--compile needs a C++ compiler (torch builds the decoder as C++): install one "
                         "(Debian/Ubuntu: apt-get install g++), or decode without --compile")


@dataclass
class Encoded:
    """What CompiledDecoder.encode gives init_state: every layer's cross-attention K/V and the source bias."""

    cross_k: torch.Tensor
    cross_v: torch.Tensor
    src_bias: torch.Tensor


def _direct(compiled):
    """The compiled module's run, called with the tensors as a list: its __call__ also parses the input and
    output specs at every call (75 us of a 0.45 ms step). Falls back to __call__ where torch has no loader."""
    run = getattr(getattr(compiled, "loader", None), "boxed_run", None)
    return compiled if run is None else (lambda *tensors: run(list(tensors)))


def _package(module, inputs, sizes, path: Path, gemms: str = "CPP") -> None:
    """module -> a package of its forward at `path`, compiled ahead of time (AOTInductor) for inputs of
    these sizes, its products by `gemms` (inductor's max_autotune_gemm_backends)."""
    try:
        with torch.no_grad(), torch.fx.experimental._config.patch(**EXPORT_CONFIG):
            program = torch.export.export(module.eval(), inputs, dynamic_shapes=sizes)
        # without grad: inductor's freezing passes (the weights' packing, the int8 patterns) run only then
        with torch.no_grad(), torch._inductor.config.patch(**INDUCTOR_CONFIG, max_autotune_gemm_backends=gemms):
            torch._inductor.aoti_compile_and_package(program, package_path=str(path))
    except Exception as err:  # torch.export's and inductor's many error types: say what to do
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise AiaynError(f"torch could not compile the decoder ({reason}); decode without --compile") from err


def _load(path: Path):
    return _direct(torch._inductor.aoti_load_package(str(path)))


# torch 2.13 warns about its own use of LeafSpec while it exports, loads and first runs a compiled package
# (unpickling its specs, also in worker processes): not the user's concern, and it printed two lines a package
warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*", category=FutureWarning)


class CompiledDecoder:
    """The decoding interface of a Transformer (encode, init_state, decode_step: aiayn/model/__init__.py)
    with a compiled decode_step, for beam search. Attention maps are not returned (decode eagerly for them).
    The steps are compiled ahead of time (AOTInductor: torch.export, then inductor) at the first warm_up() or
    decode_step: no guards are checked at run time, and one compiled step serves every size (the one for few
    rows up to small_rows, the other beyond; or one step for all, ONE_STEP)."""

    def __init__(self, model, small_rows: int | None = None):
        """small_rows: the most rows a step for few rows takes (None: SMALL_ROWS, INT8_SMALL_ROWS for int8);
        products of ONE_STEP have one step for every size, and small_rows is not used."""
        default = INT8_SMALL_ROWS if compute_type_of(model) == "int8" else SMALL_ROWS
        one_step = traced_products(compute_type_of(model), few_rows=True) in ONE_STEP
        self.kinds = ("small",) if one_step else tuple(GEMMS)  # the steps compiled
        self.model = model.eval()
        self.small_rows = math.inf if one_step else default if small_rows is None else small_rows
        self._steps = self._encode = None
        self._eager_encode = TracedEncoder(self.model)  # for sources over MAX_ENCODE_TOKENS (see there)

    def warm_up(self, beam: int = 4) -> None:
        """Compiles the steps and the encoder now (about a minute and a half), or loads them where kept (a few
        seconds), rather than in the first search. beam: kept for callers; the compiled steps serve every beam
        size."""
        self._compiled()

    def _compile(self):
        """({kind: step} for kind in self.kinds, the encoder), each compiled ahead of time, or loaded where kept
        (compiled_cache)."""
        # inductor's autotuning calls a deprecated torch API (torch 2.13): not the user's concern
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated", category=UserWarning)
        # and its int8 lowering copies a tensor with torch.tensor(tensor) (torch 2.13), warning about itself
        warnings.filterwarnings("ignore", message="To copy construct from a tensor", category=UserWarning)
        S = Dim("S", min=2, max=self.model.positional.table.size(0))  # sources longer are cut (translator.py)
        encode_inputs = (torch.full((3, 7), self.model.pad_id),), ({0: Dim("B", min=1, max=1 << 20), 1: S},)

        def build(directory: Path) -> None:
            for kind in self.kinds:
                step = TracedStep(self.model, few_rows=kind == "small")
                _package(step, *example_inputs(self.model, kind), directory / f"step_{kind}.pt2",
                         _gemms(step.products, kind))
            products = traced_products(compute_type_of(self.model), few_rows=True)  # MAX_ENCODE_TOKENS rows at most
            with self._encoder_forms(products):
                _package(TracedEncoder(self.model), *encode_inputs, directory / "encode.pt2", _gemms(products, "small"))

        *steps, encode = cached(fingerprint(self.model), [f"step_{kind}.pt2" for kind in self.kinds] + ["encode.pt2"],
                                build, _load)
        return dict(zip(self.kinds, steps)), encode

    @contextlib.contextmanager
    def _encoder_forms(self, products: str):
        """The encoder's weights and the decoder's cross-attention K/V weights in their traced low-precision
        form while the encoder is traced (aiayn.cpu.linear.traced_forms); float32: as they are."""
        if products == "float32":
            yield
            return
        encoder = [m for layer in self.model.encoder_layers for m in layer.modules() if isinstance(m, PackedLinear)]
        cross = [layer.cross_attn.in_proj for layer in self.model.decoder_layers]
        with traced_forms(encoder, products), traced_forms(cross, products, blocks=(1, 3)):
            yield

    def _compiled(self):
        if self._steps is None:
            self._steps, self._encode = self._compile()
        return self._steps, self._encode

    def encode(self, src: torch.Tensor, return_attention: bool = False) -> tuple[Encoded, None]:
        """src (B, S) -> (Encoded, None): the cross-attention K/V of every layer, for init_state; compiled
        for up to MAX_ENCODE_TOKENS tokens, eager beyond."""
        if return_attention:
            raise ValueError("the compiled decoder returns no attention maps: decode with the model itself")
        if src.size(1) == 1:  # sources of </s> alone: one padding position more (compiled for S >= 2)
            src = F.pad(src, (0, 1), value=self.model.pad_id)
        encode = self._compiled()[1] if src.numel() <= MAX_ENCODE_TOKENS else self._eager_encode
        # contiguous, as the step was compiled for: an AOTInductor module reads its inputs by the strides it
        # was compiled with and checks none, and the compiled encoder may hand back another layout (d_model 16,
        # 2 heads: K/V as (L, B, S, H, d) in memory), which the step then read as garbage
        return Encoded(*(x.contiguous() for x in encode(src))), None

    def init_state(self, memory: Encoded, src: torch.Tensor) -> CompiledState:
        """One row per sentence, nothing decoded yet; room for two rows per sentence (the first step's, see
        decode_step)."""
        B, (L, _, H, _, d) = src.size(0), memory.cross_k.shape
        self_k = memory.cross_k.new_empty(CAPACITY_STEP, L, 2 * B, H, d)
        return CompiledState(self_k, torch.empty_like(self_k), torch.zeros(B, 1, dtype=torch.long),
                             torch.arange(B), memory.cross_k, memory.cross_v, memory.src_bias, 0)

    def decode_step(self, tokens: torch.Tensor, state: CompiledState, return_attention: bool = False):
        """As Transformer.decode_step: (log_probs (R, V), state, None); the state's caches are written in
        place. A step of one row per sentence (a search's first, every step of beam 1) runs each row twice
        and keeps the first: the step is compiled for two rows or more per sentence (torch failed to compile
        it for one)."""
        if return_attention:
            raise ValueError("the compiled step returns no attention maps: decode with the model itself")
        (logits, log_norm), state, _ = self._step(tokens, state, None, 1, (self.model.pad_id, self.model.pad_id))
        return logits - log_norm, state, None

    def step_candidates(self, tokens: torch.Tensor, state: CompiledState, scores: torch.Tensor, n: int,
                        forbidden: tuple[int, int]):
        """decode_step, then beam.top_candidates(log_probs with the two forbidden tokens (pad, bos) at -inf,
        scores (B', G), n), found inside the compiled step (torch's topk over 4 x 10000 sums alone took 87 us
        eagerly) -> ((values, origin, token) each (B', n), state)."""
        _, state, candidates = self._step(tokens, state, scores, n, forbidden)
        return candidates, state

    def _step(self, tokens, state, scores, n, forbidden):
        """((logits (R, V), log_norm (R, 1)): the log-probs are their difference, state, candidates) from a
        compiled step. scores None: no candidates wanted (n = 1 from zero scores)."""
        R = tokens.size(0)
        scores = torch.zeros(R) if scores is None else scores.reshape(R)
        if R == state.src_bias.size(0):  # one row per sentence: see decode_step
            return self._step_twice(tokens, state, scores, n, forbidden)
        return self._compiled_step(tokens, state, state.rows, scores, n, forbidden)

    def _step_twice(self, tokens, state, scores, n, forbidden):
        twice = torch.stack([scores, torch.full_like(scores, float("-inf"))], 1).view(-1)  # copies never chosen
        (logits, log_norm), state, (values, origin, token) = self._compiled_step(
            tokens.repeat_interleave(2), state, state.rows.repeat_interleave(2), twice, n, forbidden)
        # the first of each pair: its position t is in slot 2r (slots 2r + 1 are never read); origin is 0
        first = torch.arange(0, 2 * tokens.size(0), 2)
        state.ancestors, state.rows = state.ancestors.index_select(0, first), _rows(tokens.size(0))
        return (logits.index_select(0, first), log_norm.index_select(0, first)), state, (values, origin, token)

    def _compiled_step(self, tokens, state, rows, scores, n, forbidden):
        R, t = tokens.size(0), state.step
        _make_room(state, R)
        step = self._compiled()[0]["small" if R <= self.small_rows else "large"]
        banned = _forbidden(self.model.generator.weight.size(0), *forbidden)
        logits, log_norm, ancestors, k, v, *candidates = step(
            tokens, _constant(t), rows, state.ancestors, state.self_k[:t + 1], state.self_v[:t + 1], state.cross_k,
            state.cross_v, state.src_bias, scores, banned, _sized(n))
        state.self_k[t, :, :R], state.self_v[t, :, :R] = k, v  # slot r of position t: row r of this step
        ancestors = ancestors.contiguous()  # the next step's input (see encode)
        return (logits, log_norm), CompiledState(state.self_k, state.self_v, ancestors, _rows(R), state.cross_k,
                                                 state.cross_v, state.src_bias, t + 1), candidates


# The small tensors a step takes, made once: a batch-1 step is ~0.3 ms, and making each anew cost 2-5 us. The
# compiled step only reads its inputs, and the search only selects from them (never writes).
@functools.lru_cache(maxsize=1024)
def _constant(*values: int) -> torch.Tensor:
    return torch.tensor(values)


@functools.lru_cache(maxsize=1024)
def _rows(count: int) -> torch.Tensor:
    return torch.arange(count)


@functools.lru_cache(maxsize=64)
def _forbidden(vocab_size: int, *tokens: int) -> torch.Tensor:
    """(V,): -inf at `tokens`, 0 elsewhere, what the step adds to the log-probs before it picks candidates."""
    row = torch.zeros(vocab_size)
    row[list(tokens)] = float("-inf")
    return row


@functools.lru_cache(maxsize=64)
def _sized(count: int) -> torch.Tensor:
    """A tensor whose size says how many candidates the step finds (its values are not read)."""
    return torch.zeros(count)
