"""Matplotlib heatmap grids: rows = layers, columns = heads, token labels on both axes, axis titles, one
shared colour bar, masked cells hatched. Constrained layout keeps the title, labels and colour bar off
the panels."""

import textwrap

import numpy as np

DPI = 100
MAX_PIXELS = 40e6  # the whole picture (~160 MB of RGBA while drawing); a 1000-token grid asked for terabytes
MIN_PANEL_INCHES = 2.2
MIN_LABEL_INCHES = 0.09  # below this a 7-point label overprints its neighbours
EXTRA_INCHES = (1.3, 1.0)  # width (colour bar) and height (title, notes) around the panels


def panel_inches(longest: int, n_panels: int) -> float:
    """Side of one heatmap: ~0.2 in per token keeps 30 tokens readable, within MAX_PIXELS in all."""
    fits = (MAX_PIXELS / n_panels) ** 0.5 / DPI
    if fits < MIN_PANEL_INCHES:
        from aiayn.inspect.maps.checks import InspectError

        raise InspectError(f"{n_panels} heatmaps do not fit in one PNG; choose fewer with --kind, --layer or "
                           f"--head, or write .html / .npz / .json")
    return min(max(MIN_PANEL_INCHES, 0.2 * longest + 1.2), fits)


def figure_inches(cell: float, n_rows: int, n_cols: int, label_inches: float, title_lines: int = 1
                  ) -> tuple[float, float, float]:
    """(width, height, panel side): room for the labels, the colour bar and the title, the whole still
    within MAX_PIXELS (the panels shrink to make room)."""
    def size(c):
        return (c * n_cols + EXTRA_INCHES[0] + label_inches * n_cols,
                c * n_rows + EXTRA_INCHES[1] + 0.25 * title_lines + label_inches * n_rows)

    width, height = size(cell)
    if width * height * DPI * DPI > MAX_PIXELS:
        cell *= (MAX_PIXELS / (width * height * DPI * DPI)) ** 0.5
        width, height = size(cell)
    return width, height, cell


def _label_inches(maps, kinds, font: int) -> float:
    """About how much room the longest row label takes beside a panel (and the column labels below it)."""
    from aiayn.inspect.maps.labels import axis_labels

    longest = max(len(label) for k in kinds for labels in axis_labels(maps, k) for label in labels)
    return min(2.5, 0.3 + longest * font * 0.6 / 72)


def _panel(ax, matrix, masked, queries, keys, title, font, labelled, cmap):
    from matplotlib.patches import Rectangle

    if masked is not None and masked.any():  # masked cells are transparent over a hatched background
        ax.add_patch(Rectangle((-0.5, -0.5), matrix.shape[1], matrix.shape[0], facecolor="#eeeeee",
                               edgecolor="#9a9a9a", hatch="///", linewidth=0, zorder=0))
        matrix = np.ma.masked_array(matrix, masked)
    image = ax.imshow(matrix, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest", zorder=1)
    if labelled:
        ax.set_xticks(np.arange(len(keys)), keys, rotation=90, fontsize=font)
        ax.set_yticks(np.arange(len(queries)), queries, fontsize=font)
    else:
        ax.tick_params(labelsize=font)
    ax.set_title(title, fontsize=9)
    return image


def draw_png(maps, kinds, layer, head, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from aiayn.inspect.maps.labels import (
        AXIS_TITLES,
        MASKED_NOTE,
        WORD_RULE,
        axis_labels,
        masked_cells,
        panel_title,
        sentence_title,
    )
    from aiayn.inspect.maps.selection import select

    panels = [(k, select(maps, k, layer, head)) for k in kinds]
    n_rows = sum(m.shape[0] for _, m in panels)
    n_cols = max(m.shape[1] for _, m in panels)
    longest = max(max(m.shape[2], m.shape[3]) for _, m in panels)
    font = 7 if longest > 15 else 9
    cell = panel_inches(longest, n_rows * n_cols)
    labelled = cell / longest >= MIN_LABEL_INCHES  # else token labels would overprint: show indices
    width, height, cell = figure_inches(cell, n_rows, n_cols, _label_inches(maps, kinds, font) if labelled else 0.4,
                                        1 + maps.merged + ("decoder_self" in kinds))
    labelled = labelled and cell / longest >= MIN_LABEL_INCHES
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width, height), squeeze=False, layout="constrained")
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad=(0.0, 0.0, 0.0, 0.0))  # masked: see-through
    row, image, any_masked = 0, None, False
    for kind, m in panels:
        queries, keys = axis_labels(maps, kind)
        layers = range(m.shape[0]) if layer is None else [layer]
        heads = range(m.shape[1]) if head is None else [head]
        for li, layer_index in enumerate(layers):
            for hi, head_index in enumerate(heads):
                ax, masked = axes[row + li][hi], masked_cells(maps, kind, m[li, hi])
                any_masked = any_masked or (masked is not None and bool(masked.any()))
                image = _panel(ax, m[li, hi], masked, queries, keys, panel_title(maps, kind, layer_index, head_index),
                               font, labelled, cmap)
                if hi == 0:
                    ax.set_ylabel(AXIS_TITLES[kind][0], fontsize=8)
                if li == len(layers) - 1:
                    ax.set_xlabel(AXIS_TITLES[kind][1], fontsize=8)
            for hi in range(len(heads), n_cols):
                axes[row + li][hi].axis("off")
        row += m.shape[0]
    bar = "attention weight" if maps.measure == "weights" else "share of the row's value-norm contributions"
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=min(1.0, 4.0 / height), label=bar)
    notes = [n for n, wanted in ((MASKED_NOTE, any_masked), (WORD_RULE, maps.merged)) if wanted]
    per_line = max(20, int(width * 72 / (10 * 0.6)))  # characters of a 10-point line across the figure
    lines = [textwrap.fill(text, per_line) for text in [sentence_title(maps), *notes]]
    fig.suptitle("\n".join(lines), fontsize=10)
    fig.savefig(path, dpi=DPI, format="png")
    plt.close(fig)
