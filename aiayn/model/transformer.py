"""The Transformer of "Attention Is All You Need" (§3): encoder and decoder stacks.

Shapes: B batch, S source length, T target length, D d_model, H heads, L layers, V vocabulary.
Post-LN (the paper, §3.1: LayerNorm(x + Sublayer(x))) by default; pre-LN (x + Sublayer(LayerNorm(x)))
with a final LayerNorm when norm_first=True. Dropout (P_drop) on every sublayer output and on the sum of
embeddings and positions (§5.4).
"""

import torch
from torch import nn

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.decoder_state import LayerCache, TransformerState
from aiayn.model.embedding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, TokenEmbedding
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.masks import padding_mask


class _Sublayers(nn.Module):
    """Residual connection + LayerNorm around a sublayer, post-LN or pre-LN."""

    def __init__(self, *, dropout: float, norm_first: bool):
        super().__init__()
        self.residual_dropout, self.norm_first = nn.Dropout(dropout), norm_first

    def sublayer_input(self, x, norm):
        """What the sublayer reads: LayerNorm(x) pre-LN, x post-LN."""
        return _layer_norm(x, norm) if self.norm_first else x

    def sublayer_output(self, x, out, norm):
        """The new residual stream from x and the sublayer's output (dropout on it, §5.4)."""
        if self.training:  # (a decoding step skips the call: three per layer)
            out = self.residual_dropout(out)
        return x + out if self.norm_first else _layer_norm(x + out, norm)  # §3.1 LayerNorm(x + Sublayer(x))

    def residual(self, x, norm, sublayer):
        """sublayer: (B, T, D) -> ((B, T, D), extra). Returns (new x, extra)."""
        out, extra = sublayer(self.sublayer_input(x, norm))
        return self.sublayer_output(x, out, norm), extra


def _layer_norm(x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    # norm(x) without nn.Module's call machinery: a decoding step of 4 layers makes 12 of these calls
    return nn.functional.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


class EncoderLayer(_Sublayers):
    """Self-attention then FFN (§3.1)."""

    def __init__(self, *, d_model, n_heads, d_ff, dropout=0.1, attention_dropout=0.0, activation="relu",
                 norm_first=False, layer_norm_eps=1e-5):
        super().__init__(dropout=dropout, norm_first=norm_first)
        self.self_attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads, dropout=attention_dropout)
        self.self_attn_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.ffn = PositionwiseFeedForward(d_model=d_model, d_ff=d_ff, activation=activation)
        self.ffn_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def forward(self, x, src_mask, need_weights=False):
        # x (B, S, D), src_mask (B, 1, 1, S) -> (B, S, D), weights (B, H, S, S) | None
        x, weights = self.residual(x, self.self_attn_norm,
                                   lambda h: self.self_attn(h, h, h, src_mask, need_weights))
        x, _ = self.residual(x, self.ffn_norm, lambda h: (self.ffn(h), None))
        return x, weights


class DecoderLayer(_Sublayers):
    """Masked self-attention, encoder-decoder (cross) attention, then FFN (§3.1)."""

    def __init__(self, *, d_model, n_heads, d_ff, dropout=0.1, attention_dropout=0.0, activation="relu",
                 norm_first=False, layer_norm_eps=1e-5):
        super().__init__(dropout=dropout, norm_first=norm_first)
        self.self_attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads, dropout=attention_dropout)
        self.self_attn_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.cross_attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads, dropout=attention_dropout)
        self.cross_attn_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.ffn = PositionwiseFeedForward(d_model=d_model, d_ff=d_ff, activation=activation)
        self.ffn_norm = nn.LayerNorm(d_model, eps=layer_norm_eps)

    def self_attention(self, h, need_weights=False):
        """Teacher forcing: h (B, T, D) attends itself, look-ahead masked (§3.2.3); Q, K, V in one product."""
        q, k, v = self.self_attn.project_qkv(h)
        return self.self_attn.attend(q, k, v, None, need_weights, is_causal=True)

    def cross_attention(self, h, memory, src_mask, need_weights=False):
        k, v = self.cross_attn.project_kv(memory, memory)
        return self.cross_attn.attend(self.cross_attn.project_q(h), k, v, src_mask, need_weights)

    def forward(self, x, memory, src_mask, need_weights=False):
        """Teacher forcing, all T positions at once: x (B, T, D), memory (B, S, D) -> (B, T, D), self weights
        (B, H, T, T) | None, cross (B, H, T, S) | None."""
        x, self_w = self.residual(x, self.self_attn_norm, lambda h: self.self_attention(h, need_weights))
        x, cross_w = self.residual(
            x, self.cross_attn_norm, lambda h: self.cross_attention(h, memory, src_mask, need_weights))
        x, _ = self.residual(x, self.ffn_norm, lambda h: (self.ffn(h), None))
        return x, self_w, cross_w

    def step(self, x, cache: LayerCache, src_mask, need_weights=False):
        """One decoding position on the cached keys and values: x (R, D) -> (R, D), self weights
        (R, H, 1, t + 1) | None, cross (R, H, 1, S) | None; src_mask (B', 1, 1, S) per sentence. The sublayers
        of forward for one position, as rows (R, D), without closures or (R, 1, D) views: with its first
        version beam search at batch 1 was 12% faster on an AVX2 CPU; on an AVX-512 one it made no difference
        (BENCHMARKS.md, decoding speed)."""
        out, self_w = self.self_attn.step_self(self.sublayer_input(x, self.self_attn_norm), cache, need_weights)
        x = self.sublayer_output(x, out, self.self_attn_norm)
        out, cross_w = self.cross_attn.step_cross(self.sublayer_input(x, self.cross_attn_norm), cache.cross_k,
                                                  cache.cross_v, src_mask, need_weights)
        x = self.sublayer_output(x, out, self.cross_attn_norm)
        x = self.sublayer_output(x, self.ffn(self.sublayer_input(x, self.ffn_norm)), self.ffn_norm)
        return x, self_w, cross_w


def _stack(weights: list) -> torch.Tensor:
    # L x (B, H, T, S) -> (B, L, H, T, S)
    return torch.stack(weights, dim=1)


class Transformer(nn.Module):
    """Encoder-decoder Transformer with the shared seq2seq interface (see aiayn/model/__init__.py)."""

    arch = "transformer"  # a name to show; what the model has is asked of the facts below
    config = None  # the ModelConfig it was built from (aiayn.model.build sets it)
    multi_head = True  # attention in layers of heads (§3.2.2): every layer and head has its own map
    attention_kinds = ("encoder_self", "decoder_self", "cross")

    def __init__(self, *, src_vocab_size, tgt_vocab_size, pad_id, d_model=512, n_heads=8, d_ff=2048,
                 n_encoder_layers=6, n_decoder_layers=6, dropout=0.1, attention_dropout=0.0,
                 activation="relu", norm_first=False, positional="sinusoidal", max_len=1024,
                 share_embeddings=False, tie_output=True, layer_norm_eps=1e-5, output_bias=False):
        super().__init__()
        if share_embeddings and src_vocab_size != tgt_vocab_size:
            raise ValueError(f"share_embeddings needs one joint vocabulary, but src_vocab_size="
                             f"{src_vocab_size} != tgt_vocab_size={tgt_vocab_size}")
        self.pad_id, self.d_model, self.n_heads, self.d_ff = pad_id, d_model, n_heads, d_ff
        self.norm_first = norm_first
        self.src_embed = TokenEmbedding(vocab_size=src_vocab_size, d_model=d_model, pad_id=pad_id)
        self.tgt_embed = self.src_embed if share_embeddings else \
            TokenEmbedding(vocab_size=tgt_vocab_size, d_model=d_model, pad_id=pad_id)
        pos_cls = SinusoidalPositionalEncoding if positional == "sinusoidal" else LearnedPositionalEmbedding
        self.positional = pos_cls(d_model=d_model, max_len=max_len)
        self.embed_dropout = nn.Dropout(dropout)  # §5.4 P_drop on the sums of embeddings and positions
        layer_args = dict(d_model=d_model, n_heads=n_heads, d_ff=d_ff, dropout=dropout,
                          attention_dropout=attention_dropout, activation=activation, norm_first=norm_first,
                          layer_norm_eps=layer_norm_eps)
        self.encoder_layers = nn.ModuleList(EncoderLayer(**layer_args) for _ in range(n_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(**layer_args) for _ in range(n_decoder_layers))
        # pre-LN leaves the last residual stream un-normalized, so both stacks end with a LayerNorm
        self.encoder_norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model, eps=layer_norm_eps) if norm_first else nn.Identity()
        # output_bias: a learned bias on the logits (a departure; Marian's final_logits_bias), zero at the start
        self.generator = nn.Linear(d_model, tgt_vocab_size, bias=output_bias)
        if output_bias:
            nn.init.zeros_(self.generator.bias)
        if tie_output or share_embeddings:  # §3.4: output projection shares the embedding matrix
            self.generator.weight = self.tgt_embed.weight

    @property
    def n_encoder_layers(self) -> int:
        return len(self.encoder_layers)

    @property
    def n_decoder_layers(self) -> int:
        return len(self.decoder_layers)

    @property
    def positional_kind(self) -> str:
        """"sinusoidal" (§3.5) or "learned" (Table 3, row E)."""
        return self.positional.kind

    @property
    def max_positions(self) -> int:
        """Rows of the position table: the longest source or target the model can read."""
        return self.positional.table.size(0)

    def attention_shape(self, kind: str) -> tuple[int, int]:
        """(layers, heads) of the maps of one of attention_kinds."""
        return (self.n_encoder_layers if kind == "encoder_self" else self.n_decoder_layers), self.n_heads

    def _embed(self, embedding, tokens, offset=0):
        x = self.positional(embedding(tokens), offset)  # §3.4 + §3.5
        return self.embed_dropout(x) if self.training else x  # §5.4 P_drop on embeddings

    def encode(self, src: torch.Tensor, return_attention: bool = False):
        """src (B, S) -> (memory (B, S, D), encoder self-attention (B, L, H, S, S) or None)."""
        src_mask = padding_mask(src, self.pad_id)
        x, weights = self._embed(self.src_embed, src), []
        for layer in self.encoder_layers:
            x, w = layer(x, src_mask, return_attention)
            weights.append(w)
        return self.encoder_norm(x), (_stack(weights) if return_attention else None)

    def _decoder_hidden(self, tgt_in, memory, src_mask, return_attention):
        """Teacher forcing: tgt_in (B, T) -> (hidden (B, T, D), the output projection's input,
        {"decoder_self", "cross"} maps (B, L, H, T, *) or None)."""
        x, self_ws, cross_ws = self._embed(self.tgt_embed, tgt_in), [], []
        for layer in self.decoder_layers:
            x, self_w, cross_w = layer(x, memory, src_mask, return_attention)
            self_ws.append(self_w)
            cross_ws.append(cross_w)
        maps = {"decoder_self": _stack(self_ws), "cross": _stack(cross_ws)} if return_attention else None
        return self.decoder_norm(x), maps

    def decode(self, tgt_in, memory, src_mask, return_attention=False):
        """Teacher forcing: tgt_in (B, T) -> logits (B, T, V) [, dict of (B, L, H, T, *) maps]."""
        hidden, maps = self._decoder_hidden(tgt_in, memory, src_mask, return_attention)
        logits = self.generator(hidden)
        return (logits, maps) if return_attention else logits

    def decoder_output(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Teacher forcing up to the output projection: src (B, S), tgt_in (B, T) -> (B, T, D). Training
        fuses the projection into its loss (aiayn/training/loss.py): the (N, V) logits are never whole."""
        memory, _ = self.encode(src)
        return self.decoder_output_from(memory, src, tgt_in)

    def decoder_output_from(self, memory: torch.Tensor, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """decoder_output with the encoder's output memory (B, S, D) given (a loss that also reads it)."""
        return self._decoder_hidden(tgt_in, memory, padding_mask(src, self.pad_id), False)[0]

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, return_attention: bool = False):
        """src (B, S), tgt_in (B, T) -> logits (B, T, V) [, {"encoder_self", "decoder_self", "cross"}]."""
        src_mask = padding_mask(src, self.pad_id)
        memory, enc_w = self.encode(src, return_attention)
        if not return_attention:
            return self.decode(tgt_in, memory, src_mask)
        logits, maps = self.decode(tgt_in, memory, src_mask, True)
        return logits, {"encoder_self": enc_w, **maps}

    def init_state(self, memory: torch.Tensor, src: torch.Tensor) -> TransformerState:
        """One row per sentence. Every layer's cross-attention K/V are computed once, per sentence; the
        self-attention cache starts empty."""
        caches = [LayerCache(*layer.cross_attn.project_kv(memory, memory)) for layer in self.decoder_layers]
        return TransformerState(caches, padding_mask(src, self.pad_id))

    def decode_step(self, tokens: torch.Tensor, state: TransformerState, return_attention: bool = False):
        """tokens (R,) = the newest target token of each row -> (log_probs (R, V), state (updated in place,
        step + 1), {"decoder_self": (R, L, H, 1, t), "cross": (R, L, H, 1, S)} or None). One position
        costs one step."""
        x = self._embed(self.tgt_embed, tokens[:, None], offset=state.step)[:, 0]  # (R, D)
        self_ws, cross_ws = [], []
        for layer, cache in zip(self.decoder_layers, state.layers):
            x, self_w, cross_w = layer.step(x, cache, state.src_mask, return_attention)
            self_ws.append(self_w)
            cross_ws.append(cross_w)
        state.step += 1
        logits = self.generator(self.decoder_norm(x)).float()  # §3.4 (R, V)
        if logits.requires_grad:
            log_probs = torch.log_softmax(logits, dim=-1)
        else:  # in place, the same numbers: no second (R, V) buffer, 1.5x faster at (256, 10000) here
            log_probs = torch.log_softmax(logits, dim=-1, out=logits)
        maps = {"decoder_self": _stack(self_ws), "cross": _stack(cross_ws)} if return_attention else None
        return log_probs, state, maps
