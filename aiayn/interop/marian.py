"""Import a Hugging Face Marian (OPUS-MT) model: a `save_pretrained` directory, or (online) a hub name such
as Helsinki-NLP/opus-mt-de-en -> an ordinary aiayn checkpoint directory (model.safetensors, config.yaml,
the tokenizer files of aiayn.data.separate_tokenizer, info.json) that every command accepts.
Needs the extra aiayn[hf] (transformers, sentencepiece); transformers is imported only here.

Marian is the paper's architecture (post-LN, sinusoids, embeddings x sqrt(d_model), tied embeddings) with
three differences, each mapped exactly:
- FFN activation swish (SiLU) in most OPUS-MT models: model.activation = silu;
- final_logits_bias, a bias on the logits: model.output_bias (generator.bias);
- sinusoids laid out as [sin | cos] halves instead of interleaved (§3.5: sin on even, cos on odd dims).
  We permute the hidden dimension instead of adding a positional-layout option: hidden coordinate j of
  aiayn is coordinate P[j] of Marian, P = (0, D/2, 1, D/2 + 1, ...). Every weight that reads the residual
  stream has its input columns permuted, every weight, bias or LayerNorm parameter that writes it has its
  output rows permuted; LayerNorm and the attention heads (whose dimensions are untouched) are indifferent
  to the order, so the network computes the same logits and attention maps. Why: the imported model is
  then an ordinary aiayn Transformer with the paper's positions, and everything that reads one
  (training, export to CTranslate2, inspection, old checkpoints) needs no new case.
The decoder starts from <pad> (decoder_start_token_id): the tokenizer's bos_id is the pad id, which
decoding never outputs. A directory that `aiayn export-hf` wrote from a joint vocabulary (config.json names
aiayn_start_token_id: aiayn.interop.marian_start) is read back to that model: the appended start token
goes, the decoder's position-0 row gives back the sinusoid, and the tokenizer is aiayn's joint one
(aiayn.interop.marian_vocab.load_tokenizer).
Decoding of an imported model is generate()'s with the checkpoint's own generation config
(aiayn.interop.marian_generation): transformers' length penalty (|Y|^alpha, decode.length_penalty_form: hf),
num_beams, length_penalty, early_stopping, the length limits and no_repeat_ngram_size (transformers'
defaults where the model sets none: beam 1, at most max_length 20 - 1 tokens); a setting aiayn cannot apply
(repetition_penalty, forced tokens, ...) is named in one warning at import.
float16 and bfloat16 checkpoints are imported in float32; the positions check judges their sinusoids at
the checkpoint's precision.

Configs aiayn cannot represent exactly are refused with an error that names the field.
"""

import contextlib
import copy
import logging
from pathlib import Path

import torch

from aiayn.checkpoint import check_finite
from aiayn.errors import AiaynError
from aiayn.interop.marian_generation import apply_generation
from aiayn.interop.marian_languages import given_pair, language_pair
from aiayn.interop.marian_start import PAD_FIELD, START_FIELD, unfold_start
from aiayn.interop.marian_vocab import UnsupportedModel, load_tokenizer, read_json
from aiayn.model import ModelConfig, build_model
from aiayn.model.build import FieldError
from aiayn.model.embedding import sinusoid_table

log = logging.getLogger(__name__)

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}  # transformers -> aiayn
HUB_FILES = ["config.json", "generation_config.json", "*.safetensors", "pytorch_model.bin", "source.spm",
             "target.spm", "vocab.json", "target_vocab.json", "tokenizer_config.json", "special_tokens_map.json"]
# Keys of older (BART-style) Marian configs that transformers' MarianMTModel ignores: a value other than
# these would describe a different network than the one transformers (and aiayn) run.
LEGACY_KEYS = {"normalize_before": False, "normalize_embedding": False, "add_final_layer_norm": False,
               "add_bias_logits": False, "static_position_embeddings": True, "scale_embedding": True}


def resolve_source(src: str) -> Path:
    """A local save_pretrained directory, else a hub name downloaded with huggingface_hub (online only)."""
    path = Path(src)
    if path.exists():
        if not path.is_dir():
            raise AiaynError(f"{src}: not a directory; give a directory written by save_pretrained or a hub "
                             f"name such as Helsinki-NLP/opus-mt-de-en")
        return path
    if src.count("/") != 1 or src.startswith(("/", ".")):
        raise AiaynError(f"{src}: no such directory (and not a hub name such as Helsinki-NLP/opus-mt-de-en)")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as err:
        raise AiaynError(f"{src}: no such directory; downloading a hub model needs huggingface_hub: pip install "
                         f"'aiayn[hf]' ({err})") from None
    try:
        return Path(snapshot_download(repo_id=src, allow_patterns=HUB_FILES))
    except Exception as err:  # offline, unknown repository, ...: huggingface_hub raises many types
        reason = " ".join(str(err).split())[:200]
        raise AiaynError(f"{src}: not a local directory, and downloading it from the Hugging Face hub failed "
                         f"({type(err).__name__}: {reason}); check the name and the network, or give a local "
                         f"directory written by save_pretrained") from None


def check_config(path: Path, hf) -> None:
    """Refuse, naming the field, what aiayn's Transformer cannot compute exactly."""
    where = f"{path}/config.json"
    for key, expected in LEGACY_KEYS.items():
        value = getattr(hf, key, expected)
        if value != expected:
            raise UnsupportedModel(f"{where}: {key}={value!r}; aiayn imports Marian models with {key}="
                                   f"{expected!r} only (post-LN, fixed sinusoids, embeddings x sqrt(d_model), no "
                                   f"extra LayerNorm or logit bias switch)")
    if hf.activation_function not in ACTIVATIONS:
        raise UnsupportedModel(f"{where}: activation_function={hf.activation_function!r} is not supported; "
                               f"aiayn has {sorted(ACTIVATIONS)}")
    pairs = (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim"))
    for a, b in pairs:
        if getattr(hf, a) != getattr(hf, b):
            raise UnsupportedModel(f"{where}: {a}={getattr(hf, a)} but {b}={getattr(hf, b)}; aiayn's encoder and "
                                   f"decoder share one value")
    if hf.d_model % hf.encoder_attention_heads or hf.d_model % 2:
        raise UnsupportedModel(f"{where}: d_model={hf.d_model} must be even and divisible by "
                               f"encoder_attention_heads={hf.encoder_attention_heads}")
    if hf.share_encoder_decoder_embeddings and not hf.tie_word_embeddings:
        raise UnsupportedModel(f"{where}: tie_word_embeddings=false with share_encoder_decoder_embeddings=true; "
                               f"aiayn ties the output projection whenever source and target embeddings are shared")
    if hf.share_encoder_decoder_embeddings and hf.decoder_vocab_size != hf.vocab_size:
        raise UnsupportedModel(f"{where}: decoder_vocab_size={hf.decoder_vocab_size} differs from vocab_size="
                               f"{hf.vocab_size} although share_encoder_decoder_embeddings=true")


def model_config(hf, output_bias: bool) -> ModelConfig:
    shared = hf.share_encoder_decoder_embeddings
    if hf.activation_dropout or hf.encoder_layerdrop or hf.decoder_layerdrop:
        log.warning("activation_dropout and layerdrop only matter in training and are not imported")
    cfg = ModelConfig(
        arch="transformer", src_vocab_size=hf.vocab_size,
        tgt_vocab_size=hf.vocab_size if shared else hf.decoder_vocab_size, pad_id=hf.pad_token_id,
        d_model=hf.d_model, n_heads=hf.encoder_attention_heads, d_ff=hf.encoder_ffn_dim,
        n_encoder_layers=hf.encoder_layers, n_decoder_layers=hf.decoder_layers, dropout=float(hf.dropout),
        attention_dropout=float(hf.attention_dropout), activation=ACTIVATIONS[hf.activation_function],
        norm_first=False, positional="sinusoidal", max_len=hf.max_position_embeddings, share_embeddings=shared,
        tie_output=bool(hf.tie_word_embeddings), layer_norm_eps=1e-5, output_bias=output_bias)
    try:
        return cfg.validate()
    except FieldError as err:  # e.g. max_position_embeddings < 2, dropout >= 1
        raise UnsupportedModel(f"config.json: {err} (the model config aiayn derived from it)") from None


def hidden_permutation(d_model: int) -> torch.Tensor:
    """P with aiayn coordinate j = Marian coordinate P[j]: (0, D/2, 1, D/2 + 1, ...), so that the
    [sin | cos] halves of Marian's sinusoids become the interleaved ones of §3.5."""
    half = torch.arange(d_model // 2)
    return torch.stack([half, half + d_model // 2], dim=1).flatten()


def _check_positions(path: Path, hf_model, perm: torch.Tensor, dtype: torch.dtype = torch.float32) -> None:
    """Marian's position tables must be the fixed sinusoids (a checkpoint may carry a learned table), judged
    at the checkpoint's precision `dtype`: the table rounded to it, within one rounding step (values <= 1)."""
    tolerance = max(1e-4, torch.finfo(dtype).eps)
    for side in ("encoder", "decoder"):
        table = getattr(hf_model.model, side).embed_positions.weight.detach().float()
        expected = sinusoid_table(table.size(0), table.size(1)).to(dtype).float()
        if (table[:, perm] - expected).abs().max() > tolerance:
            raise UnsupportedModel(f"{path}: model.{side}.embed_positions.weight is not the sinusoid table "
                                   f"(learned or altered positions); aiayn's positions are fixed sinusoids")


def _layer_weights(prefix: str, layer, perm: torch.Tensor, decoder: bool) -> dict:
    """aiayn names -> tensors of one Marian layer, hidden dimension permuted (see the module docstring)."""
    def attention(name, attn):
        return {f"{name}.in_proj.weight": torch.cat([attn.q_proj.weight, attn.k_proj.weight,
                                                     attn.v_proj.weight])[:, perm],  # reads the stream
                f"{name}.in_proj.bias": torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias]),
                f"{name}.out_proj.weight": attn.out_proj.weight[perm],  # writes it
                f"{name}.out_proj.bias": attn.out_proj.bias[perm]}

    def norm(name, ln):
        return {f"{name}.weight": ln.weight[perm], f"{name}.bias": ln.bias[perm]}

    out = {**attention("self_attn", layer.self_attn), **norm("self_attn_norm", layer.self_attn_layer_norm),
           "ffn.w_1.weight": layer.fc1.weight[:, perm], "ffn.w_1.bias": layer.fc1.bias,
           "ffn.w_2.weight": layer.fc2.weight[perm], "ffn.w_2.bias": layer.fc2.bias[perm],
           **norm("ffn_norm", layer.final_layer_norm)}
    if decoder:
        out.update({**attention("cross_attn", layer.encoder_attn), **norm("cross_attn_norm",
                                                                          layer.encoder_attn_layer_norm)})
    return {f"{prefix}.{k}": v for k, v in out.items()}


def convert_weights(hf_model, model) -> dict:
    """The aiayn state dict (every name of `model`, tied ones included) from a MarianMTModel."""
    perm = hidden_permutation(model.d_model)
    state = {"src_embed.weight": hf_model.model.encoder.embed_tokens.weight[:, perm],
             "tgt_embed.weight": hf_model.model.decoder.embed_tokens.weight[:, perm],
             "generator.weight": hf_model.lm_head.weight[:, perm]}
    if model.generator.bias is not None:
        state["generator.bias"] = hf_model.final_logits_bias[0]
    for i, layer in enumerate(hf_model.model.encoder.layers):
        state.update(_layer_weights(f"encoder_layers.{i}", layer, perm, decoder=False))
    for i, layer in enumerate(hf_model.model.decoder.layers):
        state.update(_layer_weights(f"decoder_layers.{i}", layer, perm, decoder=True))
    return {k: v.detach().float().contiguous() for k, v in state.items()}


def _load_hf(path: Path):
    try:
        import transformers
    except ImportError as err:
        raise AiaynError(f"import-hf needs transformers: pip install 'aiayn[hf]' ({err})") from None
    kind = read_json(path / "config.json").get("model_type")
    if kind != "marian":
        raise UnsupportedModel(f"{path}/config.json: model_type={kind!r}; aiayn imports Marian models "
                               f"(model_type marian, e.g. Helsinki-NLP/opus-mt-*)")
    with _quiet(transformers):
        try:
            hf = transformers.MarianConfig.from_pretrained(path)
        except Exception as err:  # transformers' own validation errors (a field of the wrong type) are many types
            raise UnsupportedModel(f"{path}/config.json: transformers cannot read it ({_first_line(err)})") from None
        check_config(path, hf)
        try:  # mismatched shapes are reported below, by name, rather than in transformers' report
            hf_model, info = transformers.MarianMTModel.from_pretrained(path, output_loading_info=True,
                                                                        ignore_mismatched_sizes=True)
        except Exception as err:  # safetensors, torch and transformers raise many types for damaged weights
            raise AiaynError(f"{path}: transformers could not load the model weights ({_first_line(err)}); the "
                             f"directory must hold what save_pretrained writes") from None
    _check_loading_info(path, info)
    dtype = checkpoint_dtype(hf_model, hf)
    return hf, hf_model.float().eval(), dtype


def checkpoint_dtype(hf_model, hf) -> torch.dtype:
    """The precision the weights were saved in: float16 or bfloat16 when transformers loaded them so, or when
    config.json names it (transformers may have cast them to float32 on loading), else float32."""
    named = str(getattr(hf, "dtype", None) or getattr(hf, "torch_dtype", None) or "").replace("torch.", "")
    for dtype in (torch.float16, torch.bfloat16):
        if any(p.dtype == dtype for p in hf_model.parameters()) or named == str(dtype).replace("torch.", ""):
            return dtype
    return torch.float32


@contextlib.contextmanager
def _quiet(transformers):
    """transformers' own logging and progress bars off while it loads (its load report of a bad model ran
    to 48 lines before aiayn's one-line error, which names the same keys); restored afterwards."""
    logging_ = transformers.utils.logging
    verbosity, bars = logging_.get_verbosity(), logging_.is_progress_bar_enabled()
    logging_.set_verbosity_error()
    logging_.disable_progress_bar()
    try:
        yield
    finally:
        logging_.set_verbosity(verbosity)
        if bars:
            logging_.enable_progress_bar()


def _check_loading_info(path: Path, info: dict) -> None:
    """Weights transformers had to initialize at random (missing from the files, or of another shape), or
    left unused: the import would run another network than the one saved."""
    problems = [f"{k}: missing from the files" for k in sorted(info.get("missing_keys") or ())]
    problems += [f"{k}: {tuple(saved)} in the files, {tuple(wanted)} in config.json's model"
                 for k, saved, wanted in sorted(info.get("mismatched_keys") or ())]
    problems += [f"{k}: in the files but not in config.json's model" for k in sorted(info.get("unexpected_keys") or ())]
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise UnsupportedModel(f"{path}: the weights do not fit config.json ({'; '.join(problems[:3])}{more}); "
                               f"the directory must hold what save_pretrained wrote for this model")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160] if text else ''}"


def _without_start_row(path: Path, hf, hf_model, dtype: torch.dtype):
    """An export of a joint vocabulary in the start-row form (aiayn.interop.marian_start) -> the config of
    aiayn's model, with hf_model changed in place to it (the appended token's rows gone, the decoder's
    position-0 row the sinusoid again); any other directory: `hf` as it is."""
    start, pad = getattr(hf, START_FIELD, None), getattr(hf, PAD_FIELD, None)
    if start is None and pad is None:
        return hf
    appended = hf.vocab_size - 1
    decoder = hf_model.model.decoder
    fits = (_is_id(start, appended) and _is_id(pad, appended) and hf.pad_token_id == appended
            and hf.decoder_start_token_id == appended and hf.decoder_vocab_size == hf.vocab_size
            and not decoder.embed_tokens.weight[appended].any())
    table = None
    if fits:
        perm = hidden_permutation(hf.d_model)
        row0 = sinusoid_table(1, hf.d_model)[0][torch.argsort(perm)]  # Marian's [sin | cos] layout
        tolerance = max(1e-4, torch.finfo(dtype).eps)
        table = unfold_start(decoder.embed_positions.weight.detach(), decoder.embed_tokens.weight[start].detach(),
                             row0, tolerance)
    if table is None:
        raise UnsupportedModel(f"{path}/config.json: {START_FIELD}={start!r} and {PAD_FIELD}={pad!r} name aiayn's "
                               f"start-row form, but the model is not in it (a last token <pad> with a zero "
                               f"embedding that starts the decoder, and the start token's embedding in the "
                               f"decoder's position-0 row); export the model again with aiayn export-hf")
    with torch.no_grad():
        decoder.embed_positions.weight.copy_(table)
        modules = {id(m): m for m in (hf_model.model.encoder.embed_tokens, decoder.embed_tokens, hf_model.lm_head)}
        for module in modules.values():
            module.weight = torch.nn.Parameter(module.weight[:-1].detach(), requires_grad=False)
        hf_model.final_logits_bias = hf_model.final_logits_bias[:, :-1]
    generation = hf_model.generation_config  # aiayn bans its <pad> and <s> itself; the appended token is gone
    if generation.bad_words_ids:
        generation.bad_words_ids = [ids for ids in generation.bad_words_ids
                                    if list(ids) not in ([pad], [start], [appended])] or None
    hf = copy.deepcopy(hf)
    hf.vocab_size = hf.decoder_vocab_size = appended
    hf.pad_token_id, hf.decoder_start_token_id = pad, start
    return hf


def _is_id(value, size: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < size


def experiment_config(path: Path, model_cfg: ModelConfig, generation, pair: tuple[str, str] | None = None):
    """config.yaml of the import: the model; decoding as transformers' generate() would do it with the model's
    generation config (aiayn.interop.marian_generation); the languages, when known (`pair`, as
    aiayn.interop.marian_languages finds it; info.json records them too, which says they are the model's and
    not data's defaults)."""
    from aiayn.config import ExperimentConfig

    cfg = ExperimentConfig(model=model_cfg)
    apply_generation(cfg.decode, generation, model_cfg.pad_id, str(path))
    if pair:
        cfg.data.src_lang, cfg.data.tgt_lang = pair
    return cfg


@torch.no_grad()
def marian_to_aiayn(path: Path, pair: tuple[str, str] | None = None):
    """A save_pretrained directory -> (aiayn Transformer with Marian's weights, ExperimentConfig, tokenizer);
    pair: the (source, target) languages, when known."""
    hf, hf_model, dtype = _load_hf(path)
    weights = next((path / n for n in ("model.safetensors", "pytorch_model.bin") if (path / n).is_file()), path)
    check_finite(hf_model.state_dict(), weights)  # NaN or inf would be imported and translate to one word
    hf = _without_start_row(path, hf, hf_model, dtype)
    tokenizer = load_tokenizer(path, hf)
    model_cfg = model_config(hf, output_bias=bool(hf_model.final_logits_bias.any()))
    model = build_model(model_cfg).eval()
    _check_positions(path, hf_model, hidden_permutation(model_cfg.d_model), dtype)
    model.load_state_dict(convert_weights(hf_model, model), strict=True)
    return model, experiment_config(path, model_cfg, hf_model.generation_config, pair), tokenizer


def import_marian(src: str, out: str | Path, force: bool = False, src_lang: str | None = None,
                  tgt_lang: str | None = None) -> Path:
    """`aiayn import-hf SRC --out DIR [--src-lang de --tgt-lang en]`: convert and write an aiayn checkpoint
    directory at `out` (new or empty, or with force an earlier import: nothing else is ever replaced).
    Its info.json records the languages (src_lang, tgt_lang) when the options or the folder name them
    (aiayn.interop.marian_languages); the server's LibreTranslate API lists them."""
    from aiayn.checkpoint import check_output_dir, save_checkpoint

    given = given_pair(src_lang, tgt_lang)
    check_output_dir(out, "import", force, inputs=[src] if Path(src).exists() else [])  # before any download
    path = resolve_source(str(src))
    pair = language_pair(path, str(src), given)
    model, cfg, tokenizer = marian_to_aiayn(path, pair)
    languages = {"src_lang": pair[0], "tgt_lang": pair[1]} if pair else {}
    save_checkpoint(out, model, cfg, tokenizer, info={"output": "import", "source": str(src), **languages})
    return Path(out)
