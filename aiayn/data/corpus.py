"""Reading aligned plain-text corpora (one sentence per line, optionally .gz) with clear errors."""

import gzip
import logging
from pathlib import Path

from aiayn.errors import AiaynError

log = logging.getLogger(__name__)


class CorpusError(AiaynError):
    """Bad input data: the message names the file and line and says what to do."""


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (.gz allowed), without line endings."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: file not found; check the path (or data.data_dir)")
    raw = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, start=1):
        try:
            out.append(line.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as err:
            raise CorpusError(f"{path}:{number}: bytes that are not UTF-8 ({err.reason} at column "
                              f"{err.start + 1}); re-encode the file as UTF-8, e.g. iconv -t UTF-8") from None
    if not out:
        raise CorpusError(f"{path}: file is empty; a corpus needs one sentence per line")
    return out


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> list[tuple[str, str]]:
    """Aligned (source, target) pairs; blank pairs are dropped and counted in the log."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise CorpusError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; "
                          f"the files must be aligned line by line (line {min(len(src), len(tgt)) + 1} "
                          f"is the first without a partner)")
    pairs = [(s.strip(), t.strip()) for s, t in zip(src, tgt)]
    kept = [(s, t) for s, t in pairs if s and t]
    if len(kept) < len(pairs):
        log.warning("%s / %s: dropped %d blank line pair(s) of %d", src_path, tgt_path,
                    len(pairs) - len(kept), len(pairs))
    if not kept:
        raise CorpusError(f"{src_path} / {tgt_path}: no non-blank sentence pairs")
    return kept
