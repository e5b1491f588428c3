"""A self-contained HTML file (no network): for each kind a grid of heatmap tables, layers down and heads
across, with axis titles, a colour legend, masked cells hatched and the weight of every cell in its
tooltip. fragment() gives the same grids as one <div> with its style scoped to the div's id, to embed
in another page (a notebook cell: aiayn.inspect.maps.notebook) as often as wanted."""

import html

from aiayn.heatmap import STYLE, scoped_style, table

LEGEND = """<div class="legend"><span>0</span><span class="ramp"></span><span>1</span><span class="sw"></span>
<span>masked (&minus;&infin; before the softmax, weight 0)</span></div>"""


def sections(maps, kinds, layer, head) -> str:
    """For each kind its title, axis titles and grid of heatmaps (layers down, heads across)."""
    from aiayn.inspect.maps.labels import AXIS_TITLES, KIND_NAMES, axis_labels, masked_cells
    from aiayn.inspect.maps.selection import select

    parts = []
    for kind in kinds:
        m = select(maps, kind, layer, head)
        queries, keys = axis_labels(maps, kind)
        layers = range(m.shape[0]) if layer is None else [layer]
        heads = range(m.shape[1]) if head is None else [head]
        figures = [table(f"layer {li_model + 1} · head {hi_model + 1}" if maps.multi_head else
                         "decoder steps × encoder states", m[li, hi],
                         masked_cells(maps, kind, m[li, hi]), queries, keys)
                   for li, li_model in enumerate(layers) for hi, hi_model in enumerate(heads)]
        name = KIND_NAMES[kind] if maps.multi_head else "RNN decoder attention"
        parts.append(f"<h2>{html.escape(name)}</h2><p class=axis>rows: {html.escape(AXIS_TITLES[kind][0])}; "
                     f"columns: {html.escape(AXIS_TITLES[kind][1])}</p>"
                     f'<div class="grid" style="grid-template-columns:repeat({len(heads)},max-content)">'
                     f"{''.join(figures)}</div>")
    return "".join(parts)


def fragment(maps, kinds, layer, head, *, scope: str, extra: str = "") -> str:
    """The page's grids as one <div id=scope> (style scoped to it); `extra` goes after the legend."""
    from aiayn.inspect.maps.labels import WORD_RULE, sentence_title

    rule = f"<p class=axis>{html.escape(WORD_RULE)}</p>" if maps.merged else ""
    return (f'<div id="{scope}" class="aiayn-maps"><style>{scoped_style(scope)}</style>'
            f"<p><b>{html.escape(sentence_title(maps))}</b></p>{rule}{LEGEND}{extra}"
            f"{sections(maps, kinds, layer, head)}</div>")


def page(maps, kinds, layer, head) -> str:
    from aiayn.inspect.maps.labels import WORD_RULE, sentence_title

    rule = f"<p class=axis>{html.escape(WORD_RULE)}</p>" if maps.merged else ""
    title = html.escape(sentence_title(maps))  # the tab and a saved file's name say which sentence
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>{title} · aiayn attention</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>
<body><h1 style="font-size:1.2em">{title}</h1>
<p>Each row is a query (who looks), each column a key (what is looked at); a row's weights sum to 1.
Hover a cell for its weight.</p>{rule}
{LEGEND}
{sections(maps, kinds, layer, head)}</body></html>"""
