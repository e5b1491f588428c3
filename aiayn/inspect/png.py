"""Matplotlib heatmap grids: rows = layers, columns = heads, token labels on both axes."""

import numpy as np

DPI = 100
MAX_PIXELS = 40e6  # the whole picture (~160 MB of RGBA while drawing); a 1000-token grid asked for terabytes
MIN_PANEL_INCHES = 2.2
MIN_LABEL_INCHES = 0.09  # below this a 7-point label overprints its neighbours


def panel_inches(longest: int, n_panels: int) -> float:
    """Side of one heatmap: ~0.2 in per token keeps 30 tokens readable, within MAX_PIXELS in all."""
    fits = (MAX_PIXELS / n_panels) ** 0.5 / DPI
    if fits < MIN_PANEL_INCHES:
        from aiayn.inspect.capture import InspectError

        raise InspectError(f"{n_panels} heatmaps do not fit in one PNG; choose fewer with --kind, --layer or "
                           f"--head, or write .html / .npz / .json")
    return min(max(MIN_PANEL_INCHES, 0.2 * longest + 1.2), fits)


def draw_png(maps, kinds, layer, head, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from aiayn.inspect.render import axis_tokens, select

    panels = [(k, select(maps, k, layer, head)) for k in kinds]
    n_rows = sum(m.shape[0] for _, m in panels)
    n_cols = max(m.shape[1] for _, m in panels)
    longest = max(max(m.shape[2], m.shape[3]) for _, m in panels)
    cell = panel_inches(longest, n_rows * n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(cell * n_cols, cell * n_rows), squeeze=False)
    row = 0
    font = 7 if longest > 15 else 9
    labelled = cell / longest >= MIN_LABEL_INCHES  # else token labels would overprint: show indices
    for kind, m in panels:
        queries, keys = axis_tokens(maps, kind)
        layers = range(m.shape[0]) if layer is None else [layer]
        heads = range(m.shape[1]) if head is None else [head]
        for li, layer_index in enumerate(layers):
            for hi, head_index in enumerate(heads):
                ax = axes[row + li][hi]
                ax.imshow(m[li, hi], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
                if labelled:
                    ax.set_xticks(np.arange(len(keys)), keys, rotation=90, fontsize=font)
                    ax.set_yticks(np.arange(len(queries)), queries, fontsize=font)
                ax.set_title(f"{kind} L{layer_index} H{head_index}", fontsize=9)
            for hi in range(len(heads), n_cols):
                axes[row + li][hi].axis("off")
        row += m.shape[0]
    fig.suptitle(f"{maps.arch}: {' '.join(maps.source_tokens)}  ->  {maps.translation}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))  # room for the title
    fig.savefig(path, dpi=DPI, format="png")
    plt.close(fig)
