"""ModelConfig and its presets -> build_model(). The only place where configuration meets modules."""

import dataclasses
import logging
import math
from dataclasses import dataclass

from torch import nn

from aiayn.errors import AiaynError
from aiayn.model import scores
from aiayn.model.embedding import TokenEmbedding
from aiayn.model.rnn import BahdanauDecoder, LuongDecoder, RNNEncoder, RNNSeq2Seq
from aiayn.model.transformer import Transformer

log = logging.getLogger(__name__)

CHOICES = {
    "arch": ("transformer", "rnn"),
    "activation": ("relu", "gelu", "silu"),  # silu = swish, the OPUS-MT (Marian) default
    "positional": ("sinusoidal", "learned"),
    "rnn_cell": ("lstm", "gru"),
    "rnn_attention": ("luong", "bahdanau"),
    "score": ("dot", "scaled_dot", "general", "concat", "additive", "cosine", "location"),
}


class FieldError(AiaynError):
    """A config field with a bad value. `fields` are the dotted names involved, so that aiayn.config can
    say where a value was set (a file, --set); the message names the field, its value and the rule."""

    def __init__(self, fields: str | tuple[str, ...], message: str):
        super().__init__(message)
        self.fields = (fields,) if isinstance(fields, str) else fields


# Rules for check_fields: each takes a value and returns what is wrong with it, or None.
def at_least(low):
    return lambda value: None if value >= low else f"must be >= {low}"


def above(low):
    return lambda value: None if value > low else f"must be > {low}"


def between(low, high):
    return lambda value: None if low <= value <= high else f"must be in [{low}, {high}]"


def fraction(value):
    """A probability that must leave something: dropout, smoothing, a decay (1 would freeze or zero)."""
    return None if 0 <= value < 1 else "must be in [0, 1)"


def _non_finite(value) -> bool:
    values = value if isinstance(value, (tuple, list)) else (value,)
    return any(isinstance(v, float) and not math.isfinite(v) for v in values)


def check_fields(section, name: str, rules: dict) -> None:
    """Every float of a config section finite (YAML reads .nan and .inf), then each field's rule."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        problem = "must be a finite number" if _non_finite(value) else None
        problem = problem or (rules[f.name](value) if f.name in rules else None)
        if problem:
            raise FieldError(f"{name}.{f.name}", f"{name}.{f.name}={value!r} {problem}")


@dataclass
class ModelConfig:
    """Every model hyper-parameter. Defaults are the paper's base model (Table 3).

    Attributes:
        arch: transformer | rnn (the RNN seq2seq with attention).
        src_vocab_size: source vocabulary size (set from the tokenizer by `aiayn train`).
        tgt_vocab_size: target vocabulary size (set from the tokenizer by `aiayn train`).
        pad_id: the padding token's id (set from the tokenizer by `aiayn train`).
        d_model: width of every layer's input and output (§3.2.2).
        n_heads: attention heads per layer; d_head = d_model / n_heads (§3.2.2).
        d_ff: inner size of the position-wise feed-forward network (§3.3).
        n_encoder_layers: encoder layers (N, §3.1); RNN: stacked encoder RNN layers.
        n_decoder_layers: decoder layers (N, §3.1); RNN: stacked decoder RNN layers.
        dropout: P_drop (§5.4).
        attention_dropout: departure knob: dropout on attention weights (paper: none).
        activation: feed-forward activation: relu (the paper) | gelu | silu (swish, OPUS-MT's Marian default).
        norm_first: False = post-LN as in the paper; True = pre-LN.
        positional: sinusoidal (§3.5) | learned.
        max_len: positions the model has (longest source or target in subword tokens, with <s> or </s>).
        share_embeddings: 3-way tying: source, target and output (needs a joint vocabulary).
        tie_output: target embedding = pre-softmax projection (§3.4).
        layer_norm_eps: LayerNorm epsilon.
        output_bias: departure knob: a learned bias on the output logits (Marian's final_logits_bias; the
            paper has none). Off by default, so checkpoints saved before this field existed load unchanged.
        rnn_cell: RNN seq2seq (arch=rnn): lstm | gru.
        rnn_attention: RNN seq2seq: luong (attention after the RNN step) | bahdanau (before it).
        score: RNN seq2seq's score function: dot | scaled_dot | general | concat | additive | cosine | location.
        attention_dim: concat/additive hidden size; 0 = d_model.
    """

    arch: str = "transformer"
    src_vocab_size: int = 37000
    tgt_vocab_size: int = 37000
    pad_id: int = 0
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation: str = "relu"
    norm_first: bool = False
    positional: str = "sinusoidal"
    max_len: int = 1024
    share_embeddings: bool = False
    tie_output: bool = True
    layer_norm_eps: float = 1e-5
    output_bias: bool = False
    rnn_cell: str = "lstm"
    rnn_attention: str = "luong"
    score: str = "general"
    attention_dim: int = 0

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    # What the model built from this config has (as the models say it), for checks made before building one
    @property
    def multi_head(self) -> bool:
        """Attention in layers of heads (the Transformer); False: one attention inside an RNN decoder."""
        return self.arch == "transformer"

    @property
    def max_positions(self) -> int | None:
        """Rows of the position table (max_len), or None: an RNN reads any length."""
        return self.max_len if self.arch == "transformer" else None

    def attention_shape(self, kind: str) -> tuple[int, int]:
        """(layers, heads) of the maps of one kind of attention: "encoder_self", "decoder_self" or "cross"."""
        if self.arch != "transformer":
            return 1, 1
        return (self.n_encoder_layers if kind == "encoder_self" else self.n_decoder_layers), self.n_heads

    def validate(self) -> "ModelConfig":
        """Raises FieldError (a ValueError naming the field) for the first bad value."""
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise FieldError(f"model.{name}", f"model.{name}={getattr(self, name)!r} is not one of {allowed}")
        check_fields(self, "model", MODEL_RULES)
        vocab = ("model.src_vocab_size", "model.tgt_vocab_size")
        if self.arch == "transformer" and self.d_model % self.n_heads:
            raise FieldError(("model.d_model", "model.n_heads"), f"model.d_model={self.d_model} must be divisible "
                             f"by model.n_heads={self.n_heads}")
        if self.pad_id >= min(self.src_vocab_size, self.tgt_vocab_size):
            raise FieldError(("model.pad_id", *vocab), f"model.pad_id={self.pad_id} must be smaller than the "
                             f"vocabulary sizes ({self.src_vocab_size}, {self.tgt_vocab_size})")
        if self.output_bias and self.arch != "transformer":
            raise FieldError(("model.output_bias", "model.arch"), "model.output_bias is a Transformer option; "
                             "set it to false for arch=rnn")
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise FieldError(("model.share_embeddings", *vocab), "model.share_embeddings needs src_vocab_size == "
                             "tgt_vocab_size (a joint vocabulary)")
        return self

    @classmethod
    def preset(cls, name: str, **overrides) -> "ModelConfig":
        if not isinstance(name, str) or name not in PRESETS:
            raise FieldError("model.preset", f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}")
        return dataclasses.replace(cls(), **{**PRESETS[name], **overrides}).validate()


MODEL_RULES = {
    "src_vocab_size": at_least(1), "tgt_vocab_size": at_least(1), "pad_id": at_least(0), "d_model": at_least(1),
    "n_heads": at_least(1), "d_ff": at_least(1), "n_encoder_layers": at_least(1), "n_decoder_layers": at_least(1),
    "dropout": fraction, "attention_dropout": fraction, "layer_norm_eps": above(0), "attention_dim": at_least(0),
    "max_len": at_least(2),  # <s> or </s> plus one token
}

PRESETS = {
    "paper-base": dict(d_model=512, n_heads=8, d_ff=2048, n_encoder_layers=6, n_decoder_layers=6, dropout=0.1),
    "paper-big": dict(d_model=1024, n_heads=16, d_ff=4096, n_encoder_layers=6, n_decoder_layers=6, dropout=0.3),
    # small models that train on a 2-core CPU
    "tiny": dict(d_model=64, n_heads=4, d_ff=256, n_encoder_layers=2, n_decoder_layers=2, dropout=0.1),
    "small": dict(d_model=256, n_heads=4, d_ff=1024, n_encoder_layers=3, n_decoder_layers=3, dropout=0.1),
    "multi30k": dict(d_model=128, n_heads=4, d_ff=512, n_encoder_layers=4, n_decoder_layers=4, dropout=0.3,
                     share_embeddings=True),
    "rnn-luong": dict(arch="rnn", d_model=256, n_encoder_layers=1, n_decoder_layers=1, dropout=0.3,
                      rnn_cell="lstm", rnn_attention="luong", score="general"),
    "rnn-bahdanau": dict(arch="rnn", d_model=256, n_encoder_layers=1, n_decoder_layers=1, dropout=0.3,
                         rnn_cell="gru", rnn_attention="bahdanau", score="additive"),
}


def build_score(cfg: ModelConfig) -> scores.ScoreFunction:
    d, a = cfg.d_model, cfg.attention_dim or cfg.d_model
    return {
        "dot": lambda: scores.DotScore(),
        "scaled_dot": lambda: scores.ScaledDotScore(dim=d),
        "general": lambda: scores.GeneralScore(query_dim=d, key_dim=d),
        "concat": lambda: scores.ConcatScore(query_dim=d, key_dim=d, attention_dim=a),
        "additive": lambda: scores.AdditiveScore(query_dim=d, key_dim=d, attention_dim=a),
        "cosine": lambda: scores.CosineScore(),
        "location": lambda: scores.LocationScore(query_dim=d, max_source_len=cfg.max_len),
    }[cfg.score]()


def _build_rnn(cfg: ModelConfig) -> RNNSeq2Seq:
    rnn_type = nn.LSTM if cfg.rnn_cell == "lstm" else nn.GRU
    encoder = RNNEncoder(vocab_size=cfg.src_vocab_size, d_model=cfg.d_model, pad_id=cfg.pad_id,
                         n_layers=cfg.n_encoder_layers, dropout=cfg.dropout, rnn_type=rnn_type)
    decoder_cls = LuongDecoder if cfg.rnn_attention == "luong" else BahdanauDecoder
    decoder = decoder_cls(vocab_size=cfg.tgt_vocab_size, d_model=cfg.d_model, pad_id=cfg.pad_id,
                          score=build_score(cfg), n_layers=cfg.n_decoder_layers, dropout=cfg.dropout,
                          rnn_type=rnn_type)
    if cfg.share_embeddings:
        decoder.embedding.weight = encoder.embedding.weight
    return RNNSeq2Seq(encoder=encoder, decoder=decoder, pad_id=cfg.pad_id)


def _build_transformer(cfg: ModelConfig) -> Transformer:
    names = ("src_vocab_size", "tgt_vocab_size", "pad_id", "d_model", "n_heads", "d_ff", "n_encoder_layers",
             "n_decoder_layers", "dropout", "attention_dropout", "activation", "norm_first", "positional",
             "max_len", "share_embeddings", "tie_output", "layer_norm_eps", "output_bias")
    return Transformer(**{name: getattr(cfg, name) for name in names})


def xavier_init(model: nn.Module) -> None:
    """Xavier-uniform for every weight matrix; vectors keep their init, and so do token embeddings,
    which keep N(0, d_model^-0.5) (as fairseq and tensor2tensor do). Why: Xavier on a (V, D) embedding
    gives std sqrt(2 / (V + D)), ~0.014 for V = 10k, D = 128; times sqrt(d_model) that is ~0.16, so the
    sinusoids (std ~0.7) drown the token identity and, with tied output weights, the logits start tiny.
    Measured here: with Xavier embeddings a d_model-128 Multi30k model's cross-attention stayed uniform
    after 1200 steps (validation perplexity 31)."""
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, (TokenEmbedding, nn.Embedding))}
    for param in model.parameters():
        if param.dim() > 1 and id(param) not in embeddings:
            nn.init.xavier_uniform_(param)


def build_model(cfg: ModelConfig) -> nn.Module:
    cfg.validate()
    model = _build_transformer(cfg) if cfg.arch == "transformer" else _build_rnn(cfg)
    model.config = cfg
    xavier_init(model)
    log.info("built %s with %s parameters", cfg.arch, f"{count_parameters(model):,}")
    return model


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, each shared tensor counted once."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
