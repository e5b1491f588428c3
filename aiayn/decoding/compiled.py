"""A compiled decoding step for the Transformer: `Translator.from_pretrained(..., compile=True)`,
`aiayn translate/evaluate/serve --compile`. Opt-in, CPU, float32, beam search without attention maps.

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
(tuned for them), for many rows with ATen's (oneDNN/MKL: faster there); SMALL_ROWS divides them.
"""

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
from aiayn.cpu.compute_types import int8_project, int8_weight
from aiayn.decoding.beam import top_candidates
from aiayn.decoding.compiled_cache import cached, fingerprint
from aiayn.errors import AiaynError

CAPACITY_STEP = 32  # positions added to the self-attention cache when it is full
SMALL_ROWS = 64  # steps of up to this many rows take the step compiled for few rows (see INDUCTOR_CONFIG);
# 32, 64 and 128 decoded batch 64 alike (164.6-171.4 sentences/s, one thread, two runs each)
# larger sources (B x S tokens, padding included) are encoded eagerly: the compiled encoder took 0.68 against
# 1.51 ms for 1 x 15 tokens, 1.92 against 2.33 for 2 x 20, but 3.88 against 3.31 for 4 x 20 and twice the
# eager time from 8 x 32 to 64 x 32 (its products tuned to the small example it was exported with)
MAX_ENCODE_TOKENS = 48


@dataclass
class CompiledState:
    """What the compiled step carries. self_k/self_v (C, L, R0, H, d_head): slot r of position t holds the
    keys/values of the row that was r at step t; the step writes [t, :, :R] in place; positions from t on
    are not yet written (uninitialized memory, never read). ancestors (R_prev, t): for each row of the
    previous step, the slot of each of its positions (its history's path through the beams); rows (R,):
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


class _Step(torch.nn.Module):
    """The decoding step as a module, for torch.export: the model's weights are its parameters (inductor
    freezes them into the compiled step)."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.compute_type = compute_type_of(model)
        self.register_buffer("positions", model.positional.table.detach().clone(), persistent=False)  # (max_len, D)
        if self.compute_type != "float32":  # the weights in their low-precision form, made once: constants
            for name, weight in _step_weights(model).items():  # inductor freezes, never converted at a step
                if self.compute_type == "bfloat16":
                    self.register_buffer(f"w_{name}", weight.detach().to(torch.bfloat16), persistent=False)
                else:
                    quantized_t, scale = int8_weight(weight)
                    self.register_buffer(f"q_{name}", quantized_t, persistent=False)
                    self.register_buffer(f"s_{name}", scale, persistent=False)

    def linear(self, x, name: str, weight, bias):
        """x W^T + b in the step's compute type (aiayn.cpu.compute_types); name: the weight's in _step_weights."""
        if self.compute_type == "float32":
            return F.linear(x, weight, bias)
        if self.compute_type == "bfloat16":
            bias = None if bias is None else bias.to(torch.bfloat16)
            return F.linear(x.to(torch.bfloat16), getattr(self, f"w_{name}"), bias).float()
        return int8_project(x, (getattr(self, f"q_{name}"), getattr(self, f"s_{name}")), bias)

    def forward(self, tokens, position, rows, ancestors, self_k, self_v, cross_k, cross_v, src_bias, hyp_scores,
                forbidden, n_like):
        """tokens (R,), position (1,) = t, rows (R,) of ancestors (R_prev, t + 1) (its column t is set here);
        self_k/self_v (t + 1, L, R0, H, d_head) with positions 0..t-1 (position t's slots are not read);
        cross_k/cross_v (L, B', H, S, d_head), src_bias (B', S) -> (log_probs (R, V), ancestors (R, t + 1),
        keys and values of position t (L, R, H, d_head), for the caller to cache, and beam search's
        n = n_like.size(0) candidates per sentence (values, origin row, token (B', n)) from the hypotheses'
        scores hyp_scores (R,) and the log-probs with the `forbidden` tokens (pad, bos) at -inf).
        The sublayers of DecoderLayer.step with the weights read directly; self-attention reads position c of
        row r from slot ancestors[r, c] (no cache is copied when beams are reordered: only the table)."""
        m = self.model
        R, B, C = tokens.size(0), cross_k.size(1), self_k.size(0)
        x = m.tgt_embed(tokens) + self.positions.index_select(0, position)[0]  # (R, D), §3.4 + §3.5
        ancestors = ancestors.index_select(0, rows).index_copy(1, position, torch.arange(R)[:, None])  # (R, t + 1)
        steps = torch.arange(C)
        now = (steps == position)[None, :, None, None]  # (1, t + 1, 1, 1)
        new_k, new_v = [], []
        for i, layer in enumerate(m.decoder_layers):
            attn, H = layer.self_attn, layer.self_attn.n_heads
            d = attn.d_head
            qkv = self.linear(layer.sublayer_input(x, layer.self_attn_norm), f"{i}_self_in", attn.in_proj.weight,
                              attn.in_proj.bias).view(R, 3, H, d)
            new_k.append(qkv[:, 1])
            new_v.append(qkv[:, 2])
            # (R, t + 1, H, d): each row's own past, and position t from this step (the caller writes it to the cache:
            # written here, the caches were copied whole)
            k = torch.where(now, qkv[:, None, 1], self_k[:, i][steps, ancestors])
            v = torch.where(now, qkv[:, None, 2], self_v[:, i][steps, ancestors])
            scores = (qkv[:, None, 0] * k).sum(-1) / math.sqrt(d)  # (R, t + 1, H)
            heads = (torch.softmax(scores, dim=1)[..., None] * v).sum(1)  # (R, H, d)
            out = self.linear(heads.reshape(R, H * d), f"{i}_self_out", attn.out_proj.weight, attn.out_proj.bias)
            x = layer.sublayer_output(x, out, layer.self_attn_norm)
            cross, D = layer.cross_attn, H * d
            q = self.linear(layer.sublayer_input(x, layer.cross_attn_norm), f"{i}_cross_q", cross.in_proj.weight[:D],
                            cross.in_proj.bias[:D]).view(B, R // B, H, d).transpose(1, 2)  # (B', H, G, d)
            # products as sums of element-wise products: inductor fuses them into its own C++ loops (there is no
            # C++ GEMM of its for batched products, and ATen's were slower: see INDUCTOR_CONFIG)
            scores = (q[:, :, :, None] * cross_k[i][:, :, None]).sum(-1) / math.sqrt(d) + src_bias[:, None, None]
            weights = torch.softmax(scores, dim=-1)  # (B', H, G, S)
            heads = (weights[..., None] * cross_v[i][:, :, None]).sum(-2).transpose(1, 2).reshape(R, D)  # (R, D)
            out = self.linear(heads, f"{i}_cross_out", cross.out_proj.weight, cross.out_proj.bias)
            x = layer.sublayer_output(x, out, layer.cross_attn_norm)
            ffn = layer.ffn
            hidden = ffn.activation(self.linear(layer.sublayer_input(x, layer.ffn_norm), f"{i}_ffn_1", ffn.w_1.weight,
                                                ffn.w_1.bias))
            out = self.linear(hidden, f"{i}_ffn_2", ffn.w_2.weight, ffn.w_2.bias)
            x = layer.sublayer_output(x, out, layer.ffn_norm)
        logits = self.linear(m.decoder_norm(x), "generator", m.generator.weight, m.generator.bias)  # (R, V)
        log_probs = torch.log_softmax(logits.float(), dim=-1)
        # the forbidden tokens by comparison, not index_fill: inductor then vectorizes the fused loop over the
        # log-probs and the candidates' block maxima (a 256-row step: 3.3 ms with index_fill)
        token_ids = torch.arange(log_probs.size(1))
        banned = (token_ids == forbidden[0]) | (token_ids == forbidden[1])
        allowed = log_probs.masked_fill(banned, float("-inf")).view(B, R // B, -1)
        candidates = top_candidates(allowed, hyp_scores.view(B, R // B), n_like.size(0))
        return log_probs, ancestors, torch.stack(new_k), torch.stack(new_v), *candidates


def _step_weights(model) -> dict[str, torch.Tensor]:
    """Every weight the step multiplies by, by the name _Step.linear gives it."""
    weights = {"generator": model.generator.weight}
    for i, layer in enumerate(model.decoder_layers):
        D = layer.cross_attn.d_model
        weights.update({f"{i}_self_in": layer.self_attn.in_proj.weight,
                        f"{i}_self_out": layer.self_attn.out_proj.weight,
                        f"{i}_cross_q": layer.cross_attn.in_proj.weight[:D],
                        f"{i}_cross_out": layer.cross_attn.out_proj.weight,
                        f"{i}_ffn_1": layer.ffn.w_1.weight, f"{i}_ffn_2": layer.ffn.w_2.weight})
    return weights


class _Encode(torch.nn.Module):
    """The encoder and every decoder layer's cross-attention K/V as a module, for torch.export."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, src):
        """src (B, S) -> (cross_k, cross_v (L, B, H, S, d_head), src_bias (B, S): -inf at padding)."""
        memory, _ = self.model.encode(src)
        kv = [layer.cross_attn.project_kv(memory, memory) for layer in self.model.decoder_layers]
        src_bias = torch.where(src == self.model.pad_id, float("-inf"), 0.0)
        return torch.stack([k for k, _ in kv]), torch.stack([v for _, v in kv]), src_bias


@dataclass
class Encoded:
    """What CompiledDecoder.encode gives init_state: every layer's cross-attention K/V and the source bias."""

    cross_k: torch.Tensor
    cross_v: torch.Tensor
    src_bias: torch.Tensor


def _example(model, kind: str):
    """Inputs to export the step with, and which of their sizes vary: rows R (2 or more: see
    CompiledDecoder.decode_step), the previous step's rows, slots R0, sentences B', positions t + 1, source
    length S (2..: see CompiledDecoder.encode). The sizes are all different (none is tied to another), about
    those the step meets: inductor shapes its loops and GEMMs for them."""
    layer = model.decoder_layers[0].self_attn
    L, H, d = len(model.decoder_layers), layer.n_heads, layer.d_head
    B, R, R_prev, R0, C, S = (2, 6, 7, 8, 10, 5) if kind == "small" else (64, 256, 257, 258, 21, 20)
    size = lambda name, low=2: Dim(name, min=low, max=1 << 20)  # noqa: E731
    rows, before, slots, sentences, positions, length = (size("rows"), size("before"), size("slots"),
                                                         size("B", 1), size("C", 1), size("S"))
    inputs = (torch.full((R,), model.pad_id), torch.tensor([C - 1]), torch.arange(R),
              torch.zeros(R_prev, C, dtype=torch.long),
              torch.zeros(C, L, R0, H, d), torch.zeros(C, L, R0, H, d), torch.zeros(L, B, H, S, d),
              torch.zeros(L, B, H, S, d), torch.zeros(B, S), torch.zeros(R), torch.tensor([0, 1]),
              torch.zeros(9))
    sizes = ({0: rows}, None, {0: rows}, {0: before, 1: positions}, {0: positions, 2: slots},
             {0: positions, 2: slots}, {1: sentences, 3: length}, {1: sentences, 3: length},
             {0: sentences, 1: length}, {0: rows}, None, {0: Dim("n", min=1, max=1 << 20)})
    return inputs, sizes


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
        with torch._inductor.config.patch(**INDUCTOR_CONFIG, max_autotune_gemm_backends=gemms):
            torch._inductor.aoti_compile_and_package(program, package_path=str(path))
    except Exception as err:  # torch.export's and inductor's many error types: say what to do
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise AiaynError(f"torch could not compile the decoder ({reason}); decode without --compile") from err


def _load(path: Path):
    with warnings.catch_warnings():  # torch 2.13 unpickling its own specs: not the user's concern
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        return _direct(torch._inductor.aoti_load_package(str(path)))


class CompiledDecoder:
    """The decoding interface of a Transformer (encode, init_state, decode_step: aiayn/model/__init__.py)
    with a compiled decode_step, for beam search. Attention maps are not returned (decode eagerly for them).
    The steps are compiled ahead of time (AOTInductor: torch.export, then inductor) at the first warm_up() or
    decode_step: no guards are checked at run time, and one compiled step serves every size (the one for few
    rows up to small_rows, the other beyond)."""

    def __init__(self, model, small_rows: int = SMALL_ROWS):
        self.model, self.small_rows = model.eval(), small_rows
        self._steps = self._encode = None
        self._eager_encode = _Encode(self.model)  # for sources over MAX_ENCODE_TOKENS (see there)

    def warm_up(self, beam: int = 4) -> None:
        """Compiles the steps and the encoder now (about a minute and a half), or loads them where kept (a few
        seconds), rather than in the first search. beam: kept for callers; the compiled steps serve every beam
        size."""
        self._compiled()

    def _compile(self):
        """({"small": step, "large": step}, the encoder), each compiled ahead of time, or loaded where kept
        (compiled_cache)."""
        # inductor's autotuning calls a deprecated torch API (torch 2.13): not the user's concern
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated", category=UserWarning)
        S = Dim("S", min=2, max=self.model.positional.table.size(0))  # sources longer are cut (translator.py)
        encode_inputs = (torch.full((3, 7), self.model.pad_id),), ({0: Dim("B", min=1, max=1 << 20), 1: S},)

        # Low-precision products: ATen's (oneDNN's bfloat16, torch._int_mm), as inductor's C++ GEMMs have no
        # int8 x int8 form and without AMX their bfloat16 one multiplies in float32; and the encoder eager, on
        # its prepared weights (traced, it would convert every weight at every call).
        low_precision = compute_type_of(self.model) != "float32"
        names = ["step_small.pt2", "step_large.pt2"] + ([] if low_precision else ["encode.pt2"])

        def build(directory: Path) -> None:
            for kind, gemms in GEMMS.items():
                _package(_Step(self.model), *_example(self.model, kind), directory / f"step_{kind}.pt2",
                         "ATEN" if low_precision else gemms)
            if not low_precision:
                _package(_Encode(self.model), *encode_inputs, directory / "encode.pt2")

        small, large, *encode = cached(fingerprint(self.model), names, build, _load)
        return {"small": small, "large": large}, (encode[0] if encode else None)

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
        compiled_encode = self._compiled()[1]  # None in a low-precision compute type (see _compile)
        encode = compiled_encode if compiled_encode is not None and src.numel() <= MAX_ENCODE_TOKENS \
            else self._eager_encode
        return Encoded(*encode(src)), None

    def init_state(self, memory: Encoded, src: torch.Tensor) -> CompiledState:
        """One row per sentence, nothing decoded yet; room for two rows per sentence (the first step's, see
        decode_step)."""
        B, (L, _, H, _, d) = src.size(0), memory.cross_k.shape
        self_k = memory.cross_k.new_empty(CAPACITY_STEP, L, 2 * B, H, d)
        return CompiledState(self_k, torch.empty_like(self_k), torch.zeros(B, 0, dtype=torch.long),
                             torch.arange(B), memory.cross_k, memory.cross_v, memory.src_bias, 0)

    def decode_step(self, tokens: torch.Tensor, state: CompiledState, return_attention: bool = False):
        """As Transformer.decode_step: (log_probs (R, V), state, None); the state's caches are written in
        place. A step of one row per sentence (a search's first, every step of beam 1) runs each row twice
        and keeps the first: the step is compiled for two rows or more per sentence (torch failed to compile
        it for one)."""
        if return_attention:
            raise ValueError("the compiled step returns no attention maps: decode with the model itself")
        log_probs, state, _ = self._step(tokens, state, None, 1, (self.model.pad_id, self.model.pad_id))
        return log_probs, state, None

    def step_candidates(self, tokens: torch.Tensor, state: CompiledState, scores: torch.Tensor, n: int,
                        forbidden: tuple[int, int]):
        """decode_step, then beam.top_candidates(log_probs with the two forbidden tokens (pad, bos) at -inf,
        scores (B', G), n), found inside the compiled step (torch's topk over 4 x 10000 sums alone took 87 us
        eagerly) -> ((values, origin, token) each (B', n), state)."""
        _, state, candidates = self._step(tokens, state, scores, n, forbidden)
        return candidates, state

    def _step(self, tokens, state, scores, n, forbidden):
        """(log_probs, state, candidates) from a compiled step. scores None: no candidates wanted (n = 1 from
        zero scores)."""
        R = tokens.size(0)
        scores = torch.zeros(R) if scores is None else scores.reshape(R)
        if R == state.src_bias.size(0):  # one row per sentence: see decode_step
            return self._step_twice(tokens, state, scores, n, forbidden)
        return self._compiled_step(tokens, state, state.rows, scores, n, forbidden)

    def _step_twice(self, tokens, state, scores, n, forbidden):
        twice = torch.stack([scores, torch.full_like(scores, float("-inf"))], 1).view(-1)  # copies never chosen
        log_probs, state, (values, origin, token) = self._compiled_step(
            tokens.repeat_interleave(2), state, state.rows.repeat_interleave(2), twice, n, forbidden)
        # the first of each pair: its position t is in slot 2r (slots 2r + 1 are never read); origin is 0
        first = torch.arange(0, 2 * tokens.size(0), 2)
        state.ancestors, state.rows = state.ancestors.index_select(0, first), torch.arange(tokens.size(0))
        return log_probs.index_select(0, first), state, (values, origin, token)

    def _compiled_step(self, tokens, state, rows, scores, n, forbidden):
        R, t = tokens.size(0), state.step
        _make_room(state, R)
        step = self._compiled()[0]["small" if R <= self.small_rows else "large"]
        log_probs, ancestors, k, v, *candidates = step(
            tokens, torch.tensor([t]), rows, F.pad(state.ancestors, (0, 1)), state.self_k[:t + 1],
            state.self_v[:t + 1], state.cross_k, state.cross_v, state.src_bias, scores, torch.tensor(forbidden),
            torch.empty(n))
        state.self_k[t, :, :R], state.self_v[t, :, :R] = k, v  # slot r of position t: row r of this step
        return log_probs, CompiledState(state.self_k, state.self_v, ancestors, torch.arange(R), state.cross_k,
                                        state.cross_v, state.src_bias, t + 1), candidates
