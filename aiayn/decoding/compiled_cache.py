"""Where compiled decoders are kept between runs: $AIAYN_CACHE/compiled (default ~/.cache/aiayn/compiled),
one directory per fingerprint of what the compiled code depends on. Compiling takes about 90 s (86 s for the
Multi30k model on 2 cores); loading a kept one about 2 s.

The fingerprint covers the model (every weight's bytes, its modules and their settings), the code that
builds the compiled modules (aiayn/model and aiayn/decoding/compiled.py), torch's version, the CPU (its
instruction set flags: inductor generates code for the CPU it runs on) and the number of torch threads
(inductor fixes a kernel's thread count when it compiles it). A directory appears only complete (written
beside, then renamed); one that cannot be loaded is compiled again. Where the cache cannot be written, the
compiled files go to a temporary directory for this run only, with a warning (an error of the compilation
itself, even an OSError about a file outside the cache, is raised as it is: compiling again elsewhere would
fail the same way). The cache keeps the MAX_ENTRIES decoders used last, and no more than MAX_BYTES of them
(an entry holds the weights twice over: 50 MB for the 3.1M-parameter Multi30k model): every retrained model
or thread count adds one, and the oldest are removed when a new one is written (never the new one, however
large).

Only aiayn's own entries are ever counted, replaced or removed: each holds a marker (MARKER) written with
it, recording every file's size and SHA-256. A directory without one (a user's folder under $AIAYN_CACHE,
or an entry of an aiayn from before the marker) is never touched. The sizes and hashes are checked before
an entry is loaded (25 ms for 50 MB): a truncated or altered entry is compiled again, never loaded (a
damaged shared library inside a .pt2 could crash the process rather than raise).
"""

import hashlib
import json
import logging
import os
import platform
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from aiayn.data.file_hash import sha256_of
from aiayn.errors import OutputError
from aiayn.io import atomic_dir

log = logging.getLogger(__name__)
CACHE_FORMAT = 2  # bump when the layout of a cache directory changes (2: the marker)
MARKER = "aiayn-compiled.json"  # in every entry aiayn wrote: {"aiayn": KIND, "format", "files": {name: size, sha256}}
KIND = "compiled decoder"
MAX_ENTRIES = 8  # compiled decoders kept; the least recently used beyond are removed
MAX_BYTES = 2 << 30  # and the least recently used while the entries kept hold more than this


def cache_root() -> Path:
    return Path(os.environ.get("AIAYN_CACHE", Path.home() / ".cache" / "aiayn")) / "compiled"


def _cpu_flags() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next((line for line in f if line.startswith("flags")), "")
    except OSError:  # not Linux
        return platform.processor()


def _code_files() -> list[Path]:
    package = Path(__file__).resolve().parent.parent  # aiayn/
    return (sorted((package / "model").glob("*.py"))
            + [package / "cpu" / name for name in ("compute_types.py", "linear.py")]
            + [package / "decoding" / name for name in ("compiled.py", "compiled_step.py")])


def fingerprint(model: torch.nn.Module) -> str:
    """A hex digest of everything the compiled modules of `model` depend on (see above)."""
    h = hashlib.sha256()
    for part in (str(CACHE_FORMAT), torch.__version__, platform.machine(), _cpu_flags(), str(torch.get_num_threads())):
        h.update(part.encode() + b"\0")
    for path in _code_files():
        h.update(path.read_bytes())
    for name, module in model.named_modules():  # structure and settings (pre/post norm, scaling, ...)
        settings = {k: v for k, v in vars(module).items() if isinstance(v, (bool, int, float, str, type(None)))}
        h.update(f"{name}:{type(module).__qualname__}:{sorted(settings.items())}".encode())
    for name, tensor in model.state_dict().items():
        h.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}".encode())
        h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:32]


class _BuildFailed(Exception):
    """Carries an error of build() past the handler for a cache that cannot be written."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _build(build: Callable[[Path], None], directory: Path) -> None:
    """build(directory); an OSError about a file outside `directory` (the compiler's: a full /tmp, a missing
    tool) is the compilation's, raised as _BuildFailed. One inside it (a full disk under the cache) is the
    cache's, and stays an OSError."""
    try:
        build(directory)
    except OSError as err:
        if err.filename and Path(os.fsdecode(err.filename)).resolve().is_relative_to(directory.resolve()):
            raise
        raise _BuildFailed(err) from err


def cached(key: str, names: list[str], build: Callable[[Path], None], load: Callable[[Path], object]) -> list:
    """The loaded files `names` of the cache directory `key`; build(directory) writes them first where the
    directory is missing, damaged or cannot be loaded. Returns [load(directory / name) for name in names]."""
    directory = cache_root() / key
    if directory.exists() and _marker(directory) is None:  # not aiayn's, at its 32-hex-digit name: never replaced
        log.warning("%s holds files aiayn did not write; the compiled decoder is compiled for this run only: "
                    "move that directory away to keep it", directory)
        return _build_for_this_run(build, load, names)
    problem = _check(directory, names) if directory.exists() else "missing"
    if problem is None:
        try:
            loaded = [load(directory / name) for name in names]
            _touch(directory)
            return loaded
        except Exception as err:  # a file of another torch, say: compile again
            problem = f"it could not be loaded: {err}"
    if problem != "missing":
        log.warning("compiled decoder in %s is damaged (%s); compiling it again", directory, problem)
    try:
        with atomic_dir(directory) as tmp:
            _build(build, tmp)
            _write_marker(tmp)
    except _BuildFailed as failed:
        raise failed.error from None
    except (OSError, OutputError) as err:  # atomic_dir says a full disk, a read-only cache ... as an OutputError
        log.warning("cannot keep the compiled decoder in %s (%s); it is compiled again next run", directory, err)
        return _build_for_this_run(build, load, names)
    try:
        _evict(keep=directory)
    except OSError as err:  # another process evicting the same entries, say: the new entry is complete
        log.warning("could not remove old compiled decoders from %s (%s)", cache_root(), err)
    return [load(directory / name) for name in names]


def _build_for_this_run(build: Callable[[Path], None], load: Callable[[Path], object], names: list[str]) -> list:
    with tempfile.TemporaryDirectory(prefix="aiayn-compiled-") as tmp:
        build(Path(tmp))
        return [load(Path(tmp) / name) for name in names]


def _write_marker(directory: Path) -> None:
    """Records the size and hash of every file build() wrote: the entry is then aiayn's, and checkable."""
    files = {p.name: {"size": p.stat().st_size, "sha256": sha256_of(p)} for p in sorted(directory.iterdir())
             if p.is_file()}
    marker = {"aiayn": KIND, "format": CACHE_FORMAT, "files": files}
    (directory / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")


def _marker(directory: Path) -> dict | None:
    """The entry's marker, or None where `directory` is not a cache entry aiayn wrote."""
    try:
        marker = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("aiayn") != KIND or not isinstance(marker.get("files"), dict):
        return None
    return marker


def _check(directory: Path, names: list[str]) -> str | None:
    """None where every file of the entry is as it was written; else what is wrong, in words."""
    recorded = _marker(directory)["files"]
    for name in names:
        path, want = directory / name, recorded.get(name)
        if not isinstance(want, dict):
            return f"{name} is not among the files it was written with"
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != want.get("size"):
            return f"{name} has {path.stat().st_size} bytes, {want.get('size')} when it was written"
        if sha256_of(path) != want.get("sha256"):
            return f"{name} differs from what was written"
    return None


def _touch(directory: Path) -> None:
    """Marks a cache entry as used now (its directory's mtime), for _evict."""
    try:
        os.utime(directory)
    except OSError:  # a read-only cache: it is still used, only not marked
        pass


def _size(directory: Path) -> int:
    """The bytes of an entry's compiled files (its marker, a few hundred bytes, left out)."""
    return sum(f.stat().st_size for f in directory.iterdir() if f.is_file() and f.name != MARKER)


def _entries() -> list[Path]:
    """aiayn's entries (those with a marker); entries being written (hidden temporary directories) and
    anything else under the cache root are left out."""
    return [p for p in cache_root().iterdir()
            if p.is_dir() and not p.is_symlink() and not p.name.startswith(".") and _marker(p) is not None]


def _evict(keep: Path) -> None:
    """Removes the least recently used of aiayn's entries beyond MAX_ENTRIES or MAX_BYTES; never `keep`, just
    written, nor anything without aiayn's marker."""
    entries = [p for p in _entries() if p != keep]
    entries.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    kept, total = 1, _size(keep)
    for entry in entries:
        size = _size(entry)
        if kept < MAX_ENTRIES and total + size <= MAX_BYTES:
            kept, total = kept + 1, total + size
            continue
        log.info("removing the least recently used compiled decoder %s", entry)
        shutil.rmtree(entry, ignore_errors=True)


def clear() -> None:
    """Removes every compiled decoder aiayn kept (nothing else under the cache root)."""
    if cache_root().is_dir():
        for entry in _entries():
            shutil.rmtree(entry, ignore_errors=True)
