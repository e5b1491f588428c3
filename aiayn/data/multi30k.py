"""Multi30k task 1 (raw): local directory or the real download, verified by SHA-256.

Where the files come from, in order: an explicit directory (`data.data_dir` / `--data-dir`), the
environment variable AIAYN_MULTI30K_DIR, then a download from the dataset's public repository into a
cache directory (AIAYN_CACHE or ~/.cache/aiayn), each file checked against the checksums below.
"""

import logging
import os
import shutil
import urllib.request
from pathlib import Path

from aiayn.data.file_hash import sha256_of
from aiayn.errors import AiaynError

log = logging.getLogger(__name__)

BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
LANGS = ("en", "de", "fr", "cs")
SPLITS = ("train", "val", "test_2016_flickr", "test_2016_mscoco", "test_2017_flickr", "test_2017_mscoco",
          "test_2018_flickr")
# SHA-256 of the files of the splits available here (the rest are downloaded unverified, with a warning)
SHA256 = {
    "test_2016_flickr.cs.gz": "200a4a74cc9560f051924abb9803be008d1908d77f747e9141aeb86dfd2797f1",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "train.cs.gz": "a65adb8b32e3bc664f21ecba7a6e7f6950fd1f405e135f7c312faabdb6255077",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "val.cs.gz": "b63226e05c4bd5dd6a42897d74b86a1b9d2c31498252c572b1ea7f7996927fcc",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
}


class DatasetError(AiaynError):
    """A Multi30k file that cannot be found, downloaded or verified."""


def _check_name(split: str, lang: str) -> None:
    if split not in SPLITS:
        raise DatasetError(f"unknown Multi30k split {split!r}; choose one of {SPLITS}")
    if lang not in LANGS:
        raise DatasetError(f"unknown Multi30k language {lang!r}; choose one of {LANGS}")


def download(name: str, cache_dir: Path, base_url: str = BASE_URL) -> Path:
    """Download one file into cache_dir (temporary name, verify, rename). Returns its path."""
    target = cache_dir / name
    if target.exists() and (name not in SHA256 or sha256_of(target) == SHA256[name]):
        return target
    from aiayn.io import atomic_path

    cache_dir.mkdir(parents=True, exist_ok=True)
    url = f"{base_url}/{name}"
    log.info("downloading %s", url)
    with atomic_path(target) as tmp:  # verified before the rename; removed on any failure
        try:
            with urllib.request.urlopen(url, timeout=60) as response, open(tmp, "wb") as out:
                shutil.copyfileobj(response, out)  # streamed: a wrong URL serving gigabytes does not fill memory
        except OSError as err:
            raise DatasetError(f"could not download {url}: {err}; without network, pass --data-dir DIR "
                               f"(or set AIAYN_MULTI30K_DIR) to a directory holding {name}") from err
        digest = sha256_of(tmp)
        if name in SHA256 and digest != SHA256[name]:
            raise DatasetError(f"{url}: SHA-256 {digest} does not match the expected {SHA256[name]}; "
                               f"the download is corrupt or the upstream file changed")
    if name not in SHA256:
        log.warning("%s: no known checksum, not verified", name)
    return target


def split_path(split: str, lang: str, data_dir: str | Path | None = None, cache_dir: Path | None = None,
               base_url: str = BASE_URL) -> Path:
    """Path of `<split>.<lang>.gz`, from a local directory or downloaded into the cache."""
    _check_name(split, lang)
    name = f"{split}.{lang}.gz"
    local = data_dir or os.environ.get("AIAYN_MULTI30K_DIR")
    if local:
        for candidate in (Path(local) / name, Path(local) / name[:-3]):
            if candidate.exists():
                return candidate
        raise DatasetError(f"{local}: no {name} there; is this the Multi30k task1/raw directory?")
    cache = cache_dir or Path(os.environ.get("AIAYN_CACHE", Path.home() / ".cache" / "aiayn")) / "multi30k"
    return download(name, cache, base_url)


def pair_paths(split: str, src_lang: str, tgt_lang: str, data_dir=None, cache_dir=None, base_url=BASE_URL):
    return (split_path(split, src_lang, data_dir, cache_dir, base_url),
            split_path(split, tgt_lang, data_dir, cache_dir, base_url))
