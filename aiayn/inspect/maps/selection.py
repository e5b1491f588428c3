"""One kind, layer and head of captured attention maps: what every writer (render.py, png.py, html.py)
draws from. A leaf of the writers, so that they need not import each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from aiayn.inspect.maps.checks import InspectError, check_index

if TYPE_CHECKING:  # for the annotations only: AttentionMaps shows itself through the notebook display, which selects
    from aiayn.inspect.maps.attention_maps import AttentionMaps


def select(maps: AttentionMaps, kind: str, layer: int | None, head: int | None) -> np.ndarray:
    """(L', H', Q, K) for the chosen kind, layer and head (None = all)."""
    if kind not in maps.maps:
        raise InspectError(f"--kind {kind}: this {maps.arch} model has no {kind} attention; available: "
                           f"{', '.join(sorted(maps.maps))} (or all)")
    m = maps.maps[kind]
    check_index(layer, m.shape[0], "layer")
    check_index(head, m.shape[1], "head")
    if layer is not None:
        m = m[layer: layer + 1]
    if head is not None:
        m = m[:, head: head + 1]
    return m
