"""The tokenizer files of a Hugging Face Marian directory -> aiayn's SeparateTokenizer, checked against
the model's config.json: every id the model expects (pad, eos, the vocabulary sizes) must be the
tokenizer's, and every added token must split text as aiayn does (no lstrip/rstrip/single_word)."""

from pathlib import Path

from aiayn.data import separate_tokenizer
from aiayn.data.separate_tokenizer import SeparateTokenizer, TokenizerFileError
from aiayn.errors import AiaynError
from aiayn.interop.marian_start import START_FIELD, vocab_without_start


class UnsupportedModel(AiaynError):
    """A model (config.json or tokenizer files) that aiayn cannot represent exactly."""


def read_json(file: Path, default=None) -> dict:
    """A JSON object of a Marian directory; `default` (when given) stands in for an absent file."""
    return separate_tokenizer.read_json(file, *(() if default is None else (default,)),
                                        missing="a Marian model directory (save_pretrained) has it",
                                        error=UnsupportedModel)


def _content(token) -> str:
    return token.get("content") if isinstance(token, dict) else token


def _added_tokens(config: dict, vocab: dict, file: Path) -> dict[str, int]:
    """content -> id of every token MarianTokenizer splits text at: the special tokens and added tokens."""
    added = {}
    for key, entry in config.get("added_tokens_decoder", {}).items():
        for flag in ("lstrip", "rstrip", "single_word"):
            if isinstance(entry, dict) and entry.get(flag):
                raise UnsupportedModel(f"{file}: added_tokens_decoder[{key}].{flag}=true; aiayn's tokenizer "
                                       f"splits at added tokens without stripping spaces around them")
        added[_content(entry)] = int(key)
    named = [config.get(k, d) for k, d in (("eos_token", "</s>"), ("unk_token", "<unk>"), ("pad_token", "<pad>"))]
    extra = config.get("additional_special_tokens") or config.get("extra_special_tokens") or []
    for token in [_content(t) for t in named + list(extra)]:
        if token not in added and token not in vocab:
            raise UnsupportedModel(f"{file}: the special token {token!r} is not in vocab.json; transformers "
                                   f"would give it a new id that the model has no embedding for")
        added.setdefault(token, vocab.get(token))
    return added


def load_marian_tokenizer(path: Path, hf_config) -> SeparateTokenizer:
    """source.spm, target.spm, vocab.json [target_vocab.json], tokenizer_config.json of a save_pretrained
    directory -> a SeparateTokenizer whose ids are MarianTokenizer's, checked against the model config."""
    file = path / "tokenizer_config.json"
    config = read_json(file, {})
    vocab = read_json(path / "vocab.json")
    target_vocab = read_json(path / "target_vocab.json") if config.get("separate_vocabs") else None
    try:
        tok = SeparateTokenizer(
            source_model=_spm_bytes(path / "source.spm"), target_model=_spm_bytes(path / "target.spm"),
            vocab=vocab, target_vocab=target_vocab, eos_token=_content(config.get("eos_token", "</s>")),
            unk_token=_content(config.get("unk_token", "<unk>")), pad_token=_content(config.get("pad_token", "<pad>")),
            added_tokens=_added_tokens(config, vocab, file))
    except TokenizerFileError as err:
        raise UnsupportedModel(f"{path}: {err}") from None
    _check_ids(tok, hf_config, path)
    return tok


def _spm_bytes(file: Path) -> bytes:
    if not file.is_file():
        raise UnsupportedModel(f"{file}: missing; Marian models have source.spm and target.spm (SentencePiece)")
    return file.read_bytes()


def _check_ids(tok: SeparateTokenizer, hf_config, path: Path) -> None:
    """The ids and sizes the model was built for must be the tokenizer's."""
    target_size = hf_config.vocab_size if hf_config.share_encoder_decoder_embeddings else \
        hf_config.decoder_vocab_size
    checks = (("vocab_size", hf_config.vocab_size, tok.src_vocab_size, "pieces in vocab.json"),
              ("decoder_vocab_size", target_size, tok.tgt_vocab_size, "pieces in the target id table"),
              ("pad_token_id", hf_config.pad_token_id, tok.pad_id, f"the id of {tok.pad_token} in vocab.json"),
              ("eos_token_id", hf_config.eos_token_id, tok.eos_id, f"the id of {tok.eos_token} in vocab.json"))
    for field, model_value, tokenizer_value, what in checks:
        if model_value != tokenizer_value:
            raise UnsupportedModel(f"{path}/config.json: {field}={model_value!r} but the tokenizer has "
                                   f"{tokenizer_value} ({what}); the model and tokenizer files do not belong together")


def load_tokenizer(path: Path, hf_config):
    """The tokenizer of a Marian directory: MarianTokenizer's files as a SeparateTokenizer when the decoder
    starts from <pad> (Marian's way); aiayn's joint tokenizer when it starts from another token and the
    files are what `aiayn export-hf` writes for one (joint_tokenizer); anything else is refused."""
    if hf_config.decoder_start_token_id == hf_config.pad_token_id:
        return load_marian_tokenizer(path, hf_config)
    joint = joint_tokenizer(path, hf_config)
    if joint is None:
        raise UnsupportedModel(f"{path}/config.json: decoder_start_token_id={hf_config.decoder_start_token_id} "
                               f"differs from pad_token_id={hf_config.pad_token_id}; aiayn starts Marian decoders "
                               f"from <pad>, or from <s> of one joint SentencePiece vocabulary (as export-hf writes)")
    return joint


def joint_tokenizer(path: Path, hf_config):
    """aiayn's joint Tokenizer when source.spm and target.spm are one SentencePiece model, vocab.json numbers
    its pieces as SentencePiece does (in the start-row form: with <pad> renamed and the start token
    appended), and the model's start, pad and </s> ids are the SentencePiece model's
    <s>, <pad> and </s>; else None."""
    from aiayn.data.tokenizer import Tokenizer

    config = read_json(path / "tokenizer_config.json", {})
    source = _spm_bytes(path / "source.spm")
    if config.get("separate_vocabs") or source != _spm_bytes(path / "target.spm"):
        return None
    try:
        tok = Tokenizer(source)
    except RuntimeError:
        return None
    pieces = {tok.sp.id_to_piece(i): i for i in range(tok.vocab_size)}
    ids = (hf_config.decoder_start_token_id, hf_config.pad_token_id, hf_config.eos_token_id)
    same_sizes = hf_config.vocab_size == tok.vocab_size == (
        hf_config.vocab_size if hf_config.share_encoder_decoder_embeddings else hf_config.decoder_vocab_size)
    vocab = read_json(path / "vocab.json")
    if getattr(hf_config, START_FIELD, None) is not None:  # the start-row form (aiayn.interop.marian_start)
        vocab = vocab_without_start(vocab, tok.sp.id_to_piece(tok.pad_id))
    if vocab != pieces or ids != (tok.bos_id, tok.pad_id, tok.eos_id) or not same_sizes:
        return None
    return tok
