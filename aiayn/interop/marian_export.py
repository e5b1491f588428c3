"""Export an aiayn Transformer as a Hugging Face Marian directory (`aiayn export-hf --model M --out DIR`):
config.json, model.safetensors, generation_config.json, source.spm, target.spm, vocab.json
[target_vocab.json], tokenizer_config.json, which MarianMTModel.from_pretrained and
MarianTokenizer.from_pretrained load, whose generate() gives aiayn's translations, and which
`aiayn import-hf` reads back to the same weights. The inverse of aiayn.interop.marian (see its docstring):
the hidden dimension is permuted back to Marian's [sin | cos] layout of the sinusoids.

The decoder's start token: Marian starts from config.decoder_start_token_id. A separate-vocabulary model
(import-hf's, or data.joint_vocab: false) starts from <pad>, as Marian models do. aiayn's joint
SentencePiece tokenizer (pad 0, unk 1, <s> 2, </s> 3) starts from <s>: the export says so,
decoder_start_token_id = 2, and forbids both <pad> and <s> as outputs (bad_words_ids), as aiayn's search
does. The tokenizer files are that one SentencePiece model as source.spm and target.spm, with vocab.json
numbering its pieces as SentencePiece does, so MarianTokenizer's ids are aiayn's (text that writes a special
token out, such as "</s>", or starts with a language tag such as ">>fr<<", MarianTokenizer reads as that
token; aiayn's joint tokenizer cuts it into pieces).

generate() with the exported generation_config.json searches as `aiayn translate` does with the model's
decode section: num_beams = decode.beam, length_penalty = decode.length_penalty with transformers' form
|Y|^alpha (aiayn's decode.length_penalty_form: hf; a model with the GNMT form is exported with a warning),
early_stopping = decode.early_stopping, no forced </s> at the length limit. The length limit differs:
generate stops at max_length = model.max_len positions, aiayn at decode.max_len_a * |source| + max_len_b.

Configs Marian cannot express are refused with one line naming the field.
"""

import json
import logging
from pathlib import Path

import torch

from aiayn.data.separate_tokenizer import SeparateTokenizer
from aiayn.errors import AiaynError
from aiayn.interop.marian import _quiet, hidden_permutation
from aiayn.interop.marian_vocab import UnsupportedModel

log = logging.getLogger(__name__)

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "silu": "swish"}  # aiayn -> transformers (Marian's names)
MARIAN_LAYER_NORM_EPS = 1e-5  # Marian's LayerNorms use torch's default, which its config cannot change


def check_exportable(cfg) -> None:
    """Refuse, naming the field, a model config that Marian cannot compute exactly."""
    why = None
    if not cfg.multi_head:
        why = f"model.arch={cfg.arch!r}: Marian is a Transformer; an RNN has no Marian form"
    elif cfg.norm_first:
        why = "model.norm_first=true: Marian is post-LN (LayerNorm after each residual sum), as the paper"
    elif cfg.positional != "sinusoidal":
        why = f"model.positional={cfg.positional!r}: Marian's positions are the fixed sinusoids"
    elif cfg.activation not in ACTIVATIONS:
        why = f"model.activation={cfg.activation!r}: Marian has {sorted(ACTIVATIONS)}"
    elif cfg.layer_norm_eps != MARIAN_LAYER_NORM_EPS:
        why = f"model.layer_norm_eps={cfg.layer_norm_eps:g}: Marian's LayerNorms use {MARIAN_LAYER_NORM_EPS:g}"
    elif cfg.d_model % 2:
        why = f"model.d_model={cfg.d_model}: Marian's sinusoids need an even d_model"
    if why:
        raise UnsupportedModel(f"{why}; it cannot be exported to Marian")


def check_tokenizer(tokenizer) -> None:
    """The decoder starts from <pad> (Marian's way) or, for aiayn's joint tokenizer, from <s>."""
    if tokenizer.bos_id in (tokenizer.eos_id, tokenizer.unk_id):
        raise UnsupportedModel(f"the tokenizer's start token (id {tokenizer.bos_id}) is also its </s> or <unk>; "
                               f"Marian's decoder_start_token_id must be another token")


def marian_config(cfg, tokenizer):
    import transformers

    return transformers.MarianConfig(
        vocab_size=cfg.src_vocab_size, decoder_vocab_size=cfg.tgt_vocab_size, d_model=cfg.d_model,
        encoder_layers=cfg.n_encoder_layers, decoder_layers=cfg.n_decoder_layers,
        encoder_attention_heads=cfg.n_heads, decoder_attention_heads=cfg.n_heads, encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff, max_position_embeddings=cfg.max_len, activation_function=ACTIVATIONS[cfg.activation],
        dropout=cfg.dropout, attention_dropout=cfg.attention_dropout, activation_dropout=0.0, scale_embedding=True,
        share_encoder_decoder_embeddings=cfg.share_embeddings,
        tie_word_embeddings=cfg.share_embeddings or cfg.tie_output,
        pad_token_id=tokenizer.pad_id, eos_token_id=tokenizer.eos_id, decoder_start_token_id=tokenizer.bos_id,
        forced_eos_token_id=None)


def generation_config(decode, model_cfg, tokenizer):
    """What generate() does by default: aiayn's decode section (see the module docstring)."""
    import transformers

    banned = [[tokenizer.pad_id]] + ([[tokenizer.bos_id]] if tokenizer.bos_id != tokenizer.pad_id else [])
    return transformers.GenerationConfig(
        num_beams=decode.beam, length_penalty=float(decode.length_penalty), early_stopping=decode.early_stopping,
        do_sample=False, max_length=model_cfg.max_len, bad_words_ids=banned, forced_eos_token_id=None,
        pad_token_id=tokenizer.pad_id, eos_token_id=tokenizer.eos_id, decoder_start_token_id=tokenizer.bos_id)


def _layer(prefix: str, state: dict, inv: torch.Tensor, decoder: bool) -> dict:
    """Marian names -> tensors of one aiayn layer (aiayn.interop.marian._layer_weights, inverted)."""
    def attention(name, marian):
        q, k, v = state[f"{name}.in_proj.weight"][:, inv].chunk(3)
        qb, kb, vb = state[f"{name}.in_proj.bias"].chunk(3)
        return {f"{marian}.q_proj.weight": q, f"{marian}.k_proj.weight": k, f"{marian}.v_proj.weight": v,
                f"{marian}.q_proj.bias": qb, f"{marian}.k_proj.bias": kb, f"{marian}.v_proj.bias": vb,
                f"{marian}.out_proj.weight": state[f"{name}.out_proj.weight"][inv],
                f"{marian}.out_proj.bias": state[f"{name}.out_proj.bias"][inv]}

    def norm(name, marian):
        return {f"{marian}.weight": state[f"{name}.weight"][inv], f"{marian}.bias": state[f"{name}.bias"][inv]}

    out = {**attention("self_attn", "self_attn"), **norm("self_attn_norm", "self_attn_layer_norm"),
           "fc1.weight": state["ffn.w_1.weight"][:, inv], "fc1.bias": state["ffn.w_1.bias"],
           "fc2.weight": state["ffn.w_2.weight"][inv], "fc2.bias": state["ffn.w_2.bias"][inv],
           **norm("ffn_norm", "final_layer_norm")}
    if decoder:
        out.update({**attention("cross_attn", "encoder_attn"), **norm("cross_attn_norm", "encoder_attn_layer_norm")})
    return {f"{prefix}.{k}": v for k, v in out.items()}


def marian_weights(model, cfg) -> dict:
    """MarianMTModel's state dict (its tied names included, position tables excluded) from aiayn's."""
    state = {k: v.detach().float() for k, v in model.state_dict().items()}
    inv = torch.argsort(hidden_permutation(cfg.d_model))  # Marian coordinate -> aiayn coordinate
    src, tgt = state["src_embed.weight"][:, inv], state["tgt_embed.weight"][:, inv]
    out = {"model.encoder.embed_tokens.weight": src, "model.decoder.embed_tokens.weight": tgt,
           "lm_head.weight": state["generator.weight"][:, inv],
           "final_logits_bias": state.get("generator.bias", torch.zeros(cfg.tgt_vocab_size))[None]}
    if cfg.share_embeddings:
        out["model.shared.weight"] = src
    for i in range(cfg.n_encoder_layers):
        out.update(_layer(f"model.encoder.layers.{i}", _sub(state, f"encoder_layers.{i}."), inv, decoder=False))
    for i in range(cfg.n_decoder_layers):
        out.update(_layer(f"model.decoder.layers.{i}", _sub(state, f"decoder_layers.{i}."), inv, decoder=True))
    return {k: v.contiguous() for k, v in out.items()}


def _sub(state: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}


def tokenizer_files(tokenizer) -> dict[str, bytes]:
    """MarianTokenizer's files: a separate-vocabulary tokenizer's own; aiayn's joint SentencePiece model as
    source.spm and target.spm, with vocab.json numbering its pieces as SentencePiece does."""
    if isinstance(tokenizer, SeparateTokenizer):
        return tokenizer.files()
    sp = tokenizer.sp
    table = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    specials = {sp.id_to_piece(i): i for i in (tokenizer.eos_id, tokenizer.unk_id, tokenizer.pad_id)}
    marian = SeparateTokenizer(source_model=tokenizer.proto, target_model=tokenizer.proto, vocab=table,
                               eos_token=sp.id_to_piece(tokenizer.eos_id), unk_token=sp.id_to_piece(tokenizer.unk_id),
                               pad_token=sp.id_to_piece(tokenizer.pad_id), added_tokens=specials)
    return marian.files()


def _hf_model(model, cfg, tokenizer):
    import transformers

    hf = transformers.MarianMTModel(marian_config(cfg, tokenizer)).eval()
    result = hf.load_state_dict(marian_weights(model, cfg), strict=False)
    left = [k for k in result.missing_keys if "embed_positions" not in k]
    assert not left and not result.unexpected_keys, (left, result.unexpected_keys)
    return hf


def export_marian(model_dir: str | Path, out: str | Path, force: bool = False) -> tuple[Path, list[str]]:
    """`aiayn export-hf --model M --out DIR`: write the Marian directory (new or empty, or with force an
    earlier export-hf: nothing else is ever replaced). Returns (DIR, notes for the user)."""
    from aiayn.checkpoint import EXPORT_MARKER, check_output_dir, load_checkpoint
    from aiayn.io import atomic_dir
    from aiayn.run_dir import resolve_model_dir

    try:
        import transformers  # noqa: F401 (here: the error before any work)
    except ImportError as err:
        raise AiaynError(f"export-hf needs transformers: pip install 'aiayn[hf]' ({err})") from None
    source = resolve_model_dir(model_dir)
    check_output_dir(out, "export-hf", force, inputs=[model_dir, source])
    model, cfg, tokenizer = load_checkpoint(source)
    check_exportable(cfg.model)
    check_tokenizer(tokenizer)
    notes = _notes(cfg.decode)
    hf = _hf_model(model.float().eval(), cfg.model, tokenizer)
    hf.generation_config = generation_config(cfg.decode, cfg.model, tokenizer)
    with atomic_dir(out) as tmp, _quiet(transformers):  # transformers' progress bars off
        hf.save_pretrained(tmp)
        for name, data in tokenizer_files(tokenizer).items():
            (tmp / name).write_bytes(data)
        marker = {"output": "export-hf", "model": str(source.resolve()), "files": sorted(p.name for p in tmp.iterdir())}
        (tmp / EXPORT_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    return Path(out), notes


def _notes(decode) -> list[str]:
    if decode.length_penalty_form == "hf" or decode.beam == 1:
        return []
    return [f"this model's beam search uses GNMT's length penalty (decode.length_penalty_form=gnmt); generate() "
            f"divides by |Y|^{decode.length_penalty:g} instead, so beam outputs may differ: aiayn translate "
            f"--length-penalty-form hf gives generate()'s"]
