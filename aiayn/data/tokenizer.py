"""SentencePiece BPE with one joint vocabulary for both languages (saved with the model), optionally with
byte fallback (data.byte_fallback: characters never seen in training survive as byte pieces).

Special ids come from the trained model (pad, unk, bos, eos), never hard-coded elsewhere.

Every tokenizer (this one, and aiayn.data.separate_tokenizer's for imported Marian models) offers one
interface: encode_source / encode_target (lists of sentences -> ids), encode (= encode_source), decode
(target ids -> text), id_to_piece / piece_to_id (target side), source_id_to_piece / source_piece_to_id,
pad_id, unk_id, bos_id (the decoder's start token), eos_id, src_vocab_size, tgt_vocab_size, vocab_size
(the target side's), files() (name -> bytes, what a checkpoint directory holds) and proto (bytes that
are equal exactly when two tokenizers are the same). load_dir() reads whichever a directory holds.
"""

import logging
from pathlib import Path

import sentencepiece as spm

from aiayn.data.spm_training import train_spm
from aiayn.errors import AiaynError

log = logging.getLogger(__name__)


# data.byte_fallback needs data.vocab_size >= this: 4 special pieces, the 256 byte pieces, and 124 left for
# the corpus's characters (all of them are kept: character_coverage 1.0) and merges
BYTE_FALLBACK_MIN_VOCAB = 384
# up to this many sentences are encoded one by one (Tokenizer.encode): a list of 1, 4 and 16 took 224, 103 and
# 277 us a sentence on sentencepiece's threads against 30, 34 and 10 one by one; from 32 on, alike
FEW_SENTENCES = 16


class Tokenizer:
    name = "tokenizer.model"  # the file that holds it, named in error messages

    def __init__(self, model_proto: bytes):
        self.proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        self.pad_id, self.unk_id = self.sp.pad_id(), self.sp.unk_id()
        self.bos_id, self.eos_id = self.sp.bos_id(), self.sp.eos_id()
        self.vocab_size = self.sp.get_piece_size()
        self.src_vocab_size = self.tgt_vocab_size = self.vocab_size  # one joint vocabulary

    @classmethod
    def train(cls, sentences: list[str], vocab_size: int, seed: int = 1, byte_fallback: bool = False,
              lowercase: bool = False, user_defined_symbols: tuple[str, ...] = ()) -> "Tokenizer":
        """BPE over the given sentences (both languages of the training split). byte_fallback, lowercase,
        user_defined_symbols (pieces kept whole, such as corpus tags): see train_spm."""
        tok = cls(train_spm(sentences, vocab_size, byte_fallback, lowercase=lowercase,
                            user_defined_symbols=user_defined_symbols))
        log.info("trained a joint BPE vocabulary of %d pieces", tok.vocab_size)
        return tok

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        """From a tokenizer.model file (write one with aiayn.io.write_bytes_atomic(path, tok.proto))."""
        data = Path(path).read_bytes()
        if not data:  # sentencepiece would load it as a model of 0 pieces (and log an internal error)
            raise AiaynError(f"{path}: empty file (0 bytes); it was not written completely: copy it again from "
                             f"where the model came from")
        try:
            return cls(data)
        except RuntimeError as err:  # sentencepiece's error for bytes that are not a model
            raise AiaynError(f"{path}: not a SentencePiece model ({str(err).strip()[:120]}); the file is "
                             f"damaged or from another program") from None

    def encode(self, sentences: list[str]) -> list[list[int]]:
        # sentencepiece encodes a list on a pool of threads it starts per call (FEW_SENTENCES)
        if len(sentences) <= FEW_SENTENCES:
            return [self.sp.encode(s, out_type=int) for s in sentences]
        return self.sp.encode(sentences, out_type=int)

    def encode_source(self, sentences: list[str]) -> list[list[int]]:
        return self.encode(sentences)

    def encode_target(self, sentences: list[str]) -> list[list[int]]:
        return self.encode(sentences)

    @property
    def folds_case(self) -> bool:
        """Whether this model lowercases what it encodes (trained with data.lowercase), so writes lowercase."""
        return "A" not in self.sp.normalize("A")

    def files(self) -> dict[str, bytes]:
        return {self.name: self.proto}

    def piece_to_id(self, piece: str) -> int:
        return self.sp.piece_to_id(piece)

    def source_piece_to_id(self, piece: str) -> int:
        return self.sp.piece_to_id(piece)

    def source_id_to_piece(self, ids: list[int]) -> list[str]:
        return self.id_to_piece(ids)

    def pieces(self, sentence: str) -> list[str]:
        return self.sp.encode(sentence, out_type=str)

    def id_to_piece(self, ids: list[int]) -> list[str]:
        return [self.sp.id_to_piece(i) for i in ids]

    def decode(self, ids: list[int]) -> str:
        """Target ids -> text; byte pieces (byte fallback) become the characters they encode."""
        specials = {self.pad_id, self.bos_id, self.eos_id}
        return self.sp.decode([i for i in ids if i not in specials])


TOKENIZER_FILES = ("tokenizer.model", "source.spm", "target.spm", "vocab.json", "target_vocab.json",
                   "tokenizer_config.json")


def load_dir(path: str | Path):
    """The tokenizer of a model directory: tokenizer.model (aiayn's joint one), else source.spm, target.spm
    and vocab.json (separate ones, as imported Marian models have); None when it holds neither."""
    path = Path(path)
    if (path / "tokenizer.model").is_file():
        return Tokenizer.load(path / "tokenizer.model")
    if (path / "vocab.json").is_file():
        from aiayn.data.separate_tokenizer import SeparateTokenizer

        return SeparateTokenizer.load(path)
    return None
