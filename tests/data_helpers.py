"""Where the tests find this workplace's Multi30k copy (no test downloads it)."""

import os
from pathlib import Path

from tests.paths import REPO


def find_multi30k() -> Path | None:
    """$AIAYN_MULTI30K_DIR, else ../shared/data/multi30k beside the checkout, else /work/shared/data/multi30k."""
    for candidate in (os.environ.get("AIAYN_MULTI30K_DIR"), REPO.parent / "shared/data/multi30k",
                      Path("/work/shared/data/multi30k")):
        if candidate and (Path(candidate) / "val.de.gz").exists():
            return Path(candidate)
    return None


def multi30k_lines(root: Path, lang: str, split: str, n: int) -> list[str]:
    """The first n lines of a Multi30k split."""
    import gzip

    with gzip.open(root / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


def marian_spm(lines: list[str], vocab_size: int) -> bytes:
    """A SentencePiece unigram model as Marian's: </s> = 0, <unk> = 1, no <s> or <pad>; coverage < 1 leaves
    rare characters out, so some text maps to <unk>."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
                                   vocab_size=vocab_size, character_coverage=0.98, eos_id=0, unk_id=1, bos_id=-1,
                                   pad_id=-1, num_threads=1, minloglevel=2)
    return model.getvalue()


def spm_pieces(model: bytes) -> list[str]:
    """A SentencePiece model's pieces after </s> and <unk>."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_proto=model)
    return [sp.id_to_piece(i) for i in range(2, sp.get_piece_size())]
