"""Export an aiayn Transformer as a Hugging Face Marian directory (`aiayn export-hf --model M --out DIR`):
config.json, model.safetensors, generation_config.json, source.spm, target.spm, vocab.json
[target_vocab.json], tokenizer_config.json and a model card (README.md, aiayn.interop.model_card), which
MarianMTModel.from_pretrained and MarianTokenizer.from_pretrained load, whose generate() gives aiayn's
translations, which CTranslate2's ct2-transformers-converter converts (a joint vocabulary) to a model that
translates as aiayn does, and which `aiayn import-hf` reads back to the same weights. The inverse of
aiayn.interop.marian (see its docstring): the hidden dimension is permuted back to Marian's [sin | cos]
layout of the sinusoids.

The decoder's start token: Marian starts from config.decoder_start_token_id. A separate-vocabulary model
(import-hf's, or data.joint_vocab: false) starts from <pad>, as Marian models do. aiayn's joint
SentencePiece tokenizer (pad 0, unk 1, <s> 2, </s> 3) starts from <s>: the export is written in the
start-row form (aiayn.interop.marian_start: a zero-embedding <pad> appended as the start token, the
embedding of <s> in the decoder's position-0 row), which transformers and CTranslate2 both compute as
aiayn's network, and forbids aiayn's <pad>, <s> and the appended token as outputs (bad_words_ids), as
aiayn's search does. The tokenizer files are that one SentencePiece model as source.spm and target.spm, with
vocab.json numbering its pieces as SentencePiece does, so MarianTokenizer's ids are aiayn's (text that writes a special
token out, such as "</s>", or starts with a language tag such as ">>fr<<", MarianTokenizer reads as that
token; aiayn's joint tokenizer cuts it into pieces).

generate() with the exported generation_config.json searches as `aiayn translate` does with the model's
decode section: num_beams = decode.beam, length_penalty = decode.length_penalty with transformers' form
|Y|^alpha (aiayn's decode.length_penalty_form: hf; a model with the GNMT form is exported with a warning),
early_stopping = decode.early_stopping, no forced </s> at the length limit. The length limit: aiayn stops at
decode.max_len_a * |source| + max_len_b outputs; generate() has no limit that grows with the source, so
max_length is aiayn's limit at the longest source the model was trained on (length_limit).

Configs Marian cannot express are refused with one line naming the field.
"""

import dataclasses
import json
import logging
from pathlib import Path

import torch

from aiayn.data.separate_tokenizer import SeparateTokenizer
from aiayn.errors import AiaynError
from aiayn.interop import marian_start
from aiayn.interop.marian import _quiet, hidden_permutation
from aiayn.interop.marian_start import PAD_FIELD, PAD_PIECE, START_FIELD, fold_start, vocab_with_start
from aiayn.interop.marian_vocab import UnsupportedModel
from aiayn.interop.model_card import model_card

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


@dataclasses.dataclass(frozen=True, kw_only=True)
class MarianIds:
    """The ids the export's config.json and generation_config.json name: aiayn's, or for a joint vocabulary
    those of the appended start token (aiayn.interop.marian_start)."""
    src_vocab_size: int
    tgt_vocab_size: int
    pad: int  # transformers' pad token
    start: int  # decoder_start_token_id
    eos: int
    banned: tuple[int, ...]  # never outputs (bad_words_ids)
    aiayn_fields: dict  # config.json keys of the start-row form (empty without it)

    @classmethod
    def of(cls, cfg, tokenizer) -> "MarianIds":
        if isinstance(tokenizer, SeparateTokenizer):  # Marian's own form: starts from <pad>
            return cls(src_vocab_size=cfg.src_vocab_size, tgt_vocab_size=cfg.tgt_vocab_size, pad=tokenizer.pad_id,
                       start=tokenizer.bos_id, eos=tokenizer.eos_id, banned=(tokenizer.pad_id,), aiayn_fields={})
        appended = cfg.tgt_vocab_size
        assert cfg.src_vocab_size == appended, "a joint vocabulary has one size"
        return cls(src_vocab_size=appended + 1, tgt_vocab_size=appended + 1, pad=appended, start=appended,
                   eos=tokenizer.eos_id, banned=(tokenizer.pad_id, tokenizer.bos_id, appended),
                   aiayn_fields={START_FIELD: tokenizer.bos_id, PAD_FIELD: tokenizer.pad_id})


def marian_config(cfg, ids: MarianIds):
    import transformers

    return transformers.MarianConfig(
        vocab_size=ids.src_vocab_size, decoder_vocab_size=ids.tgt_vocab_size, d_model=cfg.d_model,
        encoder_layers=cfg.n_encoder_layers, decoder_layers=cfg.n_decoder_layers,
        encoder_attention_heads=cfg.n_heads, decoder_attention_heads=cfg.n_heads, encoder_ffn_dim=cfg.d_ff,
        decoder_ffn_dim=cfg.d_ff, max_position_embeddings=cfg.max_len, activation_function=ACTIVATIONS[cfg.activation],
        dropout=cfg.dropout, attention_dropout=cfg.attention_dropout, activation_dropout=0.0, scale_embedding=True,
        share_encoder_decoder_embeddings=cfg.share_embeddings,
        tie_word_embeddings=cfg.share_embeddings or cfg.tie_output,
        pad_token_id=ids.pad, eos_token_id=ids.eos, decoder_start_token_id=ids.start,
        forced_eos_token_id=None, **ids.aiayn_fields)


def length_limit(decode, data, model_cfg) -> int:
    """generate()'s max_length: aiayn's output limit a * |source| + b at the longest source the model was
    trained on (data.max_len tokens and </s>), plus the start token, which max_length counts; at most the
    model's positions. generate() has no limit that grows with the source."""
    outputs = int((data.max_len + 1) * decode.max_len_a + decode.max_len_b)
    return min(outputs + 1, model_cfg.max_len)


def generation_config(cfg, ids: MarianIds):
    """What generate() does by default: aiayn's decode section (see the module docstring)."""
    import transformers

    decode = cfg.decode
    return transformers.GenerationConfig(
        num_beams=decode.beam, length_penalty=float(decode.length_penalty), early_stopping=decode.early_stopping,
        do_sample=False, max_length=length_limit(decode, cfg.data, cfg.model),
        bad_words_ids=[[i] for i in dict.fromkeys(ids.banned)], forced_eos_token_id=None,
        pad_token_id=ids.pad, eos_token_id=ids.eos, decoder_start_token_id=ids.start)


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
    source.spm and target.spm, with vocab.json numbering its pieces as SentencePiece does, its <pad> renamed
    and the start token appended (aiayn.interop.marian_start)."""
    if isinstance(tokenizer, SeparateTokenizer):
        return tokenizer.files()
    sp = tokenizer.sp
    table = vocab_with_start({sp.id_to_piece(i): i for i in range(sp.get_piece_size())},
                             sp.id_to_piece(tokenizer.pad_id))
    eos, unk = sp.id_to_piece(tokenizer.eos_id), sp.id_to_piece(tokenizer.unk_id)
    specials = {eos: tokenizer.eos_id, unk: tokenizer.unk_id, PAD_PIECE: table[PAD_PIECE]}
    marian = SeparateTokenizer(source_model=tokenizer.proto, target_model=tokenizer.proto, vocab=table,
                               eos_token=eos, unk_token=unk, pad_token=PAD_PIECE, added_tokens=specials)
    return marian.files()


@torch.no_grad()
def _hf_model(model, cfg, tokenizer, ids: MarianIds):
    import transformers

    hf = transformers.MarianMTModel(marian_config(cfg, ids)).eval()
    weights = marian_weights(model, cfg)
    if ids.aiayn_fields:  # the start-row form (aiayn.interop.marian_start)
        start = weights["model.decoder.embed_tokens.weight"][tokenizer.bos_id]
        weights = marian_start.append_start_rows(weights)
        positions = hf.model.decoder.embed_positions.weight
        weights["model.decoder.embed_positions.weight"] = fold_start(positions.detach(), start)
        # saved, so that transformers (and CTranslate2's converter, which loads with it) read the folded row
        hf._keys_to_ignore_on_save = ["model.encoder.embed_positions.weight"]
    result = hf.load_state_dict(weights, strict=False)
    left = [k for k in result.missing_keys if "embed_positions" not in k]
    assert not left and not result.unexpected_keys, (left, result.unexpected_keys)
    return hf


def export_marian(model_dir: str | Path, out: str | Path, force: bool = False,
                  license: str = "other") -> tuple[Path, list[str]]:
    """`aiayn export-hf --model M --out DIR`: write the Marian directory (new or empty, or with force an
    earlier export-hf: nothing else is ever replaced) with its model card, README.md, whose front matter
    names `license` (a Hugging Face hub licence id). Returns (DIR, notes for the user)."""
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
    notes = _notes(cfg.decode, tokenizer)
    ids = MarianIds.of(cfg.model, tokenizer)
    hf = _hf_model(model.float().eval(), cfg.model, tokenizer, ids)
    hf.generation_config = generation_config(cfg, ids)
    with atomic_dir(out) as tmp, _quiet(transformers):  # transformers' progress bars off
        hf.save_pretrained(tmp)
        for name, data in tokenizer_files(tokenizer).items():
            (tmp / name).write_bytes(data)
        card = model_card(model_dir=source, cfg=cfg, license=license, joint=bool(ids.aiayn_fields),
                          max_length=hf.generation_config.max_length)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        marker = {"output": "export-hf", "model": str(source.resolve()), "files": sorted(p.name for p in tmp.iterdir())}
        (tmp / EXPORT_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    return Path(out), notes


def _notes(decode, tokenizer) -> list[str]:
    notes = []
    if isinstance(tokenizer, SeparateTokenizer) and tokenizer.separate_vocabs:
        notes.append("this model has separate source and target vocabularies, which ct2-transformers-converter "
                     "cannot convert (it reads one vocabulary for both sides); aiayn export writes it for "
                     "CTranslate2 directly")
    if decode.length_penalty_form == "hf" or decode.beam == 1:
        return notes
    return notes + [f"this model's beam search uses GNMT's length penalty (decode.length_penalty_form=gnmt); "
                    f"generate() divides by |Y|^{decode.length_penalty:g} instead, so beam outputs may differ: "
                    f"aiayn translate --length-penalty-form hf gives generate()'s"]
