"""Charts of the diagnostic tools, as PNG (matplotlib, the `viz` extra): the heads ranking as a layer x head
grid (`aiayn heads --plot`), each head's BLEU change when taken out and the greedy pruning's curve (`aiayn
heads --ablate --plot`), a corpus audit's findings and length ratios (`aiayn audit --plot`), and a beam
search trace as a tree of its hypotheses (`draw_beam_trace`). Each writes atomically through aiayn.io."""

from pathlib import Path

import numpy as np

from aiayn.errors import AiaynError, OutputError

DPI = 100
STATUS_COLOURS = {"kept": "#1f77b4", "finished": "#2ca02c", "finished_at_limit": "#ff7f0e", "pruned": "#9a9a9a",
                  "dropped": "#d62728"}


def check_plot_path(option: str, path: str, inputs=(), model_dirs=()) -> None:
    """Before any work: a --plot path is a .png file in an existing directory, never an input or inside a
    model directory in use; else one line saying what and where."""
    from aiayn.io import check_output_file

    p = Path(path)
    if p.is_dir():
        raise OutputError(f"{option} {path} is a directory; give a file name ending in .png")
    if p.suffix.lower() != ".png":
        raise OutputError(f"{option} {path}: a chart is written as PNG; give a file name ending in .png")
    if not p.resolve().parent.is_dir():
        raise OutputError(f"{option} {path}: the directory {p.parent} does not exist; create it first")
    check_output_file(path, inputs, model_dirs)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise AiaynError("a chart needs matplotlib: pip install 'aiayn[viz]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path) -> Path:
    from aiayn.io import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png")
    _pyplot().close(fig)
    return Path(path)


# ------------------------------------------------------------------------------------------------ heads

def draw_heads(scores, path, title: str = "") -> Path:
    """`aiayn heads` as a grid: rows = decoder layers, columns = heads and the layer's mean; each cell its AER
    (lower is better), or its Score (Focus x Coverage, higher is better) without gold; the best is outlined."""
    plt = _pyplot()
    n_layers = 1 + max(s.layer for s in scores)
    n_heads = 1 + max(s.head for s in scores if s.head is not None)
    has_gold = scores[0].aer is not None
    grid = np.full((n_layers, n_heads + 1), np.nan)
    for s in scores:
        grid[s.layer, n_heads if s.head is None else s.head] = s.aer if has_gold else s.score
    fig, ax = plt.subplots(figsize=(1.6 + 0.75 * (n_heads + 1), 1.5 + 0.55 * n_layers), layout="constrained")
    image = ax.imshow(grid, cmap="viridis_r" if has_gold else "viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for (layer, col), value in np.ndenumerate(grid):
        if not np.isnan(value):
            ax.text(col, layer, f"{value:.2f}", ha="center", va="center", fontsize=9,
                    color="white" if (value < 0.5) == has_gold else "black")
    best = scores[0]
    col = n_heads if best.head is None else best.head
    ax.add_patch(plt.Rectangle((col - 0.5, best.layer - 0.5), 1, 1, fill=False, edgecolor="#d62728", linewidth=3))
    ax.axvline(n_heads - 0.5, color="white", linewidth=2)
    ax.set_xticks(range(n_heads + 1), [str(h + 1) for h in range(n_heads)] + ["mean"])
    ax.set_yticks(range(n_layers), [str(layer + 1) for layer in range(n_layers)])
    ax.set_xlabel("head")
    ax.set_ylabel("decoder layer")
    what = "AER (lower is better)" if has_gold else "Score = Focus x Coverage (no gold; higher is better)"
    fig.colorbar(image, ax=ax, label="AER" if has_gold else "Score")
    head = f"{title}\n" if title else ""
    ax.set_title(f"{head}cross-attention {what}; best: {best.name} (red)", fontsize=9)
    return _save(fig, path)


def _ablation_grid(ax, ablation, plt):
    """Rows: each kind's layers (enc 1.., dec 1.., cross 1..); columns: heads; cells: BLEU change."""
    rows = list(dict.fromkeys(r.head.layer_name for r in ablation.single))  # model order
    n_heads = 1 + max(r.head.head for r in ablation.single)
    grid = np.full((len(rows), n_heads), np.nan)
    for r in ablation.single:
        grid[rows.index(r.head.layer_name), r.head.head] = r.quality.bleu - ablation.baseline.bleu
    span = max(float(np.nanmax(np.abs(grid))), 0.5)
    image = ax.imshow(grid, cmap="RdBu", vmin=-span, vmax=span, aspect="auto")
    for (row, col), value in np.ndenumerate(grid):
        ax.text(col, row, f"{value:+.1f}", ha="center", va="center", fontsize=8,
                color="white" if abs(value) > 0.6 * span else "black")
    ax.set_xticks(range(n_heads), [str(h + 1) for h in range(n_heads)])
    ax.set_yticks(range(len(rows)), rows)
    ax.set_xlabel("head")
    ax.set_title(f"BLEU change with one head out (baseline {ablation.baseline.bleu:.2f})", fontsize=9)
    plt.colorbar(image, ax=ax, label="BLEU change")


def _pruning_curve(ax, ablation, max_drop: float):
    base = ablation.baseline.bleu
    bleu = [base] + [r.quality.bleu for r in ablation.pruned]
    ax.plot(range(len(bleu)), bleu, marker="o", markersize=3)
    ax.axhline(base - max_drop, color="#d62728", linestyle="--", linewidth=1, label=f"baseline - {max_drop:g}")
    kept = ablation.removable(max_drop)
    ax.axvline(kept, color="#9a9a9a", linestyle=":", linewidth=1, label=f"{kept} heads out")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("heads removed (greedy: the cheapest first)")
    ax.set_ylabel("BLEU")
    ax.legend(fontsize=8)
    ax.set_title(f"greedy pruning: {ablation.pruned_words}", fontsize=9)


def draw_ablation(ablation, path, max_drop: float = 0.5, title: str = "") -> Path:
    """`aiayn heads --ablate` (aiayn.inspect.ablation.Ablation): a grid of each head's BLEU change when it
    alone is out and, where the heads were pruned, BLEU after each greedy removal."""
    plt = _pyplot()
    panels = 2 if ablation.pruned else 1
    n_rows = len({r.head.layer_name for r in ablation.single})
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 1.8 + 0.4 * n_rows), layout="constrained",
                             squeeze=False)
    _ablation_grid(axes[0, 0], ablation, plt)
    if ablation.pruned:
        _pruning_curve(axes[0, 1], ablation, max_drop)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)


# ------------------------------------------------------------------------------------------------ audit

def _finding_rows(report) -> tuple[list[str], dict]:
    """Rows (finding titles) and per split its counts; a held-out source found in an earlier split (dev in
    train, test in train or dev) counts on the held-out split."""
    from aiayn.data.audit_report import FINDINGS

    rows = [title for _, title in FINDINGS] + ["sources also in an earlier split"]
    counts = {}
    for name, split in report["splits"].items():
        found = split["findings"]
        held = sum(o["count"] for key, o in report["overlap"].items() if key.startswith(f"{name} in "))
        counts[name] = [found.get(key, {}).get("count", 0) for key, _ in FINDINGS] + [held]
    return rows, counts


def draw_audit(report, path) -> Path:
    """A corpus audit: findings per kind and split as bars (the overlaps counted on the split they are found
    in), and each split's distribution of log2(target / source length in characters) with the outlier cut-offs."""
    plt = _pyplot()
    rows, counts = _finding_rows(report)
    names = list(counts)
    fig, (bars, hist) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained", width_ratios=[1.1, 1])
    height = 0.8 / len(names)
    for i, name in enumerate(names):
        y = np.arange(len(rows)) + (i - (len(names) - 1) / 2) * height
        drawn = bars.barh(y, counts[name], height=height, label=f"{name} ({report['splits'][name]['lines']:,} lines)")
        bars.bar_label(drawn, labels=[f"{c:,}" if c else "" for c in counts[name]], fontsize=8, padding=2)
    bars.set_yticks(range(len(rows)), rows, fontsize=8)
    bars.invert_yaxis()
    bars.set_xlabel("lines found")
    bars.set_xlim(0, max(1, max(max(c) for c in counts.values())) * 1.25)
    bars.legend(fontsize=8, loc="lower right")
    bars.set_title("findings per kind and split", fontsize=10)
    t = report["thresholds"]
    for name in names:
        ratios = report["splits"][name]["length_ratios"]
        total = max(1, sum(ratios["counts"]))
        hist.stairs(np.asarray(ratios["counts"]) / total, ratios["log2_edges"], label=name)
    cut = float(np.log2(t["length_ratio"]))
    for x in (-cut, cut):
        hist.axvline(x, color="#d62728", linestyle="--", linewidth=1)
    hist.text(cut, 0.95, f" outliers\n (> x{t['length_ratio']:g})", color="#d62728", fontsize=8,
              transform=hist.get_xaxis_transform(), va="top")
    hist.set_yscale("log")
    hist.set_xlabel("log2(target chars / source chars); outer bins: all beyond", fontsize=9)
    hist.set_ylabel("share of the split's lines")
    hist.legend(fontsize=8, loc="upper left")
    hist.set_title(f"length ratios (longer side >= {t['length_min_chars']} characters)", fontsize=10)
    return _save(fig, path)


# ------------------------------------------------------------------------------------------------ beam trace

def _label(c, eos_ended: bool) -> str:
    token = "</s>" if eos_ended else (c.pieces[-1] if c.pieces else str(c.token))
    return f"{token}  {c.log_prob:.2f}" + (f" (norm {c.score:.2f})" if c.status in ("finished", "finished_at_limit")
                                            else "")


def _layout(trace) -> list[list[tuple[float, object, tuple, bool]]]:
    """Per step: (row, candidate, the tokens of the hypothesis it extends, whether it ended with </s>), rows
    ordered by the row of that hypothesis, then by log-prob, so that lines cross as little as they can."""
    columns, rows_of = [], {(): 0.0}
    for step in trace.steps:
        placed = []
        for c in step.candidates:
            eos_ended = c.status in ("finished", "dropped")
            parent = tuple(c.tokens) if eos_ended else tuple(c.tokens[:-1])
            placed.append((rows_of.get(parent, 0.0), -c.log_prob, c, parent, eos_ended))
        placed.sort(key=lambda p: (p[0], p[1]))
        column = [(float(row), c, parent, eos_ended) for row, (_, _, c, parent, eos_ended) in enumerate(placed)]
        rows_of = {tuple(c.tokens): row for row, c, _, _ in column if c.status == "kept"}
        columns.append(column)
    return columns


def draw_beam_trace(trace, path, title: str = "") -> Path:
    """A Translator.trace as a tree: a column per step, every candidate of the step as a box (its token, raw
    log-prob, and the normalised score of a finished one), coloured by what became of it, joined to the
    hypothesis it extends; the n-best list that the trace replays below."""
    plt = _pyplot()
    columns = _layout(trace)
    n_rows = max(len(c) for c in columns)
    fig, ax = plt.subplots(figsize=(1.2 + 1.75 * len(columns), 1.9 + 0.42 * n_rows), layout="constrained")
    root = ax.text(-1, 0, "<s>", ha="center", va="center", fontsize=8,
                   bbox={"boxstyle": "round,pad=0.25", "facecolor": "#eeeeee", "edgecolor": "#555555"})
    previous = {(): root}
    for x, column in enumerate(columns):
        boxes = {}
        for row, c, parent, eos_ended in column:
            box = ax.text(x, row, _label(c, eos_ended), ha="center", va="center", fontsize=7.5, zorder=2,
                          bbox={"boxstyle": "round,pad=0.25", "facecolor": "white",
                                "edgecolor": STATUS_COLOURS[c.status], "linewidth": 1.2})
            if parent in previous:  # a line from the right edge of the hypothesis it extends to its left edge
                ax.annotate("", xy=(0, 0.5), xycoords=box, xytext=(1, 0.5), textcoords=previous[parent],
                            arrowprops={"arrowstyle": "-", "color": STATUS_COLOURS[c.status], "linewidth": 0.8,
                                        "alpha": 0.7, "shrinkA": 2, "shrinkB": 2})
            if c.status == "kept":
                boxes[tuple(c.tokens)] = box
        previous = boxes
    ax.set_xlim(-1.5, len(columns) - 0.4)
    ax.set_ylim(n_rows - 0.4, -0.6)
    ax.set_xticks(range(len(columns)), [f"step {s.step + 1}" for s in trace.steps], fontsize=8)
    ax.set_yticks([])
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(facecolor="white", edgecolor=colour, label=status)
                       for status, colour in STATUS_COLOURS.items()], ncols=5, fontsize=8, loc="upper center",
              bbox_to_anchor=(0.5, -0.08), frameon=False)
    best = "; ".join(f"{c.text} ({c.score:.3f})" for c in trace.replay())
    head = f"{title}\n" if title else ""
    ax.set_title(f"{head}beam {trace.beam}, length penalty alpha {trace.alpha:g}; box: token, log-prob "
                 f"(finished: and log-prob / length penalty)\nn-best: {best}", fontsize=8.5, loc="left")
    return _save(fig, path)
