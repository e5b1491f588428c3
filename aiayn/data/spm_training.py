"""Training a SentencePiece BPE model: the one recipe both tokenizers use (aiayn.data.tokenizer's joint
vocabulary, aiayn.data.separate_tokenizer's two). A leaf: it imports neither of them."""

import io

import sentencepiece as spm

from aiayn.errors import AiaynError

BYTE_PIECES = 256  # byte_fallback adds one piece per byte value, <0x00> .. <0xFF>


def train_spm(sentences: list[str], vocab_size: int, byte_fallback: bool, bos: bool = True,
              lowercase: bool = False, user_defined_symbols: tuple[str, ...] = ()) -> bytes:
    """A SentencePiece BPE model (its bytes) with pad 0, unk 1, then <s> 2 and </s> 3 (bos=False: </s> 2, no
    <s>). byte_fallback: a character the model never saw is cut into byte pieces (<0xC5> <0xBC> for "ż")
    that decode back to it, instead of becoming <unk>; it costs 256 pieces of the vocabulary. lowercase: the
    model's normalization folds case (nmt_nfkc_cf instead of nmt_nfkc), so every encode with it lowercases.
    user_defined_symbols: strings that are always one piece wherever they occur (data.corpora's tags)."""
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
