"""Export a trained Transformer to CTranslate2 (optional extra `aiayn[export]`), for fast inference and
as the decoding-speed peer in bench/. Same weights, same sinusoids, same vocabulary: a test checks that
CTranslate2's greedy output equals aiayn's."""

import json
from pathlib import Path

import numpy as np

from aiayn.errors import AiaynError


def _linear(spec, weight, bias=None):
    spec.weight = weight.detach().float().numpy()
    if bias is not None:
        spec.bias = bias.detach().float().numpy()


def _norm(spec, norm):
    spec.gamma, spec.beta = norm.weight.detach().float().numpy(), norm.bias.detach().float().numpy()


def _ffn(spec, layer):
    _norm(spec.layer_norm, layer.ffn_norm)
    _linear(spec.linear_0, layer.ffn.w_1.weight, layer.ffn.w_1.bias)
    _linear(spec.linear_1, layer.ffn.w_2.weight, layer.ffn.w_2.bias)


def _self_attention(spec, attn, norm):
    _norm(spec.layer_norm, norm)
    _linear(spec.linear[0], attn.in_proj.weight, attn.in_proj.bias)  # fused [W_Q; W_K; W_V]
    _linear(spec.linear[1], attn.out_proj.weight, attn.out_proj.bias)


def _cross_attention(spec, attn, norm):
    d = attn.d_model
    _norm(spec.layer_norm, norm)
    _linear(spec.linear[0], attn.in_proj.weight[:d], attn.in_proj.bias[:d])  # W_Q
    _linear(spec.linear[1], attn.in_proj.weight[d:], attn.in_proj.bias[d:])  # fused [W_K; W_V]
    _linear(spec.linear[2], attn.out_proj.weight, attn.out_proj.bias)


def _activation(name: str):
    from ctranslate2.specs import common_spec

    activations = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,  # erf, as torch's
                   "silu": common_spec.Activation.SWISH}
    if name not in activations:
        raise AiaynError(f"CTranslate2 export supports the FFN activations {sorted(activations)}, not "
                         f"model.activation={name!r}")
    return activations[name]


def build_spec(model, cfg, source_vocabulary: list[str], target_vocabulary: list[str], start_token: str):
    """start_token: the decoder's first input (<s>; <pad> for imported Marian models)."""
    import ctranslate2

    m = cfg.model
    if not m.multi_head:
        raise AiaynError("CTranslate2 export supports Transformer models (arch=transformer), not RNNs")
    spec = ctranslate2.specs.TransformerSpec.from_config((m.n_encoder_layers, m.n_decoder_layers), m.n_heads,
                                                         pre_norm=m.norm_first, activation=_activation(m.activation))
    spec.config.decoder_start_token = start_token
    positions = model.positional.table  # (max_len, D): the sinusoids or the learned positions
    for side, embed in ((spec.encoder, model.src_embed), (spec.decoder, model.tgt_embed)):
        emb_spec = side.embeddings[0] if isinstance(side.embeddings, list) else side.embeddings
        emb_spec.weight = embed.weight.detach().float().numpy()
        side.scale_embeddings = True  # x sqrt(d_model), §3.4
        side.position_encodings.encodings = positions.detach().float().numpy()
    if m.norm_first:
        _norm(spec.encoder.layer_norm, model.encoder_norm)
        _norm(spec.decoder.layer_norm, model.decoder_norm)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder_layers):
        _self_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_norm)
        _ffn(layer_spec.ffn, layer)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder_layers):
        _self_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_norm)
        _cross_attention(layer_spec.attention, layer.cross_attn, layer.cross_attn_norm)
        _ffn(layer_spec.ffn, layer)
    _linear(spec.decoder.projection, model.generator.weight, model.generator.bias)  # bias: model.output_bias
    if model.generator.bias is None:
        spec.decoder.projection.bias = np.zeros(model.generator.weight.size(0), dtype=np.float32)
    spec.register_source_vocabulary(source_vocabulary)
    spec.register_target_vocabulary(target_vocabulary)
    return spec


def write_ctranslate2(model, cfg, tokenizer, out_dir: str | Path) -> None:
    """Write the CTranslate2 model files into the existing (empty) directory `out_dir` (no marker: the
    callers write theirs, then rename the directory into place)."""
    import ctranslate2

    source_vocabulary = tokenizer.source_id_to_piece(list(range(tokenizer.src_vocab_size)))
    target_vocabulary = tokenizer.id_to_piece(list(range(tokenizer.tgt_vocab_size)))
    start_token = tokenizer.id_to_piece([tokenizer.bos_id])[0]

    class _Converter(ctranslate2.converters.Converter):
        def _load(self):
            return build_spec(model, cfg, source_vocabulary, target_vocabulary, start_token)

    _Converter().convert(str(out_dir), force=True)  # force: CTranslate2 refuses an existing (empty) dir


def to_ctranslate2(model_dir: str | Path, out_dir: str | Path, force: bool = False) -> Path:
    """Convert an aiayn checkpoint directory into a CTranslate2 model directory. `out_dir` must be new,
    empty, or (with force) an earlier export: nothing else is ever replaced."""
    try:
        import ctranslate2  # noqa: F401 (here: the error before any work)
    except ImportError as err:
        raise AiaynError("export needs CTranslate2: pip install 'aiayn[export]'") from err
    from aiayn.checkpoint import EXPORT_MARKER, check_output_dir, load_checkpoint
    from aiayn.io import atomic_dir
    from aiayn.run_dir import resolve_model_dir

    source = resolve_model_dir(model_dir)
    check_output_dir(out_dir, "export", force, inputs=[model_dir, source])
    model, cfg, tokenizer = load_checkpoint(source)
    with atomic_dir(out_dir) as tmp:
        write_ctranslate2(model, cfg, tokenizer, tmp)
        marker = {"output": "export", "model": str(source.resolve()), "files": sorted(p.name for p in tmp.iterdir())}
        (tmp / EXPORT_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    return Path(out_dir)
