"""Line-level checks of a corpus audit: normalisation, script, encoding, length ratio, and a raw line reader
that keeps going past bad bytes (the audit reports them; training refuses them, aiayn.data.corpus)."""

import bisect
import functools
import gzip
import math
import sys
import unicodedata
import zlib
from pathlib import Path

from aiayn.data.corpus import CorpusError


@functools.cache
def _drop() -> dict[int, None]:
    """Punctuation (Unicode categories P*) and symbols (S*), dropped by normalise(); built once, when used."""
    return {c: None for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c))[0] in "PS"}

# A line is "too long for its partner" when its length in characters is more than LENGTH_RATIO times the
# other side's and the longer side has at least LENGTH_MIN_CHARS characters (short lines such as "Yes." /
# "Ja." vary too much to say anything).
LENGTH_RATIO = 3.0
LENGTH_MIN_CHARS = 15

# (first code point, last code point, script) of the letters the script check knows; other letters: "Other"
_SCRIPT_RANGES = sorted([
    (0x0041, 0x024F, "Latin"), (0x1E00, 0x1EFF, "Latin"), (0x0370, 0x03FF, "Greek"), (0x1F00, 0x1FFF, "Greek"),
    (0x0400, 0x052F, "Cyrillic"), (0x0530, 0x058F, "Armenian"), (0x0590, 0x05FF, "Hebrew"),
    (0x0600, 0x06FF, "Arabic"), (0x0750, 0x077F, "Arabic"), (0xFB50, 0xFDFF, "Arabic"), (0xFE70, 0xFEFF, "Arabic"),
    (0x0900, 0x097F, "Devanagari"), (0x0980, 0x09FF, "Bengali"), (0x0B80, 0x0BFF, "Tamil"),
    (0x0E00, 0x0E7F, "Thai"), (0x10A0, 0x10FF, "Georgian"), (0x1100, 0x11FF, "Hangul"), (0xAC00, 0xD7AF, "Hangul"),
    (0x3040, 0x30FF, "Kana"), (0x3400, 0x4DBF, "Han"), (0x4E00, 0x9FFF, "Han"),
])
_STARTS = [r[0] for r in _SCRIPT_RANGES]
SCRIPTS = ["none", "Other"] + sorted({r[2] for r in _SCRIPT_RANGES})  # index = the code stored per line


def normalise(text: str) -> str:
    """What "the same sentence" means for duplicates: NFKC, case folded, punctuation and symbols dropped,
    whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().translate(_drop()).split())


def script_of(text: str) -> int:
    """Index in SCRIPTS of the script most of the line's letters are in (0: no letters)."""
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            cp = ord(ch)
            at = bisect.bisect_right(_STARTS, cp) - 1
            name = _SCRIPT_RANGES[at][2] if at >= 0 and cp <= _SCRIPT_RANGES[at][1] else "Other"
            counts[name] = counts.get(name, 0) + 1
    return SCRIPTS.index(max(counts, key=counts.get)) if counts else 0


def encoding_problems(raw: bytes, text: str) -> list[str]:
    """"invalid_utf8", "control_characters" (C0/C1 controls but tab), "replacement_characters" (U+FFFD in
    valid UTF-8: a conversion upstream already lost characters)."""
    problems = []
    valid = True
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        valid = False
        problems.append("invalid_utf8")
    if any(unicodedata.category(ch) == "Cc" and ch != "\t" for ch in text):
        problems.append("control_characters")
    if valid and "\ufffd" in text:
        problems.append("replacement_characters")
    return problems


# The report's distribution of length ratios: log2(target / source characters) in bins of 1/8 from -4 to 4,
# over the lines the outlier rule judges (the longer side has >= LENGTH_MIN_CHARS); the outermost bins take
# everything beyond.
RATIO_EDGES = [i / 8 for i in range(-32, 33)]


def ratio_bin(src: str, tgt: str) -> int | None:
    """The bin of RATIO_EDGES that the pair's length ratio falls in; None when the rule does not judge it."""
    if max(len(src), len(tgt)) < LENGTH_MIN_CHARS:
        return None
    value = math.log2(max(len(tgt), 1) / max(len(src), 1))
    return min(max(bisect.bisect_right(RATIO_EDGES, value) - 1, 0), len(RATIO_EDGES) - 2)


def length_outlier(src: str, tgt: str) -> bool:
    short, long = sorted((len(src), len(tgt)))
    return long >= LENGTH_MIN_CHARS and long > LENGTH_RATIO * max(short, 1)


def _open(path: Path):
    if not path.exists():
        raise CorpusError(f"{path}: file not found; check the path")
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory; give a text file with one sentence per line")
    try:
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")
    except OSError as err:
        raise CorpusError(f"{path}: cannot open it ({err.strerror}); check the path and its permissions") from None


def raw_lines(path: str | Path):
    """(raw bytes, text) of each line, line ending removed; bytes that are not UTF-8 become U+FFFD in text."""
    path = Path(path)
    with _open(path) as f:
        number = 0  # lines read, for the message of a damaged file
        try:
            for raw in f:
                number += 1
                raw = raw.removesuffix(b"\n").removesuffix(b"\r")
                yield raw, raw.decode("utf-8", errors="replace")
        except (gzip.BadGzipFile, EOFError, zlib.error) as err:
            raise CorpusError(f"{path}:{number + 1}: damaged gzip file ({err}); the file is truncated or corrupt: "
                              f"download or compress it again") from None
        except OSError as err:
            raise CorpusError(f"{path}: cannot read it ({err.strerror or err}); check the file") from None
