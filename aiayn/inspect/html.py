"""A self-contained HTML file (no network) with one heatmap table per layer and head."""

import html


def page(maps, kinds, layer, head) -> str:
    from aiayn.inspect.render import axis_tokens, select

    blocks = []
    for kind in kinds:
        m = select(maps, kind, layer, head)
        queries, keys = axis_tokens(maps, kind)
        layers = range(m.shape[0]) if layer is None else [layer]
        heads = range(m.shape[1]) if head is None else [head]
        for li, layer_index in enumerate(layers):
            for hi, head_index in enumerate(heads):
                blocks.append(_table(f"{kind} — layer {layer_index}, head {head_index}", m[li, hi], queries, keys))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>aiayn attention</title>
<style>body{{font-family:sans-serif;margin:1em}}
table{{border-collapse:collapse;margin:0 1em 1.5em 0;display:inline-table}}
td{{width:22px;height:22px;border:1px solid #eee}} th{{font-weight:normal;font-size:11px;padding:2px}}
th.k{{writing-mode:vertical-rl;transform:rotate(180deg)}} caption{{font-weight:bold;text-align:left}}</style></head>
<body><h2>{html.escape(' '.join(maps.source_tokens))} &rarr; {html.escape(maps.translation)}</h2>
<p>Rows: queries (who attends). Columns: keys (attended to). Hover a cell for its weight.</p>
{''.join(blocks)}</body></html>"""


def _table(title, matrix, queries, keys) -> str:
    head = "".join(f'<th class="k">{html.escape(k)}</th>' for k in keys)
    rows = []
    for q, row in zip(queries, matrix):
        cells = "".join(
            f'<td title="{html.escape(q)} &rarr; {html.escape(k)}: {w:.3f}" '
            f'style="background:rgba(20,60,200,{w:.3f})"></td>' for k, w in zip(keys, row))
        rows.append(f"<tr><th>{html.escape(q)}</th>{cells}</tr>")
    return f"<table><caption>{html.escape(title)}</caption><tr><th></th>{head}</tr>{''.join(rows)}</table>"
