"""aiayn.model: attention, the Transformer and RNN seq2seq with attention.

Every seq2seq model offers one interface, used by decoding and inspection:
  forward(src (B, S), tgt_in (B, T)) -> logits (B, T, V)        masks derived from pad_id
  encode(src) -> memory;  init_state(memory, src) -> state
  decode_step(tokens (B,), state) -> (log_probs (B, V), state);  state.reorder(indices)
  return_attention=True appends a dict of attention maps shaped (B, L, H, T, S) to the result.
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
