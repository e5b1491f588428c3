"""Matplotlib heatmap grids: rows = layers, columns = heads, token labels on both axes."""

import numpy as np


def draw_png(maps, kinds, layer, head, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from aiayn.inspect.render import axis_tokens, select

    panels = [(k, select(maps, k, layer, head)) for k in kinds]
    n_rows = sum(m.shape[0] for _, m in panels)
    n_cols = max(m.shape[1] for _, m in panels)
    longest = max(max(m.shape[2], m.shape[3]) for _, m in panels)
    cell = max(2.2, 0.2 * longest + 1.2)  # inches per heatmap: ~0.2 in per token keeps 30 tokens readable
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(cell * n_cols, cell * n_rows), squeeze=False)
    row = 0
    font = 7 if longest > 15 else 9
    for kind, m in panels:
        queries, keys = axis_tokens(maps, kind)
        layers = range(m.shape[0]) if layer is None else [layer]
        heads = range(m.shape[1]) if head is None else [head]
        for li, layer_index in enumerate(layers):
            for hi, head_index in enumerate(heads):
                ax = axes[row + li][hi]
                ax.imshow(m[li, hi], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
                ax.set_xticks(np.arange(len(keys)), keys, rotation=90, fontsize=font)
                ax.set_yticks(np.arange(len(queries)), queries, fontsize=font)
                ax.set_title(f"{kind} L{layer_index} H{head_index}", fontsize=9)
            for hi in range(len(heads), n_cols):
                axes[row + li][hi].axis("off")
        row += m.shape[0]
    fig.suptitle(f"{maps.arch}: {' '.join(maps.source_tokens)}  ->  {maps.translation}", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))  # room for the title
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
