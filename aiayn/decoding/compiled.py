"""A compiled decoding step for the Transformer: `Translator.from_pretrained(..., compile=True)`,
`aiayn translate/evaluate/serve --compile`. Opt-in, CPU, float32, beam search without attention maps.

Why: with beam 4 at batch 1 a decoding step multiplies 4 rows by every weight of the decoder, about 140
small torch operations, each paying Python's and torch's dispatch cost (2-10 us), and MKL's products of 4
rows are slow on this CPU ((4, 128) x (128, 512): 14 us). torch.compile (inductor) with the weights frozen
and max-autotune makes the step one call of generated C++ kernels, with GEMM micro-kernels made for these
shapes (7 us for that product). Measured on the 12-minute Multi30k model, 4 rows: 1.63 ms a step eager,
0.55-0.70 ms compiled (BENCHMARKS.md, issue 10, eighth session).

The costs, why it is not the default: compiling takes 30-45 s as the model loads (two graphs: one for
batches, one for a sentence alone), needs a C++ compiler, and is done again by every process (forked
workers share their parent's); and the numbers differ from the eager step in the last bits (another
summation order), so where two hypotheses nearly tie a beam output can differ (none did in 400 Multi30k
sentences).

Layout: the self-attention K and V of every layer in two tensors (L, R, H, C, d_head), C the capacity,
grown by CAPACITY_STEP positions when full; the step reads positions 0..t through a mask. Sizes are
symbolic (dynamic=True) and neither duck-shaped nor specialized at 1, so neither a new row count nor a
larger capacity recompiles. A pending row selection (beam search's reorder) is applied inside the next
step, as the eager cache does. The cross-attention K/V (L, B', H, S, d_head) and the source mask as an
additive bias (B', S) are kept per sentence and selected only when sentences leave the batch. Steps of
more than MAX_ROWS rows run eagerly (at 256 rows the generated attention kernels were slower than
torch's), and so do steps of one row per sentence (a search's first; beam 1); a search switches to the
compiled step when its rows become few enough, its state converted.
"""

import contextlib
import math
import shutil
import types
import warnings
from dataclasses import dataclass

import torch
import torch._inductor.exc
import torch.fx.experimental._config
from torch.nn import functional as F

from aiayn.decoding.translate_batch import position_table
from aiayn.errors import AiaynError
from aiayn.model.state import TransformerState

CAPACITY_STEP = 32  # positions added to the self-attention cache when it is full
MAX_ROWS = 64  # larger steps run eagerly: at 256 rows torch's own kernels were faster (see above)


@dataclass
class CompiledState:
    """What the compiled step carries. self_k/self_v (L, R_prev, H, C, d_head): rows of the previous step;
    rows (R,): which of them the next step continues (a pending select); cross_k/cross_v (L, B', H, S,
    d_head) and src_bias (B', S) per sentence; step: tokens decoded so far."""

    self_k: torch.Tensor
    self_v: torch.Tensor
    rows: torch.Tensor
    cross_k: torch.Tensor
    cross_v: torch.Tensor
    src_bias: torch.Tensor
    step: int

    def select(self, rows: torch.Tensor, sentences: torch.Tensor | None = None) -> "CompiledState":
        """As TransformerState.select: rows index the current rows, sentences the current sentences."""
        pick = (lambda t, dim: t) if sentences is None else (lambda t, dim: t.index_select(dim, sentences))
        return CompiledState(self.self_k, self.self_v, self.rows.index_select(0, rows), pick(self.cross_k, 1),
                             pick(self.cross_v, 1), pick(self.src_bias, 0), self.step)


# Configuration around every step: dynamo and inductor read it when a call must compile, inside the call.
# Inductor: the weights frozen (constants: the products get packed weights and max-autotune's C++ GEMM
# micro-kernels), no autotuning reports on stderr. torch.compile(options=...) and a backend that patched
# the config itself both left the weights unfrozen here (no gain over eager), so it is set around the call.
# Shapes: without duck sizing and with size-oblivious sizes, the row count is not tied to other sizes that
# happen to be equal (4 rows, 4 heads, 4 layers) nor specialized at 1, so fewer graphs compile.
STEP_CONFIG = {
    torch._inductor.config: dict(freezing=True, max_autotune=True, max_autotune_gemm_backends="CPP,ATEN",
                                 autotune_num_choices_displayed=0, max_autotune_report_choices_stats=False),
    torch.fx.experimental._config: dict(backed_size_oblivious=True, use_duck_shape=False),
}


@contextlib.contextmanager
def _step_config():
    """STEP_CONFIG set directly and restored: config.patch() for both took 53 us of a ~0.7 ms step."""
    saved = {config: {name: getattr(config, name) for name in values} for config, values in STEP_CONFIG.items()}
    for config, values in STEP_CONFIG.items():
        for name, value in values.items():
            setattr(config, name, value)
    try:
        yield
    finally:
        for config, values in saved.items():
            for name, value in values.items():
                setattr(config, name, value)


def _to_compiled(state: TransformerState, rows: int) -> CompiledState:
    """The eager state (aiayn/model/state.py) for a step of `rows` rows -> the compiled step's layout, with
    its pending row selection applied and room for at least one more position."""
    caches = state.layers
    cross_k, cross_v = torch.stack([c.cross_k for c in caches]), torch.stack([c.cross_v for c in caches])
    L, _, H, _, d = cross_k.shape
    t = state.step
    self_k = cross_k.new_zeros(L, rows, H, (t // CAPACITY_STEP + 1) * CAPACITY_STEP, d)
    self_v = torch.zeros_like(self_k)
    kv = torch.stack([c.self_kv if c.pending_rows is None else c.self_kv.index_select(0, c.pending_rows)
                      for c in caches])  # (L, R, 2, H, t, d_head): the positions the eager steps cached
    self_k[:, :, :, :t], self_v[:, :, :, :t] = kv[:, :, 0], kv[:, :, 1]
    src_bias = torch.zeros(state.src_mask.shape).masked_fill(~state.src_mask, float("-inf"))[:, 0, 0]  # (B', S)
    return CompiledState(self_k, self_v, torch.arange(rows), cross_k, cross_v, src_bias, t)


def compiler_present() -> bool:
    return any(shutil.which(c) for c in ("g++", "c++", "clang++"))


def check_compilable(model, device: torch.device) -> None:
    """Refuses what the compiled step does not cover, with what to do instead."""
    if device.type != "cpu":
        raise AiaynError(f"--compile makes a CPU decoding step; on {device} decode without it")
    if not hasattr(model, "decoder_layers"):
        raise AiaynError("--compile covers the Transformer; an RNN model decodes without it")
    if next(model.parameters()).dtype != torch.float32:
        raise AiaynError("--compile covers float32 models; decode without it")
    if not compiler_present():
        raise AiaynError("--compile needs a C++ compiler (torch.compile builds the step as C++): install one "
                         "(Debian/Ubuntu: apt-get install g++), or decode without --compile")


class CompiledDecoder:
    """The decoding interface of a Transformer (encode, init_state, decode_step: aiayn/model/__init__.py)
    with a compiled decode_step, for beam search. Attention maps are not returned (decode eagerly for them)."""

    def __init__(self, model, max_rows: int = MAX_ROWS):
        self.model, self.max_rows = model.eval(), max_rows
        # inductor's autotuning calls a deprecated torch API (torch 2.13): not the user's concern
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated", category=UserWarning)
        self._positions = position_table(model)  # (max_len, D)
        # The model's weights do not change while it decodes: no guards on them (each call checked ~100
        # tensors, 117 us of a 0.8 ms step), and inductor freezes them (below).
        options = {"guard_filter_fn": torch.compiler.skip_guard_on_all_nn_modules_unsafe}
        # Dynamo keeps compiled graphs on the function's code object: each decoder compiles a copy of its own,
        # so that, the weights' guards skipped, no graph of another decoder (another model) can ever match.
        step = types.FunctionType(CompiledDecoder._step_fn.__code__.replace(), globals(), "compiled_step")
        self._step = torch.compile(types.MethodType(step, self), fullgraph=True, dynamic=True, options=options)

    def warm_up(self, beam: int = 4) -> None:
        """Compiles, before the first real search, the two graphs that beam searches meet: several sentences,
        then one sentence (torch specializes a batch of one). Any token ids do: the graphs depend on shapes
        only. Searches with another beam size reuse them (the row count is symbolic); beam 1 runs eagerly."""
        from aiayn.decoding.beam import SearchParams, beam_search

        pad = self.model.pad_id
        ids = [i for i in range(self.model.generator.weight.size(0)) if i != pad][:8]
        params = SearchParams(bos_id=ids[0], eos_id=ids[1], pad_id=pad, beam=beam, max_len_a=0.0, max_len_b=4,
                              min_length=3)
        with torch.inference_mode():
            for batch in ([ids[2:], ids[2:5] + [pad] * (len(ids) - 5)], [ids[2:]]):
                beam_search(self, torch.tensor(batch), params)

    def encode(self, src: torch.Tensor, return_attention: bool = False):
        return self.model.encode(src, return_attention)

    def init_state(self, memory: torch.Tensor, src: torch.Tensor) -> TransformerState:
        return self.model.init_state(memory, src)

    def decode_step(self, tokens: torch.Tensor, state, return_attention: bool = False):
        """As Transformer.decode_step: (log_probs (R, V), state, None). Steps of one row per sentence (a
        search's first, and every step of beam 1: with G = 1 torch 2.13 failed to compile the step, "Dimension
        out of range") and steps of more than max_rows rows run eagerly on the model's own state; the first
        later step with at most max_rows rows converts it (after its first step a search's rows only shrink)."""
        if return_attention:
            raise ValueError("the compiled step returns no attention maps: decode with the model itself")
        if isinstance(state, TransformerState):
            rows, sentences = tokens.size(0), state.src_mask.size(0)
            if rows == sentences or rows > self.max_rows:  # one row per sentence (step 0, beam 1): see above
                return self.model.decode_step(tokens, state)
            state = _to_compiled(state, tokens.size(0))
        if state.step >= state.self_k.size(3):  # full: room for CAPACITY_STEP more positions
            state.self_k, state.self_v = (F.pad(t, (0, 0, 0, CAPACITY_STEP)) for t in (state.self_k, state.self_v))
        for cache in (state.self_k, state.self_v):  # else torch fixes the capacity first seen (recompiled at 64)
            torch._dynamo.mark_dynamic(cache, 3)
        with _step_config():
            try:
                log_probs, self_k, self_v = self._step(tokens, torch.tensor([state.step]), state.rows, state.self_k,
                                                       state.self_v, state.cross_k, state.cross_v, state.src_bias)
            except (torch._dynamo.exc.TorchDynamoException, torch._inductor.exc.InductorError) as err:
                reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise AiaynError(f"torch.compile failed on a decoding step of {tokens.size(0)} rows ({reason}); "
                                 f"decode without --compile") from err
        return log_probs, CompiledState(self_k, self_v, torch.arange(tokens.size(0)), state.cross_k, state.cross_v,
                                        state.src_bias, state.step + 1), None

    def _step_fn(self, tokens, position, rows, self_k, self_v, cross_k, cross_v, src_bias):
        """The compiled step. tokens (R,), position (1,) = t, rows (R,) of self_k/self_v (L, R_prev, H, C,
        d_head) -> (log_probs (R, V), self_k and self_v (L, R, H, C, d_head) with position t written).
        The sublayers of DecoderLayer.step with the weights read directly (inductor freezes them)."""
        m = self.model
        R, B, C = tokens.size(0), cross_k.size(1), self_k.size(3)
        x = m.tgt_embed(tokens) + self._positions.index_select(0, position)[0]  # (R, D), §3.4 + §3.5
        self_k, self_v = self_k.index_select(1, rows), self_v.index_select(1, rows)
        later = torch.where(torch.arange(C) <= position, 0.0, float("-inf"))  # (C,): positions not decoded yet
        new_k, new_v = [], []
        for i, layer in enumerate(m.decoder_layers):
            attn, H = layer.self_attn, layer.self_attn.n_heads
            d = attn.d_head
            qkv = F.linear(layer.sublayer_input(x, layer.self_attn_norm), attn.in_proj.weight,
                           attn.in_proj.bias).view(R, 3, H, d)
            k = self_k[i].index_copy(2, position, qkv[:, 1, :, None])  # (R, H, C, d)
            v = self_v[i].index_copy(2, position, qkv[:, 2, :, None])
            new_k.append(k)
            new_v.append(v)
            scores = (qkv[:, 0, :, None] @ k.transpose(-1, -2)) / math.sqrt(d) + later  # (R, H, 1, C)
            heads = torch.softmax(scores, dim=-1) @ v  # (R, H, 1, d)
            out = F.linear(heads.reshape(R, H * d), attn.out_proj.weight, attn.out_proj.bias)
            x = layer.sublayer_output(x, out, layer.self_attn_norm)
            cross, D = layer.cross_attn, H * d
            q = F.linear(layer.sublayer_input(x, layer.cross_attn_norm), cross.in_proj.weight[:D],
                         cross.in_proj.bias[:D]).view(B, R // B, H, d).transpose(1, 2)  # (B', H, G, d)
            heads = F.scaled_dot_product_attention(q, cross_k[i], cross_v[i], attn_mask=src_bias[:, None, None])
            heads = heads.transpose(1, 2).reshape(R, D)  # (B', H, G, d) -> (R, D)
            out = F.linear(heads, cross.out_proj.weight, cross.out_proj.bias)
            x = layer.sublayer_output(x, out, layer.cross_attn_norm)
            ffn = layer.ffn
            hidden = ffn.activation(F.linear(layer.sublayer_input(x, layer.ffn_norm), ffn.w_1.weight, ffn.w_1.bias))
            x = layer.sublayer_output(x, F.linear(hidden, ffn.w_2.weight, ffn.w_2.bias), layer.ffn_norm)
        logits = F.linear(m.decoder_norm(x), m.generator.weight, m.generator.bias)  # (R, V)
        return torch.log_softmax(logits.float(), dim=-1), torch.stack(new_k), torch.stack(new_v)

