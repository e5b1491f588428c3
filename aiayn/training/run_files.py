"""aiayn's own files and directories in a run directory, and how they are kept.

- Never through a link: each name below is aiayn's, so a symbolic link found there (planted, or left by a
  tool) is replaced, never written through: the link goes, what it names is never touched. Only
  `checkpoints/` is refused: checkpoints are written and deleted there, and replacing a link to the run's
  own checkpoints with an empty folder would start the run over.
- Interrupted checkpoints (saved by Ctrl-C or SIGTERM between two train.save_every steps) serve the resume
  only: they stay out of the average of the last checkpoints and out of train.keep_last, and go when a
  later regular checkpoint is saved, so an interrupted-and-resumed run keeps, and averages, the same
  checkpoints as an uninterrupted one.
- A temporary that a killed process left (`.config.yaml.x1y2z3a4.tmp`, a checkpoint-sized
  `checkpoints/.step_00000500.x1y2z3a4.tmp/`) is removed at the next start, which holds the run's lock.
"""

import contextlib
import errno
import json
import logging
import os
import re
import shutil
from pathlib import Path

from aiayn.checkpoint import average_checkpoints
from aiayn.data.tokenizer import TOKENIZER_FILES
from aiayn.errors import OutputError
from aiayn.run_dir import STEP_NAME, step_checkpoints

log = logging.getLogger(__name__)
RUN_FILES = ("run.json", "config.yaml", "metrics.jsonl", "latest", ".lock", *TOKENIZER_FILES)
RUN_DIRS = ("best", "average", "encoded", "checkpoints")
# a link found at one of these is removed at the start (the others are replaced by their writers; a link at
# config.yaml or run.json is read like the file, so a run that differs is refused, naming it)
REMOVED_LINKS = ("metrics.jsonl", "latest", "best", "average", "encoded")
# aiayn.io's temporaries: ".NAME." + mkstemp's 8 random characters + ".tmp" (".old": a replaced directory)
_TEMPORARY = r"\.(?P<name>[^/]+)\.[a-z0-9_]{8}\.(?:tmp|old)"


def remove_path(path: Path) -> None:
    """A file, a link (never what it names) or a directory tree."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def claim_run_entries(out: Path) -> None:
    """Before a run writes in `out` (holding its lock): links at aiayn's names removed, with a warning each;
    a link at checkpoints/ refused; temporaries left by killed processes removed."""
    checkpoints = out / "checkpoints"
    if checkpoints.is_symlink():
        raise OutputError(f"{checkpoints} is a symbolic link (to {os.readlink(checkpoints)}); aiayn writes and "
                          f"deletes checkpoints there, never through a link: put the folder it names in its "
                          f"place, or use a new --out")
    links = [out / name for name in REMOVED_LINKS]
    links += [p for p in checkpoints.glob("step_*") if STEP_NAME.fullmatch(p.name)]
    for path in links:
        if path.is_symlink():
            log.warning("%s was a symbolic link (to %s), where aiayn keeps its own; removed the link (what it "
                        "names is untouched)", path, os.readlink(path))
            path.unlink()
    remove_temporaries(out, RUN_FILES + RUN_DIRS)
    if checkpoints.is_dir():
        remove_temporaries(checkpoints, step_names=True)


def remove_temporaries(directory: Path, names=(), step_names: bool = False) -> None:
    """aiayn.io's temporaries of these names (or of checkpoint names) in `directory`: only a stopped
    process leaves one, and the caller holds the lock that any live writer would hold."""
    for path in directory.iterdir():
        match = re.fullmatch(_TEMPORARY, path.name)
        if match and (match["name"] in names or (step_names and STEP_NAME.fullmatch(match["name"]))):
            log.info("removing %s, left by a stopped run", path)
            remove_path(path)


def append_line(path: Path, line: str) -> None:
    """Append one line to aiayn's own file (metrics.jsonl); a link at its name is replaced by the file,
    never written through (O_NOFOLLOW)."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        log.warning("%s was a symbolic link (to %s); replaced it by aiayn's own file (what it named is untouched)",
                    path, os.readlink(path))
        path.unlink()
        fd = os.open(path, flags, 0o666)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(line)


def open_lock(path: Path):
    """The run's .lock file, opened for flock: never through a link (one there is replaced)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        path.unlink()
        fd = os.open(path, flags, 0o666)
    return os.fdopen(fd, "r+")


# ---- interrupted checkpoints --------------------------------------------------------------------------
def interrupted(checkpoint: Path) -> bool:
    """Whether this checkpoint was saved by a signal between two train.save_every steps (its info.json)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return bool(json.loads((checkpoint / "info.json").read_text(encoding="utf-8")).get("interrupted"))
    return False


def regular_checkpoints(out: Path) -> list[Path]:
    """The run's checkpoints, oldest first, without interrupted ones and without links."""
    return [p for p in step_checkpoints(out) if not p.is_symlink() and not interrupted(p)]


def prune_checkpoints(out: Path, saved: Path, keep: int) -> None:
    """After `saved` was written: keep the last `keep` regular checkpoints; interrupted ones older than
    `saved` go once `saved` is regular (a resume now starts from it)."""
    if interrupted(saved):
        return
    older_interrupted = [p for p in step_checkpoints(out) if p.name < saved.name and not p.is_symlink()
                         and interrupted(p)]
    for old in regular_checkpoints(out)[:-keep] + older_interrupted:
        shutil.rmtree(old, ignore_errors=True)


def average_last(out: Path, count: int) -> None:
    """The average of the last `count` regular checkpoints into out/average (§6.1)."""
    last = regular_checkpoints(out)[-count:]
    if len(last) < 2:
        return
    try:
        average_checkpoints(last, out / "average", force=True)
    except OutputError as err:  # files of the user's in average/: keep them, skip the average
        log.warning("no new average written: %s", err)
        return
    log.info("averaged %d checkpoints into %s", len(last), out / "average")
