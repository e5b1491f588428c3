"""aiayn.model: attention, the Transformer and RNN seq2seq with attention.

Every seq2seq model offers one interface, used by decoding and inspection:
  arch: "transformer" or "rnn", a name to show (an RNN's decoder says its attention: decoder.attention_kind,
      "luong" or "bahdanau"); config: the ModelConfig it was built from (build_model sets it; None when built
      by hand). Code outside this package asks what a model has, never its name:
  multi_head: attention in layers of heads (the Transformer), or one attention inside a recurrent decoder
  attention_kinds: the maps it makes, of "encoder_self", "decoder_self", "cross"; attention_shape(kind) ->
      (layers, heads) of that kind's maps
  n_encoder_layers, n_decoder_layers, n_heads, d_model, d_ff (None: no feed-forward network)
  positional_kind: "sinusoidal", "learned" or None (no position table); max_positions: its rows, or None
  forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V)        masks derived from pad_id
  decoder_output(src, tgt_in) -> (B, T, D), the input of `generator` (the output layer, an nn.Linear);
      training fuses generator and loss (aiayn/training/loss.py)
  encode(src, return_attention=False) -> (memory, maps or None)
  init_state(memory, src) -> state, one row per sentence
  decode_step(tokens (R,), state, return_attention=False) -> (log_probs (R, V), state, maps or None)
  state.select(rows, sentences=None): keep, repeat or permute rows (and sentences; see aiayn/model/decoder_state.py)
Maps are dicts of attention weights shaped (B, L, H, T, S); forward(..., return_attention=True) returns
(logits, maps). The modules here are the paper's, plainly; the CPU speed-ups are put in by one explicit
step beside them, aiayn.cpu.prepare_for_cpu(model) (the Translator and the trainer take it).
"""

from aiayn.model.attention import MultiHeadAttention, scaled_dot_product_attention
from aiayn.model.build import PRESETS, ModelConfig, build_model, count_parameters
from aiayn.model.embedding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, TokenEmbedding
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.masks import causal_mask, padding_mask
from aiayn.model.rnn import BahdanauDecoder, LuongDecoder, RNNEncoder, RNNSeq2Seq
from aiayn.model.scores import (
    AdditiveScore,
    ConcatScore,
    CosineScore,
    DotScore,
    GeneralScore,
    LocationScore,
    ScaledDotScore,
    attention_distribution,
    context_vector,
)
from aiayn.model.transformer import DecoderLayer, EncoderLayer, Transformer

__all__ = [
    "AdditiveScore", "BahdanauDecoder", "ConcatScore", "CosineScore", "DecoderLayer", "DotScore",
    "EncoderLayer", "GeneralScore", "LearnedPositionalEmbedding", "LocationScore", "LuongDecoder",
    "ModelConfig", "MultiHeadAttention", "PRESETS", "PositionwiseFeedForward", "RNNEncoder", "RNNSeq2Seq",
    "ScaledDotScore", "SinusoidalPositionalEncoding", "TokenEmbedding", "Transformer",
    "attention_distribution", "build_model", "causal_mask", "context_vector", "count_parameters",
    "padding_mask", "scaled_dot_product_attention",
]
