"""Training a SentencePiece BPE model: the one recipe both tokenizers use (aiayn.data.tokenizer's joint
vocabulary, aiayn.data.separate_tokenizer's two). A leaf: it imports neither of them."""

import io
import re

import sentencepiece as spm

from aiayn.errors import AiaynError

BYTE_PIECES = 256  # byte_fallback adds one piece per byte value, <0x00> .. <0xFF>
# The pieces a model keeps for itself, never text: what each one is, for messages. SentencePiece's own
# names, also Marian's (whose tokenizer reads them written literally as their ids).
RESERVED_PIECES = {"</s>": "the end of a sentence", "<pad>": "padding", "<unk>": "an unknown piece",
                   "<s>": "the start of a sentence"}
BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def reserved_piece(text: str) -> str | None:
    """The first piece a model reserves written in `text` (</s>, <pad>, <unk>, <s>, a byte piece <0x41>), or
    None: such a piece is never a corpus tag, a target prefix or a constraint."""
    found = [(text.find(piece), piece) for piece in RESERVED_PIECES if piece in text]
    byte = BYTE_PIECE.search(text)
    if byte:
        found.append((byte.start(), byte.group()))
    return min(found)[1] if found else None


def reserved_reason(piece: str) -> str:
    """"</s> (the end of a sentence)": a reserved piece and what the model keeps it for."""
    return f"{piece} ({RESERVED_PIECES.get(piece, 'a byte of text the model cannot otherwise write')})"


def train_spm(sentences: list[str], vocab_size: int, byte_fallback: bool, bos: bool = True,
              lowercase: bool = False, user_defined_symbols: tuple[str, ...] = ()) -> bytes:
    """A SentencePiece BPE model (its bytes) with pad 0, unk 1, then <s> 2 and </s> 3 (bos=False: </s> 2, no
    <s>). byte_fallback: a character the model never saw is cut into byte pieces (<0xC5> <0xBC> for "ż")
    that decode back to it, instead of becoming <unk>; it costs 256 pieces of the vocabulary. lowercase: the
    model's normalization folds case (nmt_nfkc_cf instead of nmt_nfkc), so every encode with it lowercases.
    user_defined_symbols: strings that are always one piece wherever they occur (data.corpora's tags)."""
    for symbol in user_defined_symbols:
        if reserved_piece(symbol):
            raise AiaynError(f"tag {symbol!r}: {reserved_reason(reserved_piece(symbol))} is a piece the tokenizer "
                             f"reserves, so it cannot be a tag; choose another, such as '>>de<<' or '<BT>'")
    model = io.BytesIO()
    special = dict(bos_id=2, eos_id=3) if bos else dict(bos_id=-1, eos_id=2)
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences), model_writer=model, model_type="bpe",
            vocab_size=vocab_size, character_coverage=1.0, pad_id=0, unk_id=1, **special,
            byte_fallback=byte_fallback, user_defined_symbols=list(user_defined_symbols),
            hard_vocab_limit=False, num_threads=2, minloglevel=2,
            input_sentence_size=2_000_000, shuffle_input_sentence=True,
            normalization_rule_name="nmt_nfkc_cf" if lowercase else "nmt_nfkc")
    except RuntimeError as err:  # e.g. fewer pieces asked for than the corpus has characters
        also = f" with data.byte_fallback=true (its {BYTE_PIECES} byte pieces count too)" if byte_fallback else ""
        raise AiaynError(f"data.vocab_size={vocab_size}: SentencePiece cannot train this vocabulary{also} "
                         f"({str(err).strip()[-160:]}); raise data.vocab_size"
                         + (" or set data.byte_fallback=false" if byte_fallback else "")) from None
    return model.getvalue()
