"""The modules torch.export traces for the compiled decoder (aiayn.decoding.compiled): the decoding step,
the encoder with every layer's cross-attention K/V, and the example inputs the step is exported with. The
layout of the caches and why the step reads them through a table of ancestors: compiled.py."""

import math

import torch
from torch.export import Dim
from torch.nn import functional as F

from aiayn.cpu import compute_type_of
from aiayn.cpu.compute_types import traced_linear, traced_products, traced_weight
from aiayn.decoding.beam import top_candidates


class TracedStep(torch.nn.Module):
    """The decoding step as a module, for torch.export: the model's weights are its parameters (inductor
    freezes them into the compiled step)."""

    def __init__(self, model, *, few_rows: bool):
        """few_rows: the step made for few rows (see aiayn.cpu.compute_types.traced_products)."""
        super().__init__()
        self.model = model
        self.products = traced_products(compute_type_of(model), few_rows)
        self.register_buffer("positions", model.positional.table.detach().clone(), persistent=False)  # (max_len, D)
        self.parts = 0  # tensors of a weight's low-precision form
        if self.products != "float32":  # the weights in their low-precision form, made once: constants
            for name, weight in step_weights(model).items():  # inductor freezes, never converted at a step
                form = traced_weight(weight, self.products)
                for i, tensor in enumerate(form):
                    self.register_buffer(f"w_{name}_{i}", tensor, persistent=False)
                self.parts = len(form)

    def linear(self, x, name: str, weight, bias):
        """x W^T + b in the step's products (aiayn.cpu.compute_types); name: the weight's in step_weights."""
        if self.products == "float32":
            return F.linear(x, weight, bias)
        form = tuple(getattr(self, f"w_{name}_{i}") for i in range(self.parts))
        return traced_linear(x, form, bias, self.products)

    def forward(self, tokens, position, rows, ancestors, self_k, self_v, cross_k, cross_v, src_bias, hyp_scores,
                forbidden, n_like):
        """tokens (R,), position (1,) = t, rows (R,) of ancestors (R_prev, t + 1) (its column t is set here);
        self_k/self_v (t + 1, L, R0, H, d_head) with positions 0..t-1 (position t's slots are not read);
        cross_k/cross_v (L, B', H, S, d_head), src_bias (B', S) -> (logits (R, V) and log_norm (R, 1): the
        log-probs are logits - log_norm, ancestors (R, t + 2): a column for the next step's,
        keys and values of position t (L, R, H, d_head), for the caller to cache, and beam search's
        n = n_like.size(0) candidates per sentence (values, origin row, token (B', n)) from the hypotheses'
        scores hyp_scores (R,) and the log-probs plus `forbidden` (V,): -inf at the tokens no output may be (pad,
        bos), 0 elsewhere).
        The sublayers of DecoderLayer.step with the weights read directly; self-attention reads position c of
        row r from slot ancestors[r, c] (no cache is copied when beams are reordered: only the table)."""
        m = self.model
        R, B, C = tokens.size(0), cross_k.size(1), self_k.size(0)
        x = m.tgt_embed(tokens) + self.positions.index_select(0, position)[0]  # (R, D), §3.4 + §3.5
        ancestors = ancestors.index_select(0, rows).index_copy(1, position, torch.arange(R)[:, None])  # (R, t + 1)
        next_ancestors = F.pad(ancestors, (0, 1))  # (R, t + 2): a column for the next step's, set there
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
        logits = self.linear(m.decoder_norm(x), "generator", m.generator.weight, m.generator.bias).float()  # (R, V)
        # the log-probs are logits - log_norm; returned as those two, not as a third (R, V) tensor the search
        # never reads (it takes the candidates): at 256 rows x 10k words that was 10 MB written a step
        log_norm = torch.logsumexp(logits, dim=-1, keepdim=True)  # (R, 1)
        log_probs = logits - log_norm
        # the forbidden tokens as an additive (V,) row of 0 / -inf: one vector load a block of the fused loop over
        # the log-probs and the candidates' block maxima (index_fill broke that loop up: a 256-row step took
        # 3.3 ms; comparing each column's index with the two ids cost two int64 vectors a block)
        allowed = (log_probs + forbidden).view(B, R // B, -1)
        candidates = top_candidates(allowed, hyp_scores.view(B, R // B), n_like.size(0))
        return logits, log_norm, next_ancestors, torch.stack(new_k), torch.stack(new_v), *candidates


def step_weights(model) -> dict[str, torch.Tensor]:
    """Every weight the step multiplies by, by the name TracedStep.linear gives it."""
    weights = {"generator": model.generator.weight}
    for i, layer in enumerate(model.decoder_layers):
        D = layer.cross_attn.d_model
        weights.update({f"{i}_self_in": layer.self_attn.in_proj.weight,
                        f"{i}_self_out": layer.self_attn.out_proj.weight,
                        f"{i}_cross_q": layer.cross_attn.in_proj.weight[:D],
                        f"{i}_cross_out": layer.cross_attn.out_proj.weight,
                        f"{i}_ffn_1": layer.ffn.w_1.weight, f"{i}_ffn_2": layer.ffn.w_2.weight})
    return weights


class TracedEncoder(torch.nn.Module):
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


def example_inputs(model, kind: str):
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
              torch.zeros(L, B, H, S, d), torch.zeros(B, S), torch.zeros(R),
              torch.zeros(model.generator.weight.size(0)), torch.zeros(9))
    sizes = ({0: rows}, None, {0: rows}, {0: before, 1: positions}, {0: positions, 2: slots},
             {0: positions, 2: slots}, {1: sentences, 3: length}, {1: sentences, 3: length},
             {0: sentences, 1: length}, {0: rows}, None, {0: Dim("n", min=1, max=1 << 20)})
    return inputs, sizes
