"""The SHA-256 of a file's bytes, read in large blocks: how the data fingerprints, the Multi30k download,
the encoded corpora and the decoding caches recognise a file. A leaf module."""

import hashlib
from pathlib import Path

BLOCK = 1 << 20


def sha256_of(path: Path) -> str:
    """sha256 of one file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()
