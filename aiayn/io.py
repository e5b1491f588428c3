"""Writing files safely: every file and directory aiayn writes goes through this module.

- Atomic writes: a new temporary name beside the target (created exclusively, so a planted symlink
  is never followed), fsynced, then renamed into place. On any failure the temporary is removed and
  the target is left as it was.
- Write errors: a full disk, a read-only or unwritable place, an exhausted quota become one
  `OutputError` line that names the user's path (never the temporary name) and says what is intact.
- Output-path rules: an output is never an input, never inside a model directory in use, and a
  directory is replaced only when aiayn made it as that kind of output.

This module imports nothing else of aiayn but `errors`, so every layer may use it.
"""

import contextlib
import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from aiayn.errors import OutputError

# errno -> what happened, in words a user acts on
WRITE_ERRORS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "no permission to write there",
    errno.EPERM: "no permission to write there",
    errno.EFBIG: "the file is too large for the file system",
    errno.EIO: "the device reported an input/output error",
}


# A library that writes in native code wraps the OSError in its own exception, with the errno only in
# the text: safetensors (Rust) raises SafetensorError("... I/O error: No space left on device (os error
# 28)"). torch.save to a path says only "file write failed", so aiayn hands it a Python file instead,
# whose OSError torch passes on unchanged.
_WRAPPED_ERRNO = re.compile(r"\(os error (\d+)\)|\[Errno (\d+)\]")


def _errno_of(err: BaseException) -> int | None:
    if isinstance(err, OSError):
        return err.errno
    if type(err).__name__ == "SafetensorError":
        found = _WRAPPED_ERRNO.search(str(err))
        return int(found.group(1) or found.group(2)) if found else None
    return None


def write_error(err: BaseException, path: str | Path, intact: str) -> OutputError | None:
    """The one-line error for a failed write of `path` (None for errors that are not write errors)."""
    what = WRITE_ERRORS.get(_errno_of(err))
    if what is None:
        return None
    return OutputError(f"{path}: could not write it: {what}; {intact}")


@contextlib.contextmanager
def writing(path: str | Path, intact: str = "nothing was changed there", temporary: Path | None = None
            ) -> Iterator[None]:
    """Turns a write error inside the block (full disk, read-only, no permission, quota), also as a library
    wraps it, into one line naming `path` and saying what is intact; and any other OSError about aiayn's
    `temporary` name into one naming `path` instead. Any other error passes unchanged."""
    try:
        yield
    except Exception as err:
        mapped = write_error(err, path, intact)
        if mapped is None and temporary is not None and isinstance(err, OSError) and err.filename \
                and str(err.filename).startswith(str(temporary)):
            mapped = OutputError(f"{path}: could not write it: {err.strerror or err}; {intact}")
        if mapped is None:
            raise
        raise mapped from None


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _new_temporary(given, path: Path) -> tuple[int, str]:
    """mkstemp beside `path`; a directory that takes no new file (/proc, a read-only mount) is said so
    with the user's path, never aiayn's temporary name."""
    try:
        return tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        mapped = write_error(err, given, "nothing was written")
        raise (mapped or OutputError(f"{given}: could not write it: {path.parent} takes no new files "
                                     f"({err.strerror or err}); nothing was written. Write it elsewhere")) from None


def _file_in_the_way(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` that is not a directory (a file where one must be)."""
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            return None if parent.is_dir() else parent
    return None


def _intact(path: Path) -> str:
    return "the earlier file is intact" if path.exists() else "nothing was written"


@contextlib.contextmanager
def atomic_path(path: str | Path, *, follow_links: bool = True) -> Iterator[Path]:
    """Yields a new temporary file in `path`'s directory for the caller to write; then fsync and rename
    it over `path`. The temporary name is unique and created exclusively (mkstemp: O_CREAT | O_EXCL),
    so a symlink planted in the directory is never followed; on any failure it is removed and `path`
    is left as it was. A device or FIFO (/dev/null, /dev/stdout) is written directly, and a symlink is
    followed to the file it names, so neither is ever replaced by a regular file (follow_links=False,
    for aiayn's own files in a run directory: the link itself is replaced, what it names is never
    touched). Write errors name `path` as the user gave it."""
    given = path
    path = Path(path)
    if not follow_links and path.is_symlink():
        pass  # renamed over below: rename(2) replaces the link, not its target
    elif path.exists() and not path.is_file() and not path.is_dir():  # a device or FIFO: no rename possible
        with writing(given):
            yield path
        return
    elif path.is_symlink():
        path = Path(os.path.realpath(path))
    if path.is_dir() and not path.is_symlink():
        raise OutputError(f"{given} is a directory; give a file name")
    if not path.parent.is_dir():
        raise OutputError(f"{given}: the directory {path.parent} does not exist; create it first")
    fd, tmp_name = _new_temporary(given, path)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        with writing(given, _intact(path), temporary=tmp):
            yield tmp
            os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; outputs get the user's usual mode
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # the file is in place; a directory fsync refused changes nothing
        fsync_dir(path.parent)


def write_text_atomic(path: str | Path, text: str, *, follow_links: bool = True) -> Path:
    with atomic_path(path, follow_links=follow_links) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_bytes_atomic(path: str | Path, data: bytes, *, follow_links: bool = True) -> Path:
    with atomic_path(path, follow_links=follow_links) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    fsync_dir(root)


@contextlib.contextmanager
def atomic_dir(path: str | Path, *, intact: str | None = None) -> Iterator[Path]:
    """Yields a new empty temporary directory beside `path`; when the caller is done it is fsynced and
    renamed to `path`. An existing `path` is replaced only after the new one is complete (the callers
    decide whether it may be replaced: see check_output_dir). On failure the temporary one is removed.
    A symlink at `path` is replaced by the directory, never followed. Write errors name `path` and say
    what is `intact` (default: the earlier directory, or that nothing was written)."""
    path = Path(path)
    if intact is None:
        intact = "the earlier directory is intact" if path.exists() else "nothing was written"
    blocker = _file_in_the_way(path)
    if blocker is not None:
        raise OutputError(f"{blocker} is a file where aiayn needs a directory (to write {path}); move it away")
    with writing(path, intact):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~umask())  # mkdtemp makes 0700: others could not load the model
    try:
        with writing(path, intact, temporary=tmp):
            yield tmp
            _fsync_tree(tmp)
            if path.is_symlink():  # the link goes, never what it points to
                path.unlink()
                os.replace(tmp, path)
            elif path.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
                os.replace(path, old)  # rename(2) may replace an empty directory
                os.replace(tmp, path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    with contextlib.suppress(OSError):
        fsync_dir(path.parent)


# ---- where outputs may go ---------------------------------------------------------------------------
def _output_kind(path: Path, markers: Iterable[str]) -> str | None:
    """"average" or "export" for a directory that aiayn made as that kind of output, else None."""
    for marker in markers:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            info = json.loads((path / marker).read_text(encoding="utf-8"))
            if info.get("output") or "averaged" in info:  # "averaged" alone: averages of earlier versions
                return info.get("output", "average")
    return None


def overlaps(a: Path, b: Path) -> bool:
    a, b = a.resolve(), b.resolve()
    return a == b or a in b.parents or b in a.parents


def check_output_dir(out: str | Path, kind: str, *, force: bool = False, inputs=(),
                     markers: Iterable[str] = ("info.json",), written=lambda out: set()) -> Path:
    """Refuse an output directory whose replacement would lose something: an input (or a directory
    holding one, or inside one), a non-empty directory aiayn did not make as a `kind` output (told by
    a JSON `markers` file with "output": kind), or an earlier `kind` output without `force`.
    `written(out)` -> the names aiayn may have written there; anything else stops a --force."""
    out = Path(out)
    for source in inputs:
        if overlaps(out, Path(source)):
            raise OutputError(f"--out {out} is, contains or lies inside the input {source}; an input is "
                              f"never overwritten: choose a new directory")
    if out.is_symlink():  # replacing it would replace the link, never write where it points
        target = os.readlink(out)
        what = "a directory" if out.is_dir() else "a file" if out.exists() else "nothing (a broken link)"
        raise OutputError(f"--out {out} is a symbolic link to {what} ({target}); aiayn writes a new directory "
                          f"and never through a link: give the directory's own path or a new one")
    if out.exists() and not out.is_dir():
        raise OutputError(f"--out {out} exists and is not a directory; choose a new directory")
    if not out.exists() or not any(out.iterdir()):
        return out
    found = _output_kind(out, markers)
    if found != kind:
        what = f"an aiayn {found} output" if found else "files aiayn did not write"
        raise OutputError(f"--out {out} is not empty: it holds {what}; nothing was written. Choose a new or "
                          f"empty directory (aiayn replaces only its own earlier {kind} output, with --force)")
    if not force:
        raise OutputError(f"--out {out} holds an earlier aiayn {kind}; pass --force to replace it")
    foreign = sorted(p.name for p in out.iterdir() if p.name not in written(out))
    if foreign:
        raise OutputError(f"--out {out} holds files aiayn did not write there ({', '.join(foreign[:5])}); "
                          f"--force replaces only an untouched earlier {kind}: move them first")
    return out


def check_output_file(path: str, inputs=(), model_dirs=()) -> None:
    """An output file is never an input, nor inside a model directory in use (its weights, config or
    tokenizer would be replaced)."""
    if path.endswith(("/", os.sep)):  # Path() would drop the slash and write a file of that name
        raise OutputError(f"{path} names a directory; give a file name, e.g. {path.rstrip('/' + os.sep)}/out.txt")
    if Path(path).is_dir():  # refused here, before the work, not when the output is written at the end
        raise OutputError(f"{path} is a directory; give a file name, e.g. {path}/out.txt")
    target = Path(path).resolve()
    for source in inputs:
        if source and Path(source).exists() and target == Path(source).resolve():
            raise OutputError(f"{path} is also an input; write the output to another file")
    for model_dir in model_dirs:
        if model_dir and Path(model_dir).resolve() in target.parents:
            raise OutputError(f"{path} lies inside the model directory {model_dir}; write outputs elsewhere")


def check_derived_files(option: str, named: str, derived: Iterable[str], force: bool = False) -> None:
    """Files aiayn names after a name the user gave (`--write-gold F` -> F.src, F.tgt): the user never named
    them, so an existing one is kept unless `force`. Checked before anything is written."""
    if force:
        return
    for path in derived:
        if os.path.lexists(path):
            raise OutputError(f"{path} exists ({option} {named} also writes it); pass --force to replace it, "
                              f"or give {option} another name")


def write_output_file(path: str, text: str, inputs=(), model_dirs=()) -> None:
    """A user's output file (translations, hypotheses): checked, then written atomically."""
    check_output_file(path, inputs, model_dirs)
    write_text_atomic(path, text)
