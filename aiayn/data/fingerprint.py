"""What a run's data is, as two hashes kept in run.json:

- data_sha256, of the sentence pairs as training reads them (stripped, blank pairs dropped): what decides
  whether a run may resume on these data, and which encoded corpus it uses. Computing it reads every pair
  through Python (about a minute for 4.5M pairs);
- files_sha256, of the raw bytes of the data's files, hashed in large blocks (about a second per GB): when
  it is unchanged since the run last started, data_sha256 is too and is not computed again.
"""

import hashlib
from pathlib import Path

from aiayn.data.file_hash import BLOCK


def data_fingerprint(train_pairs, valid_pairs) -> str:
    digest = hashlib.sha256()
    for pairs in (train_pairs, valid_pairs):
        for src, tgt in pairs:
            digest.update(f"{src}\t{tgt}\n".encode())
        digest.update(b"\0")
    return digest.hexdigest()


def data_files(data) -> list[Path]:
    """The training and validation files of a data config ([] for the synthetic task, which has none)."""
    if data.dataset == "files":
        from aiayn.data.corpora import data_files as files_of

        return files_of(data)
    if data.dataset == "multi30k":
        from aiayn.data import multi30k

        return [Path(p) for split in ("train", data.valid_split)
                for p in multi30k.pair_paths(split, data.src_lang, data.tgt_lang, data.data_dir or None)]
    return []


def files_fingerprint(data) -> str | None:
    """sha256 of the data files' bytes (None when there are none, or one is not a regular file)."""
    files = data_files(data)
    if not files or not all(path.is_file() for path in files):  # a device, FIFO, directory or missing file:
        return None  # the pair-by-pair reading names the problem (/dev/zero would be hashed forever here)
    digest = hashlib.sha256()
    for path in files:
        with open(path, "rb") as f:
            while block := f.read(BLOCK):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()
