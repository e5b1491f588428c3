"""Choose a trained run's averaging window, beam size and length penalty on the validation split.

    python bench/select_on_val.py RUN --pair de-en --data-dir ../shared/data/multi30k \
        [--windows 5 10] [--beams 4 5] [--alphas 0.6 1.0] [--split val]

For each window w: the average of the run's last w checkpoints (RUN/average when it averages those, else
written to RUN/average_w; a window longer than the checkpoints kept is skipped); for each (beam, alpha):
the whole split translated, sacreBLEU -lc (the Multi30k convention) and cased. Prints one row per setting
and the best by BLEU -lc (on a tie, the smallest window, beam and alpha).
Choose on val, then score the test split once with the chosen setting (bench/results_table.py): the test
split never takes part in the choice.
"""

import argparse
import itertools
import json
import time
from pathlib import Path

from aiayn.checkpoint import average_checkpoints
from aiayn.data import multi30k
from aiayn.data.corpus import read_parallel
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.evaluation import corpus_bleu
from aiayn.run_dir import step_checkpoints


def _averages(model_dir: Path, checkpoints: list[Path]) -> bool:
    """Whether model_dir is an average of exactly these checkpoints (its info.json says so)."""
    try:
        averaged = json.loads((model_dir / "info.json").read_text()).get("averaged", [])
    except (OSError, ValueError, AttributeError):  # none, unreadable, or not aiayn's
        return False
    return sorted(Path(p).name for p in averaged) == sorted(p.name for p in checkpoints)


def averaged(run: Path, window: int) -> Path | None:
    """The model averaging the run's last `window` checkpoints: RUN/average when it is that average, else
    RUN/average_<window> (made, or remade when it averages other checkpoints). None when the run kept
    fewer checkpoints than the window."""
    checkpoints = step_checkpoints(run)
    if len(checkpoints) < window:
        return None
    last = checkpoints[-window:]
    if _averages(run / "average", last):
        return run / "average"
    out = run / f"average_{window}"
    if not _averages(out, last):
        average_checkpoints(last, out, force=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--pair", required=True, help="e.g. de-en")
    p.add_argument("--data-dir")
    p.add_argument("--split", default="val")
    p.add_argument("--windows", type=int, nargs="+", default=[5, 10])
    p.add_argument("--beams", type=int, nargs="+", default=[4, 5])
    p.add_argument("--alphas", type=float, nargs="+", default=[0.6, 1.0])
    args = p.parse_args()
    if min(args.windows) < 1:
        p.error("--windows: each window is at least 1 checkpoint")
    src_lang, _, tgt_lang = args.pair.partition("-")
    pairs = read_parallel(*multi30k.pair_paths(args.split, src_lang, tgt_lang, args.data_dir))
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    print(f"{args.run} ({args.pair}), {args.split}: {len(pairs)} sentences")
    print("| window | beam | alpha | BLEU -lc | BLEU | decode s |")
    print("|---|---|---|---|---|---|")
    rows = []
    for window in args.windows:
        try:
            model_dir = averaged(args.run, window)
        except AiaynError as err:  # e.g. RUN/average_<w> holds files aiayn did not write: kept, not replaced
            raise SystemExit(f"window {window}: {err}") from None
        if model_dir is None:
            print(f"| {window} | - | - | skipped: fewer than {window} checkpoints kept | | |")
            continue
        translator = Translator.from_pretrained(model_dir)
        for beam, alpha in itertools.product(args.beams, args.alphas):
            start = time.perf_counter()
            hyps = [r.text for r in translator.translate(sources, beam=beam, alpha=alpha)]
            seconds = time.perf_counter() - start
            lc, cased = corpus_bleu(hyps, refs, lowercase=True).score, corpus_bleu(hyps, refs).score
            rows.append((-lc, window, beam, alpha))  # min(): the best BLEU, then the smallest settings
            print(f"| {window} | {beam} | {alpha:g} | {lc:.2f} | {cased:.2f} | {seconds:.0f} |", flush=True)
    if not rows:
        raise SystemExit(f"{args.run}: no window could be averaged")
    lc, window, beam, alpha = min(rows)
    print(f"best on {args.split}: window {window}, beam {beam}, alpha {alpha:g} (BLEU -lc {-lc:.2f})")


if __name__ == "__main__":
    main()
