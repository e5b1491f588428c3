"""A self-contained HTML file (no network): for each kind a grid of heatmap tables, layers down and heads
across, with axis titles, a colour legend, masked cells hatched and the weight of every cell in its
tooltip. fragment() gives the same grids as one <div> with its style scoped to the div's id, to embed
in another page (a notebook cell: aiayn.inspect.notebook) as often as wanted."""

import html
import re

STYLE = """body{font-family:system-ui,sans-serif;margin:1em;color:#1f2328}
.grid{display:grid;gap:1.2em 1.5em;align-items:start;overflow-x:auto;margin-bottom:2em}
figure{margin:0} figcaption{font-weight:600;font-size:13px;margin-bottom:.3em}
table{border-collapse:collapse} td{width:22px;min-width:22px;height:22px;border:1px solid #eee;padding:0}
th{font-weight:normal;font-size:11px;padding:1px 3px;white-space:nowrap;text-align:right}
th.k{writing-mode:vertical-rl;text-orientation:sideways;transform:rotate(180deg);text-align:left}
td.m{background:repeating-linear-gradient(45deg,#f3f4f6 0 3px,#c9ccd1 3px 4px)}
.axis{font-size:11px;color:#57606a;font-style:italic}
.legend{display:flex;align-items:center;gap:.4em;font-size:12px;margin:.5em 0 1em}
.ramp{display:inline-block;width:140px;height:12px;border:1px solid #ccc;
background:linear-gradient(to right,rgba(29,78,216,0),rgba(29,78,216,1))}
.sw{display:inline-block;width:14px;height:14px;border:1px solid #ccc;margin-left:1em;
background:repeating-linear-gradient(45deg,#f3f4f6 0 3px,#c9ccd1 3px 4px)}"""


LEGEND = """<div class="legend"><span>0</span><span class="ramp"></span><span>1</span><span class="sw"></span>
<span>masked (&minus;&infin; before the softmax, weight 0)</span></div>"""


def scoped_style(scope: str) -> str:
    """STYLE with every rule but the page's body limited to the element with id `scope`."""
    rules = STYLE.split("\n", 1)[1]  # the first rule is the body's
    return re.sub(r"(^|})\s*([^{}]+)\{", lambda m: m.group(1) + ",".join(
        f"#{scope} {sel.strip()}" for sel in m.group(2).split(",")) + "{", rules)


def sections(maps, kinds, layer, head) -> str:
    """For each kind its title, axis titles and grid of heatmaps (layers down, heads across)."""
    from aiayn.inspect.labels import AXIS_TITLES, KIND_NAMES, axis_labels, masked_cells
    from aiayn.inspect.selection import select

    parts = []
    for kind in kinds:
        m = select(maps, kind, layer, head)
        queries, keys = axis_labels(maps, kind)
        layers = range(m.shape[0]) if layer is None else [layer]
        heads = range(m.shape[1]) if head is None else [head]
        figures = [table(f"layer {li_model + 1} · head {hi_model + 1}" if maps.arch != "rnn" else
                         "decoder steps × encoder states", m[li, hi],
                         masked_cells(maps, kind, m[li, hi]), queries, keys)
                   for li, li_model in enumerate(layers) for hi, hi_model in enumerate(heads)]
        name = "RNN decoder attention" if maps.arch == "rnn" else KIND_NAMES[kind]
        parts.append(f"<h2>{html.escape(name)}</h2><p class=axis>rows: {html.escape(AXIS_TITLES[kind][0])}; "
                     f"columns: {html.escape(AXIS_TITLES[kind][1])}</p>"
                     f'<div class="grid" style="grid-template-columns:repeat({len(heads)},max-content)">'
                     f"{''.join(figures)}</div>")
    return "".join(parts)


def fragment(maps, kinds, layer, head, *, scope: str, extra: str = "") -> str:
    """The page's grids as one <div id=scope> (style scoped to it); `extra` goes after the legend."""
    from aiayn.inspect.labels import WORD_RULE, sentence_title

    rule = f"<p class=axis>{html.escape(WORD_RULE)}</p>" if maps.merged else ""
    return (f'<div id="{scope}" class="aiayn-maps"><style>{scoped_style(scope)}</style>'
            f"<p><b>{html.escape(sentence_title(maps))}</b></p>{rule}{LEGEND}{extra}"
            f"{sections(maps, kinds, layer, head)}</div>")


def page(maps, kinds, layer, head) -> str:
    from aiayn.inspect.labels import WORD_RULE, sentence_title

    rule = f"<p class=axis>{html.escape(WORD_RULE)}</p>" if maps.merged else ""
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>aiayn attention</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>
<body><h1 style="font-size:1.2em">{html.escape(sentence_title(maps))}</h1>
<p>Each row is a query (who looks), each column a key (what is looked at); a row's weights sum to 1.
Hover a cell for its weight.</p>{rule}
{LEGEND}
{sections(maps, kinds, layer, head)}</body></html>"""


def table(title, matrix, masked, queries, keys) -> str:
    """One heatmap: a row per query, a column per key, each cell's weight in its colour and tooltip."""
    head = "".join(f'<th class="k" scope="col">{html.escape(k)}</th>' for k in keys)
    rows = []
    for q, (query, row) in enumerate(zip(queries, matrix)):
        cells = []
        for k, (key, w) in enumerate(zip(keys, row)):
            where = f"{html.escape(query)} &rarr; {html.escape(key)}"
            if masked is not None and masked[q, k]:
                cells.append(f'<td class="m" title="{where}: masked"></td>')
            else:
                cells.append(f'<td title="{where}: {w:.3f}" style="background:rgba(29,78,216,{w:.3f})"></td>')
        rows.append(f'<tr><th scope="row">{html.escape(query)}</th>{"".join(cells)}</tr>')
    return (f"<figure><figcaption>{html.escape(title)}</figcaption>"
            f"<table><tr><td style='border:0'></td>{head}</tr>{''.join(rows)}</table></figure>")
