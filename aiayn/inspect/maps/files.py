"""Write captured attention maps as PNG (grid of heatmaps, layers x heads), offline HTML, NPZ, JSON or a
hard alignment, chosen by the file extension. --kind / --layer / --head select what every format holds
(NPZ and JSON keep the (L, H, Q, K) shape, with only the chosen layers and heads, and record which in
`selection`). Files are written under a temporary name and renamed."""

import json
from pathlib import Path

import numpy as np

from aiayn.inspect.maps.attention_maps import AttentionMaps
from aiayn.inspect.maps.capture import hard_alignment
from aiayn.inspect.maps.checks import InspectError
from aiayn.inspect.maps.selection import select
from aiayn.io import atomic_path

SCHEMA_VERSION = 2  # 2: maps hold the selected kinds, layers and heads; `selection` says which
KINDS = ("encoder_self", "decoder_self", "cross")
FORMATS = (".png", ".html", ".htm", ".npz", ".json", ".align")


def axis_tokens(maps: AttentionMaps, kind: str) -> tuple[list[str], list[str]]:
    """(query labels, key labels) of one kind of map."""
    return {"encoder_self": (maps.source_tokens, maps.source_tokens),
            "decoder_self": (maps.target_tokens, maps.target_input_tokens),
            "cross": (maps.target_tokens, maps.source_tokens)}[kind]


def chosen_kinds(maps: AttentionMaps, kind: str) -> list[str]:
    """--kind all: every kind the model has; else the one named, which the model must have."""
    if kind == "all":
        return [k for k in KINDS if k in maps.maps]
    select(maps, kind, None, None)  # raises for a kind the model lacks
    return [kind]


def selected(maps: AttentionMaps, kinds: list[str], layer: int | None, head: int | None) -> tuple[dict, dict]:
    """({kind: (L', H', Q, K) array}, {kind: {"layers": [...], "heads": [...]}}): the maps kept and the
    model's index of each layer and head kept, so a file says what its rows are."""
    arrays, selection = {}, {}
    for k in kinds:
        arrays[k] = select(maps, k, layer, head)
        n_layers, n_heads = maps.maps[k].shape[:2]
        selection[k] = {"layers": list(range(n_layers)) if layer is None else [layer],
                        "heads": list(range(n_heads)) if head is None else [head]}
    return arrays, selection


def _metadata(maps: AttentionMaps, selection: dict) -> dict:
    return {"schema_version": SCHEMA_VERSION, "arch": maps.arch, "translation": maps.translation,
            "merged_words": maps.merged, "measure": maps.measure,
            "source_tokens": maps.source_tokens, "target_tokens": maps.target_tokens,
            "target_input_tokens": maps.target_input_tokens, "selection": selection}


def to_json_dict(maps: AttentionMaps, kind: str = "all", layer: int | None = None, head: int | None = None) -> dict:
    arrays, selection = selected(maps, chosen_kinds(maps, kind), layer, head)
    return {**_metadata(maps, selection), "maps": {k: np.round(v, 5).tolist() for k, v in arrays.items()}}


def _atomic(path: Path, write) -> Path:
    with atomic_path(path) as tmp:
        write(tmp)
    return path


def _write_align(maps: AttentionMaps, out: Path, kind: str, layer: int | None, head: int | None) -> Path:
    """Hard alignment, Pharaoh "i-j" (source i, target j), from cross-attention only."""
    if kind not in ("cross", "all"):
        raise InspectError(f"{out}: an alignment comes from cross-attention; use --kind cross, not {kind}")
    line = hard_alignment(maps, layer, None if head is None else [head]) + "\n"
    return _atomic(out, lambda p: p.write_text(line, encoding="utf-8"))


def _write_npz(maps: AttentionMaps, out: Path, kinds: list[str], layer: int | None, head: int | None) -> Path:
    arrays, selection = selected(maps, kinds, layer, head)
    meta = _metadata(maps, selection)

    def write(p: Path) -> None:
        with open(p, "wb") as f:  # a file object: given a path, numpy would append ".npz"
            np.savez_compressed(f, meta=json.dumps(meta), **arrays)

    return _atomic(out, write)


def write_maps(maps: AttentionMaps, out: str | Path, kind: str = "cross", layer: int | None = None,
               head: int | None = None) -> Path:
    """Write the chosen kind ("all" = every kind the model has), layer and head (None = all) in the format
    of out's extension. Every format checks the choice against the model before writing anything."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in FORMATS:
        raise InspectError(f"{out}: unknown extension {suffix or '(none)'}; use .png, .html, .npz, .json or .align")
    if suffix == ".align":
        return _write_align(maps, out, kind, layer, head)
    kinds = chosen_kinds(maps, kind)
    for k in kinds:
        select(maps, k, layer, head)  # validate before writing
    if suffix == ".json":
        body = json.dumps(to_json_dict(maps, kind, layer, head))
        return _atomic(out, lambda p: p.write_text(body, encoding="utf-8"))
    if suffix == ".npz":
        return _write_npz(maps, out, kinds, layer, head)
    if suffix == ".png":
        from aiayn.inspect.maps.png import draw_png

        return _atomic(out, lambda p: draw_png(maps, kinds, layer, head, p))
    from aiayn.inspect.maps.html import page

    return _atomic(out, lambda p: p.write_text(page(maps, kinds, layer, head), encoding="utf-8"))
