"""Separate source and target SentencePiece models with an external id table: the tokenizer of Marian
(OPUS-MT) models, in the files transformers' MarianTokenizer reads (a model directory that holds them
can also be opened with MarianTokenizer.from_pretrained):

  source.spm, target.spm   SentencePiece models; they only cut text into pieces (their own ids are unused)
  vocab.json               the id table {piece: id}, ids 0..V-1 (Marian: </s> = 0, <pad> = V - 1)
  target_vocab.json        the target side's table, only when it differs (separate_vocabs: true)
  tokenizer_config.json    eos_token, unk_token, pad_token, separate_vocabs, added_tokens_decoder

Ids are those of transformers.MarianTokenizer (5.x), piece for piece:
- the text is first split at the special tokens written literally (</s>, <unk>, <pad>, and any other
  added token); each of those is its own id;
- in every other segment, a leading language tag (">>fr<<": from ">>" to the first "<<") is one piece and
  the rest is cut by the side's SentencePiece model;
- a piece missing from the table (a character the SentencePiece model never saw, an unknown tag) is <unk>.
(transformers 4.x cut the tag with the greedy pattern ">>.+<<" and deleted tags anywhere in the text: the
same ids for the usual ">>fra<< text", other ids for a second tag or a "<<" later in the text.)
The decoder starts from <pad> (Marian's decoder_start_token_id), so bos_id = pad_id; it is never output.
decode() drops every special token, as MarianTokenizer.decode(ids, skip_special_tokens=True) does.

aiayn trains tokenizers of this kind too (data.joint_vocab: false; SeparateTokenizer.train): a source and a
target SentencePiece model, each numbering its own pieces <pad> 0, <unk> 1, </s> 2 (no <s>), and those
numbers are the id tables (vocab.json: the source's, target_vocab.json: the target's), so both sides share
the special ids. The decoder starts from <pad> as in Marian models: the start vector is the <pad> row of
the target embedding (learned in a Transformer; zero in an RNN, whose embeddings keep the padding row at
zero, so the first step sees only the encoder's state there).
"""

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import sentencepiece as spm

from aiayn.data.spm_training import train_spm
from aiayn.errors import AiaynError

log = logging.getLogger(__name__)
SPIECE_UNDERLINE = "\u2581"


class TokenizerFileError(AiaynError):
    """A tokenizer file of a model directory that cannot be used as it is."""


@dataclass
class _Side:
    """One side (source or target): its SentencePiece model and id table."""

    model: bytes
    sp: spm.SentencePieceProcessor
    table: dict[str, int]  # piece -> id
    pieces: list[str]  # id -> piece


def _processor(model: bytes, file: str) -> spm.SentencePieceProcessor:
    if not model:  # sentencepiece would accept it as a model of 0 pieces that fails at the first sentence
        raise TokenizerFileError(f"{file}: empty file (0 bytes); copy it again from where the model came from")
    try:
        return spm.SentencePieceProcessor(model_proto=model)
    except RuntimeError as err:
        raise TokenizerFileError(f"{file}: not a SentencePiece model ({str(err).strip()[:120]}); the file is "
                                 f"damaged or from another program") from None


def _pieces(table: dict, file: str) -> list[str]:
    """id -> piece of an id table, which must number its pieces 0..V-1."""
    ids = sorted(i for i in table.values() if isinstance(i, int) and not isinstance(i, bool))
    if ids != list(range(len(table))):
        raise TokenizerFileError(f"{file}: the id table must number its pieces 0..{len(table) - 1}, each id "
                                 f"once; the file is damaged or not a Marian vocabulary")
    return sorted(table, key=table.get)


def language_tag(text: str) -> tuple[list[str], str]:
    """A leading target-language tag such as ">>fr<<" as its own piece: (["<tag>"] or [], the rest)."""
    if text.startswith(">>") and (end := text.find("<<")) != -1:
        return [text[: end + 2]], text[end + 2:]
    return [], text


class SeparateTokenizer:
    name = "vocab.json"  # the file named in error messages

    def __init__(self, *, source_model: bytes, target_model: bytes, vocab: dict[str, int],
                 target_vocab: dict[str, int] | None = None, eos_token: str = "</s>", unk_token: str = "<unk>",
                 pad_token: str = "<pad>", added_tokens: dict[str, int] | None = None):
        """added_tokens: the tokens the text is split at (content -> id); default the three specials."""
        source_table, target_table = dict(vocab), dict(vocab if target_vocab is None else target_vocab)
        self._source = _Side(source_model, _processor(source_model, "source.spm"), source_table,
                             _pieces(source_table, "vocab.json"))
        self._target = _Side(target_model, _processor(target_model, "target.spm"), target_table,
                             _pieces(target_table, "target_vocab.json" if target_vocab else "vocab.json"))
        self.separate_vocabs = target_vocab is not None
        self.eos_token, self.unk_token, self.pad_token = eos_token, unk_token, pad_token
        for side, file in ((self._source, "vocab.json"), (self._target, "target_vocab.json")):
            missing = [t for t in (eos_token, unk_token, pad_token) if t not in side.table]
            if missing:
                raise TokenizerFileError(f"{file}: has no {', '.join(missing)}; the special tokens of "
                                         f"tokenizer_config.json must be in the id table")
        self.pad_id, self.unk_id, self.eos_id = (vocab[t] for t in (pad_token, unk_token, eos_token))
        if target_vocab is not None and any(vocab[t] != target_vocab[t] for t in (pad_token, unk_token, eos_token)):
            raise TokenizerFileError("vocab.json and target_vocab.json give the special tokens different ids; "
                                     "aiayn needs one pad, unk and eos id for both sides")
        self.bos_id = self.pad_id  # Marian's decoder starts from <pad> (decoder_start_token_id)
        self.added_tokens = dict(added_tokens) if added_tokens is not None else \
            {t: vocab[t] for t in (eos_token, unk_token, pad_token)}
        bad = [t for t, i in self.added_tokens.items() if not 0 <= i < len(self._source.pieces)]
        if bad:
            raise TokenizerFileError(f"tokenizer_config.json: the added token {bad[0]!r} has an id outside vocab.json "
                                     f"(0..{len(self._source.pieces) - 1})")
        self._special_ids = set(self.added_tokens.values()) | {self.pad_id, self.unk_id, self.eos_id}
        self.src_vocab_size, self.tgt_vocab_size = len(self._source.pieces), len(self._target.pieces)
        self.vocab_size = self.tgt_vocab_size

    @classmethod
    def train(cls, source: list[str], target: list[str], vocab_size: int, byte_fallback: bool,
              lowercase: bool = False, user_defined_symbols: tuple[str, ...] = ()) -> "SeparateTokenizer":
        """A BPE model of vocab_size pieces for each side, trained on that side's sentences only (lowercase: both
        fold case, see train_spm; user_defined_symbols: source pieces kept whole, such as corpus tags)."""

        models = [train_spm(sentences, vocab_size, byte_fallback, bos=False, lowercase=lowercase,
                            user_defined_symbols=symbols)
                  for sentences, symbols in ((source, user_defined_symbols), (target, ()))]
        tables = [_own_table(model) for model in models]
        tok = cls(source_model=models[0], target_model=models[1], vocab=tables[0], target_vocab=tables[1])
        log.info("trained separate BPE vocabularies: %d source and %d target pieces", tok.src_vocab_size,
                 tok.tgt_vocab_size)
        return tok

    # ---- files --------------------------------------------------------------------------------------
    @classmethod
    def load(cls, directory: str | Path) -> "SeparateTokenizer":
        """From a directory holding source.spm, target.spm, vocab.json and tokenizer_config.json."""
        directory = Path(directory)
        config = read_json(directory / "tokenizer_config.json", {})
        target_vocab = read_json(directory / "target_vocab.json") if config.get("separate_vocabs") else None
        try:
            added = {_content(entry): int(i) for i, entry in config.get("added_tokens_decoder", {}).items()}
        except (ValueError, TypeError, AttributeError):
            raise TokenizerFileError(f"{directory / 'tokenizer_config.json'}: added_tokens_decoder must map ids to "
                                     f"tokens; the file is damaged") from None
        return cls(source_model=_read_bytes(directory / "source.spm"),
                   target_model=_read_bytes(directory / "target.spm"),
                   vocab=read_json(directory / "vocab.json"), target_vocab=target_vocab,
                   eos_token=_content(config.get("eos_token", "</s>")),
                   unk_token=_content(config.get("unk_token", "<unk>")),
                   pad_token=_content(config.get("pad_token", "<pad>")), added_tokens=added or None)

    def files(self) -> dict[str, bytes]:
        """name -> bytes of every file of this tokenizer (written into checkpoint directories)."""
        added = {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                          "single_word": False, "special": True} for t, i in sorted(self.added_tokens.items(),
                                                                                    key=lambda item: item[1])}
        config = {"tokenizer_class": "MarianTokenizer", "eos_token": self.eos_token, "unk_token": self.unk_token,
                  "pad_token": self.pad_token, "separate_vocabs": self.separate_vocabs,
                  "added_tokens_decoder": added}
        files = {"source.spm": self._source.model, "target.spm": self._target.model,
                 "vocab.json": _json_bytes(self._source.table),
                 "tokenizer_config.json": _json_bytes(config)}
        if self.separate_vocabs:
            files["target_vocab.json"] = _json_bytes(self._target.table)
        return files

    @property
    def proto(self) -> bytes:
        """Every file in one byte string: equal exactly when two tokenizers are the same."""
        return b"\0".join(name.encode() + b"\0" + data for name, data in sorted(self.files().items()))

    # ---- text <-> ids ---------------------------------------------------------------------------------
    def _split(self, text: str) -> list[str]:
        """text -> segments, each either an added token or text between them (MarianTokenizer's split)."""
        segments, start, i = [], 0, 0
        tokens = sorted(self.added_tokens, key=len, reverse=True)
        while i < len(text):
            token = next((t for t in tokens if text.startswith(t, i)), None)
            if token is None:
                i += 1
                continue
            segments += [text[start:i], token]
            i = start = i + len(token)
        return [s for s in segments + [text[start:]] if s]

    def _encode(self, side: _Side, text: str) -> list[int]:
        ids = []
        for segment in self._split(text):
            if segment in self.added_tokens:
                ids.append(self.added_tokens[segment])
                continue
            tag, rest = language_tag(segment)
            ids += [side.table.get(piece, self.unk_id) for piece in tag + side.sp.encode(rest, out_type=str)]
        return ids

    def encode_source(self, sentences: list[str]) -> list[list[int]]:
        """Source sentences -> ids, without the final </s> (the callers add it)."""
        return [self._encode(self._source, s) for s in sentences]

    def encode_target(self, sentences: list[str]) -> list[list[int]]:
        return [self._encode(self._target, s) for s in sentences]

    @property
    def folds_case(self) -> bool:
        """Whether the target model lowercases (trained with data.lowercase), so the translations are lowercase."""
        return "A" not in self._target.sp.normalize("A")

    def encode(self, sentences: list[str]) -> list[list[int]]:
        """The source side (what the interface's encode means for a translation input)."""
        return self.encode_source(sentences)

    def pieces(self, sentence: str) -> list[str]:
        """The source pieces of one sentence, as ids would name them (unknown ones as <unk>)."""
        return self.source_id_to_piece(self.encode_source([sentence])[0])

    def id_to_piece(self, ids: list[int]) -> list[str]:
        return [self._target.pieces[i] for i in ids]

    def source_id_to_piece(self, ids: list[int]) -> list[str]:
        return [self._source.pieces[i] for i in ids]

    def piece_to_id(self, piece: str) -> int:
        return self._target.table.get(piece, self.unk_id)

    def source_piece_to_id(self, piece: str) -> int:
        return self._source.table.get(piece, self.unk_id)

    def decode(self, ids: list[int]) -> str:
        """Target ids -> text, special tokens dropped (MarianTokenizer.decode(skip_special_tokens=True))."""
        pieces = [self._target.pieces[i] for i in ids if i not in self._special_ids]
        return self._target.sp.decode_pieces(pieces).replace(SPIECE_UNDERLINE, " ").strip()


def _own_table(model: bytes) -> dict[str, int]:
    """piece -> id as the SentencePiece model itself numbers its pieces."""
    sp = spm.SentencePieceProcessor(model_proto=model)
    return {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}


def _content(token) -> str:
    """A token of tokenizer_config.json: a string, or a saved AddedToken {"content": ..., ...}."""
    return token.get("content") if isinstance(token, dict) else token


def _json_bytes(value) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


def _read_bytes(file: Path) -> bytes:
    if not file.is_file():
        raise TokenizerFileError(f"{file}: missing; a model directory with vocab.json needs source.spm, "
                                 f"target.spm and vocab.json")
    return file.read_bytes()


_NO_DEFAULT = object()


def read_json(file: Path, default=_NO_DEFAULT, missing: str = "the tokenizer needs it", error=TokenizerFileError):
    """A JSON object from `file` (or `default` when the file is absent); `error` names the file."""
    if not file.is_file():
        if default is not _NO_DEFAULT:
            return default
        raise error(f"{file}: missing; {missing}")
    try:
        value = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise error(f"{file}: not valid JSON ({err}); the file is damaged") from None
    if not isinstance(value, dict):
        raise error(f"{file}: expected a JSON object, got {type(value).__name__}")
    return value
