"""Reading aligned plain-text corpora (one sentence per line, optionally .gz) with clear errors.

Files are read line by line, within the limits below, so that a wrong file (a binary, /dev/zero, a gzip
bomb) ends in an error naming it instead of a MemoryError. The limits are far above the corpora this
toolkit trains on (Multi30k: 29k lines; WMT14 en-de: 4.5M lines, ~0.7 GB a side) and keep one file's
memory below ~3.5 GB (the whole corpus is held in memory). Raise them here for a larger corpus.
"""

import gzip
import logging
import zlib
from contextlib import contextmanager
from pathlib import Path

from aiayn.errors import AiaynError

log = logging.getLogger(__name__)

MAX_LINE_CHARS = 100_000  # one sentence; a longer "line" is a binary file or a file without newlines
MAX_LINES = 20_000_000  # per file; each line costs ~60 bytes of memory beyond its text
MAX_BYTES = 2 * 1024**3  # 2 GiB of text per file (after decompression)
_MAX_LINE_BYTES = 4 * MAX_LINE_CHARS + 2  # what one readline may take: UTF-8 has <= 4 bytes a character, + \r\n


class CorpusError(AiaynError):
    """Bad input data: the message names the file and line and says what to do."""


@contextmanager
def _open(path: Path):
    """A binary file object; .gz files are decompressed as they are read."""
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory; give a text file with one sentence per line")
    try:
        f = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as err:
        raise CorpusError(f"{path}: cannot open it ({err.strerror}); check the path and its permissions") from None
    with f:
        yield f


def _readline(f, path: Path, number: int) -> bytes:
    try:
        return f.readline(_MAX_LINE_BYTES)
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:  # not gzip, truncated, or corrupt data
        raise CorpusError(f"{path}:{number}: damaged gzip file ({err}); the file is truncated or corrupt: "
                          f"download or compress it again") from None


def _decode(raw: bytes, path: Path, number: int) -> str:
    try:
        text = raw.removesuffix(b"\n").decode("utf-8").rstrip("\r")
    except UnicodeDecodeError as err:
        raise CorpusError(f"{path}:{number}: bytes that are not UTF-8 ({err.reason} at column "
                          f"{err.start + 1}); re-encode the file as UTF-8, e.g. iconv -t UTF-8") from None
    if len(text) > MAX_LINE_CHARS:
        raise CorpusError(f"{path}:{number}: line longer than {MAX_LINE_CHARS:,} characters (aiayn.data.corpus."
                          f"MAX_LINE_CHARS); is this a text file with one sentence per line?")
    return text


def _check_size(path: Path, number: int, total: int) -> None:
    if number > MAX_LINES:
        limit = f"more than {MAX_LINES:,} lines (aiayn.data.corpus.MAX_LINES)"
    elif total > MAX_BYTES:
        limit = f"more than {MAX_BYTES / 1024**3:g} GiB of text (aiayn.data.corpus.MAX_BYTES)"
    else:
        return
    raise CorpusError(f"{path}:{number}: {limit}; is this the right file? Split a corpus that large")


def _iter_lines(f, path: Path):
    """Each line's text, without its line ending; stops with CorpusError at a limit."""
    total = 0
    for number in range(1, MAX_LINES + 2):
        raw = _readline(f, path, number)
        if not raw:
            return
        total += len(raw)
        _check_size(path, number, total)
        if len(raw) == _MAX_LINE_BYTES and not raw.endswith(b"\n"):  # no newline within the limit
            raise CorpusError(f"{path}:{number}: line longer than {MAX_LINE_CHARS:,} characters (aiayn.data."
                              f"corpus.MAX_LINE_CHARS); is this a text file with one sentence per line?")
        yield _decode(raw, path, number)


def read_lines(path: str | Path, *, allow_empty: bool = False) -> list[str]:
    """All lines of a UTF-8 text file (.gz allowed), without line endings. An empty file is an error (a
    corpus needs sentences) unless allow_empty: text to translate may be empty, as an empty stdin is."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: file not found; check the path (or data.data_dir)")
    with _open(path) as f:
        out = list(_iter_lines(f, path))
    if not out and not allow_empty:
        raise CorpusError(f"{path}: file is empty; a corpus needs one sentence per line")
    return out


def iter_stream_lines(stream, name: str = "<stdin>"):
    """Lines of a binary stream (e.g. sys.stdin.buffer) as they come, with read_lines' checks and limits:
    a line that is not UTF-8, or an endless stream such as /dev/zero, ends in a CorpusError naming it."""
    return _iter_lines(stream, Path(name))


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> list[tuple[str, str]]:
    """Aligned (source, target) pairs; blank pairs are dropped and counted in the log."""
    return list(iter_parallel(src_path, tgt_path))


def iter_parallel(src_path: str | Path, tgt_path: str | Path):
    """read_parallel's pairs one at a time, both files streamed side by side (a corpus of any size costs
    no memory here); the same errors, found where they are."""
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    for path in (src_path, tgt_path):
        if not path.exists():
            raise CorpusError(f"{path}: file not found; check the path (or data.data_dir)")
        if not path.is_file() and not path.is_dir():  # a FIFO or device: training reads its files 2-3 times
            raise CorpusError(f"{path}: not a regular file (a pipe or a device); training data is read more "
                              f"than once: write it to a file first")
    total = kept = 0
    with _open(src_path) as src_file, _open(tgt_path) as tgt_file:
        src_lines, tgt_lines = _iter_lines(src_file, src_path), _iter_lines(tgt_file, tgt_path)
        while (src := next(src_lines, None)) is not None and (tgt := next(tgt_lines, None)) is not None:
            total += 1
            src, tgt = src.strip(), tgt.strip()
            if src and tgt:
                kept += 1
                yield src, tgt
        src_rest = 0 if src is None else 1 + sum(1 for _ in src_lines)  # src was read, its partner missing
        tgt_rest = sum(1 for _ in tgt_lines)
        _check_aligned(src_path, tgt_path, total, src_rest, tgt_rest)
    if kept < total:
        log.warning("%s / %s: dropped %d blank line pair(s) of %d", src_path, tgt_path, total - kept, total)
    if not kept:
        raise CorpusError(f"{src_path} / {tgt_path}: no non-blank sentence pairs")


def _check_aligned(src_path: Path, tgt_path: Path, common: int, src_rest: int, tgt_rest: int) -> None:
    """The lines left in either file once the other ended."""
    for path, rest in ((src_path, src_rest), (tgt_path, tgt_rest)):
        if common == 0 and rest == 0:
            raise CorpusError(f"{path}: file is empty; a corpus needs one sentence per line")
    if src_rest or tgt_rest:
        raise CorpusError(f"{src_path} has {common + src_rest} lines but {tgt_path} has {common + tgt_rest}; "
                          f"the files must be aligned line by line (line {common + 1} is the first without "
                          f"a partner)")


def iter_tsv(path: str | Path):
    """(source, target) pairs of a tab-separated file, source<TAB>target on each line (.gz allowed); a line
    without exactly one tab is an error naming the file and line. Blank pairs are dropped and counted."""
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: file not found; check the path")
    total = kept = 0
    with _open(path) as f:
        for total, line in enumerate(_iter_lines(f, path), 1):
            if line.count("\t") != 1:
                raise CorpusError(f"{path}:{total}: expected source<TAB>target (exactly one tab), found "
                                  f"{line.count(chr(9))} tabs; a TSV corpus has one sentence pair a line")
            src, tgt = (side.strip() for side in line.split("\t"))
            if src and tgt:
                kept += 1
                yield src, tgt
    if kept < total:
        log.warning("%s: dropped %d blank pair(s) of %d", path, total - kept, total)
    if not kept:
        raise CorpusError(f"{path}: no non-blank sentence pairs; a TSV corpus has source<TAB>target a line")
