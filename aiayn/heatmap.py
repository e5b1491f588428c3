"""HTML heatmap tables, the building block of aiayn's HTML views (the offline map files and the notebook
displays of aiayn.inspect.maps), and a Translation's own display in Jupyter. A leaf that imports nothing of
aiayn, so that a Translation (aiayn.decoding) shows itself with an ordinary import, not one up the layers."""

import html
import re
import uuid

import numpy as np

SPECIAL = ("<s>", "</s>", "<pad>", "<unk>")

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


def scoped_style(scope: str) -> str:
    """STYLE with every rule but the page's body limited to the element with id `scope`."""
    rules = STYLE.split("\n", 1)[1]  # the first rule is the body's
    return re.sub(r"(^|})\s*([^{}]+)\{", lambda m: m.group(1) + ",".join(
        f"#{scope} {sel.strip()}" for sel in m.group(2).split(",")) + "{", rules)


def new_scope() -> str:
    """An element id no other display in the page has."""
    return f"aiayn-{uuid.uuid4().hex[:12]}"


def show_piece(piece: str) -> str:
    """"▁forty" -> "forty"; a piece that continues a word gets a leading "·"; special tokens as they are."""
    if piece in SPECIAL:
        return piece
    if piece.startswith("▁"):
        return piece[1:] or "␣"
    return "·" + piece


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


def translation_html(result) -> str:
    """A Translation: its text and score; with attention maps, the last layer's cross-attention averaged
    over the heads as one heatmap (rows: output tokens, columns: source tokens)."""
    score = "" if result.score is None else f" <span style='color:#57606a'>score {result.score:.3f}</span>"
    text = f"<p style='margin:.2em 0'><b>{html.escape(result.text)}</b>{score}</p>"
    if not result.attention or "cross" not in result.attention:
        return f"<div>{text}</div>"
    weights = np.asarray(result.attention["cross"])[-1].mean(0)  # (T, S)
    rows = [show_piece(t) for t in result.tokens] + ["</s>"] * (weights.shape[0] - len(result.tokens))
    scope = new_scope()
    heatmap = table("cross-attention, last layer, heads averaged", weights, None, rows,
                    [show_piece(t) for t in result.src_tokens])
    return f'<div id="{scope}"><style>{scoped_style(scope)}</style>{text}{heatmap}</div>'
