"""Attention maps and translations shown inline in Jupyter: self-contained HTML (inline CSS, SVG and a few
lines of script; nothing fetched, no server), every display with ids of its own so that a notebook can
show many. The heatmaps are aiayn.inspect.maps.html's (fragment mode); the line view draws, for every query
token, a line to each key token, as dark as its weight (hover a query token to see only its lines).

    view(maps, kind="encoder_self", layer=0)   # any kind, layer, head
    maps                                      # capture()'s result: cross-attention of the last layer
    translation                               # a Translation: text, score, averaged cross-attention
                                              # (its own display: aiayn.heatmap.translation_html)
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from aiayn.heatmap import new_scope
from aiayn.inspect.maps.html import fragment
from aiayn.inspect.maps.labels import AXIS_TITLES, KIND_NAMES, axis_labels
from aiayn.inspect.maps.selection import select

if TYPE_CHECKING:  # for the annotations only: AttentionMaps shows itself through this module
    from aiayn.inspect.maps.attention_maps import AttentionMaps

NOTEBOOK_STYLE = "h2{font-size:1em;margin:.8em 0 .2em} svg text{font-size:11px;cursor:default}"
# hover a query token: only its lines stay visible (scoped to this display's own element)
LINES_SCRIPT = """<script>(function(){var root=document.getElementById("%s");if(!root)return;
var lines=root.querySelectorAll("line[data-q]");root.querySelectorAll("text[data-q]").forEach(function(t){
t.addEventListener("mouseenter",function(){lines.forEach(function(l){l.style.display=
l.dataset.q===t.dataset.q?"":"none";});});t.addEventListener("mouseleave",function(){
lines.forEach(function(l){l.style.display="";});});});})();</script>"""


def line_view(weights: np.ndarray, queries: list[str], keys: list[str], *, scope: str, title: str) -> str:
    """SVG: keys along the top, queries along the bottom, a line from query q to key k with opacity w[q, k]."""
    step, height = 56, 150
    width = step * max(len(queries), len(keys)) + 20
    x = lambda i: 10 + step * i + step / 2  # noqa: E731
    lines = "".join(f'<line data-q="{q}" x1="{x(q):.0f}" y1="{height - 22}" x2="{x(k):.0f}" y2="22" '
                    f'stroke="rgb(29,78,216)" stroke-width="2" stroke-opacity="{w:.3f}"></line>'
                    for q, row in enumerate(weights) for k, w in enumerate(row) if w >= 0.005)
    tops = "".join(f'<text x="{x(k):.0f}" y="14" text-anchor="middle">{html.escape(t)}</text>'
                   for k, t in enumerate(keys))
    bottoms = "".join(f'<text data-q="{q}" x="{x(q):.0f}" y="{height - 6}" text-anchor="middle">{html.escape(t)}'
                      f"<title>{html.escape(t)}</title></text>" for q, t in enumerate(queries))
    return (f"<figure><figcaption>{html.escape(title)}</figcaption>"
            f'<svg width="{width}" height="{height}" role="img" '
            f'aria-label="{html.escape(title)}">{lines}{tops}{bottoms}</svg></figure>' + LINES_SCRIPT % scope)


@dataclass(frozen=True, kw_only=True)
class AttentionView:
    """One kind of a sentence's maps for a notebook: the line view (heads averaged, or the chosen head) and
    a heatmap per head of the chosen layer (default: the last)."""

    maps: AttentionMaps
    kind: str = "cross"
    layer: int | None = None
    head: int | None = None

    def _repr_html_(self) -> str:
        n_layers = select(self.maps, self.kind, None, None).shape[0]
        layer = n_layers - 1 if self.layer is None else self.layer
        weights = select(self.maps, self.kind, layer, self.head)[0].mean(0)  # (Q, K)
        queries, keys = axis_labels(self.maps, self.kind)
        if self.kind != "encoder_self":
            queries = [q.rsplit("→ ", 1)[-1] for q in queries]  # the line view names a row by what it predicts
        # titles count layers and heads from 1, as the heatmaps' labels and the page do (the arguments from 0)
        which = "the average of the heads" if self.head is None else f"head {self.head + 1}"
        name = KIND_NAMES[self.kind] if self.maps.multi_head else "RNN decoder attention"
        scope = new_scope()
        lines = line_view(weights, queries, keys, scope=scope,
                          title=f"lines: {name}, layer {layer + 1}, {which} (bottom: {AXIS_TITLES[self.kind][0]}; "
                                f"top: {AXIS_TITLES[self.kind][1]})")
        body = fragment(self.maps, [self.kind], layer, self.head, scope=scope, extra=lines)
        return body.replace("</style>", f"{_scoped_extra(scope)}</style>", 1)


def _scoped_extra(scope: str) -> str:
    return " ".join(f"#{scope} {rule}}}" for rule in NOTEBOOK_STYLE.split("}") if rule.strip())


def view(maps: AttentionMaps, *, kind: str = "cross", layer: int | None = None,
         head: int | None = None) -> AttentionView:
    """What a notebook shows of `maps`: the chosen kind (cross, encoder_self, decoder_self), layer (default:
    the last) and head (default: every head's heatmap, their average in the line view)."""
    select(maps, kind, layer, head)  # a kind, layer or head the model lacks fails here, not at display
    return AttentionView(maps=maps, kind=kind, layer=layer, head=head)
