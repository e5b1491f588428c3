"""Write captured attention maps as PNG (grid of heatmaps, layers x heads), offline HTML, NPZ or JSON,
chosen by the file extension. Files are written under a temporary name and renamed."""

import json
from pathlib import Path

import numpy as np

from aiayn.checkpoint import atomic_path
from aiayn.inspect.capture import AttentionMaps

SCHEMA_VERSION = 1
KINDS = ("encoder_self", "decoder_self", "cross")


def axis_tokens(maps: AttentionMaps, kind: str) -> tuple[list[str], list[str]]:
    """(query labels, key labels) of one kind of map."""
    return {"encoder_self": (maps.source_tokens, maps.source_tokens),
            "decoder_self": (maps.target_tokens, maps.target_input_tokens),
            "cross": (maps.target_tokens, maps.source_tokens)}[kind]


def select(maps: AttentionMaps, kind: str, layer: int | None, head: int | None) -> np.ndarray:
    """(L', H', Q, K) for the chosen kind, layer and head (None = all)."""
    if kind not in maps.maps:
        raise ValueError(f"this {maps.arch} model has no {kind} attention; available: {sorted(maps.maps)}")
    m = maps.maps[kind]
    for axis, (value, name) in enumerate(((layer, "layer"), (head, "head"))):
        if value is not None and not 0 <= value < m.shape[axis]:
            raise ValueError(f"--{name} {value} out of range: the model has {m.shape[axis]} {name}s (0-based)")
    if layer is not None:
        m = m[layer: layer + 1]
    if head is not None:
        m = m[:, head: head + 1]
    return m


def to_json_dict(maps: AttentionMaps) -> dict:
    return {"schema_version": SCHEMA_VERSION, "arch": maps.arch, "translation": maps.translation,
            "merged_words": maps.merged, "source_tokens": maps.source_tokens, "target_tokens": maps.target_tokens,
            "target_input_tokens": maps.target_input_tokens,
            "maps": {k: np.round(v, 5).tolist() for k, v in maps.maps.items()}}


def _atomic(path: Path, write) -> Path:
    with atomic_path(path) as tmp:
        write(tmp)
    return path


def write_maps(maps: AttentionMaps, out: str | Path, kind: str = "cross", layer: int | None = None,
               head: int | None = None) -> Path:
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix == ".align":  # hard alignment, Pharaoh "i-j" (source i, target j)
        from aiayn.inspect.capture import hard_alignment

        line = hard_alignment(maps, layer, None if head is None else [head]) + "\n"
        return _atomic(out, lambda p: p.write_text(line, encoding="utf-8"))
    if suffix == ".json":
        return _atomic(out, lambda p: p.write_text(json.dumps(to_json_dict(maps)), encoding="utf-8"))
    if suffix == ".npz":
        arrays = {k: v for k, v in maps.maps.items()}
        meta = {k: v for k, v in to_json_dict(maps).items() if k != "maps"}
        def write_npz(p: Path) -> None:
            with open(p, "wb") as f:  # a file object: given a path, numpy would append ".npz"
                np.savez_compressed(f, meta=json.dumps(meta), **arrays)

        return _atomic(out, write_npz)
    kinds = [k for k in KINDS if k in maps.maps] if kind == "all" else [kind]
    for k in kinds:
        select(maps, k, layer, head)  # validate before drawing
    if suffix == ".png":
        from aiayn.inspect.png import draw_png

        return _atomic(out, lambda p: draw_png(maps, kinds, layer, head, p))
    if suffix in (".html", ".htm"):
        from aiayn.inspect.html import page

        return _atomic(out, lambda p: p.write_text(page(maps, kinds, layer, head), encoding="utf-8"))
    raise ValueError(f"{out}: unknown extension {suffix or '(none)'}; use .png, .html, .npz, .json or .align")
