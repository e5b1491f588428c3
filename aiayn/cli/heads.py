"""`aiayn heads`: cross-attention heads ranked by how well they align words (aiayn.inspect.alignment.heads).
Wiring and printing only."""

import json
import sys

MODEL_HELP = "checkpoint directory, or a training output directory (then average/, else best/, else latest)"
GOLD_HELP = ("gold word alignments, one Pharaoh line per sentence pair: i-j (sure) or i?j (possible), source word "
             "i, target word j, 0-based over the lines split at whitespace (default: a model of the built-in "
             "number task uses the task's own gold; otherwise heads are ranked by attention statistics)")


def add_alignment_head(p) -> None:
    """translate's --alignment-head (the hook lives here, beside the command that ranks the heads)."""
    p.add_argument("--alignment-head", metavar="L:H", help="with --alignment: the cross-attention the links come "
                   "from: L:H (decoder layer L, head H, counted from 1), L:mean (layer L's mean over heads), best "
                   "(the best head on the built-in task's gold, for a model trained on it) or a file of `aiayn heads "
                   "--json` (its best head) (default: the last layer's mean)")


def alignment_function(args, translator):
    """result -> its Pharaoh alignment for --alignment (None without it), from --alignment-head's head."""
    from aiayn.errors import AiaynError
    from aiayn.inspect.alignment.head_choice import choose_head, head_alignment

    if not args.alignment:
        if args.alignment_head:
            raise AiaynError("--alignment-head chooses where --alignment's links come from: add --alignment")
        return lambda result: None
    # default (None, None): the last layer's mean
    layer, head = choose_head(args.alignment_head, translator) if args.alignment_head else (None, None)
    return lambda result: head_alignment(result, translator, layer, head)


def add_parsers(sub) -> None:
    p = sub.add_parser("heads", help="rank cross-attention heads by alignment error rate (AER) against gold "
                       "word alignments")
    p.add_argument("--model", help=MODEL_HELP)
    p.add_argument("--gold", metavar="FILE", help=GOLD_HELP)
    p.add_argument("--src", metavar="FILE", help="source sentences, one a line (with --tgt; default: the built-in "
                   "task's held-out test pairs, for a model trained on it)")
    p.add_argument("--tgt", metavar="FILE", help="target sentences forced through the model (teacher forcing)")
    p.add_argument("--limit", type=int, default=0, help="rank on the first N pairs only (default: 0 = all)")
    p.add_argument("--json", action="store_true", help="machine-readable output (default: a table)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the ranking as a picture: a layer x head grid of "
                   "AER (or Score without gold), the numbers in the cells, the best outlined (needs matplotlib)")
    p.add_argument("--write-gold", metavar="FILE", help="write the built-in task's held-out pairs and their gold "
                   "alignments: FILE (Pharaoh), FILE.src and FILE.tgt (of --model's task, else configs/demo.yaml's), "
                   "and stop")
    p.add_argument("--force", action="store_true", help="with --write-gold: replace existing FILE.src and FILE.tgt "
                   "(default: refuse; FILE itself is replaced like any output)")



def _pairs(args, cfg):
    from aiayn.errors import AiaynError
    from aiayn.inspect.alignment.head_choice import builtin_pairs

    if bool(args.src) != bool(args.tgt):
        raise AiaynError("give --src and --tgt together (the sentence pairs forced through the model)")
    if args.src:
        from aiayn.data.corpus import read_lines

        src, tgt = read_lines(args.src, allow_empty=True), read_lines(args.tgt, allow_empty=True)
        if len(src) != len(tgt):
            raise AiaynError(f"--src {args.src} has {len(src)} lines, --tgt {args.tgt} {len(tgt)}: give one target "
                             f"line per source line")
        blank = next((n for n, pair in enumerate(zip(src, tgt), start=1) if not all(s.strip() for s in pair)), None)
        if not src or blank is not None:
            where = "have no lines" if not src else f"line {blank} is blank"
            raise AiaynError(f"--src {args.src} / --tgt {args.tgt}: {where}; heads are ranked on sentence pairs, "
                             f"one a line on each side")
        return list(zip(src, tgt)), f"{args.src} / {args.tgt}"
    pairs = builtin_pairs(cfg.data)
    if pairs is None:
        raise AiaynError("this model was not trained on the built-in task: give --src and --tgt (and --gold "
                         "for AER)")
    return list(pairs), "the built-in task's held-out test set"


def _gold(args, pairs, builtin: bool):
    from aiayn.inspect.alignment.gold import read_gold
    from aiayn.inspect.alignment.head_choice import builtin_golds

    if args.gold:
        return read_gold(args.gold, pairs), args.gold
    if builtin:
        return builtin_golds(pairs), "the built-in task's gold alignments"
    return None, None


def _write_gold(args) -> int:
    from aiayn.config import load_config
    from aiayn.data.synthetic import gold_alignments
    from aiayn.inspect.alignment.head_choice import builtin_pairs
    from aiayn.io import check_derived_files, write_output_file

    check_derived_files("--write-gold", args.write_gold, [f"{args.write_gold}.src", f"{args.write_gold}.tgt"],
                        force=args.force)
    if args.model:
        from aiayn.checkpoint import load_config_file
        from aiayn.run_dir import resolve_model_dir

        cfg = load_config_file(resolve_model_dir(args.model))
    else:
        from pathlib import Path

        cfg = load_config(Path(__file__).resolve().parent.parent / "configs" / "demo.yaml", [])
    pairs = builtin_pairs(cfg.data)
    if pairs is None:
        from aiayn.errors import AiaynError

        raise AiaynError(f"--write-gold: {args.model} was not trained on the built-in task; it has no built-in gold")
    out = args.write_gold
    for path, lines in ((out, gold_alignments(pairs)), (f"{out}.src", [s for s, _ in pairs]),
                        (f"{out}.tgt", [t for _, t in pairs])):
        write_output_file(path, "".join(line + "\n" for line in lines), model_dirs=[args.model])
    print(f"wrote {len(pairs)} pairs: {out} (gold), {out}.src, {out}.tgt")
    return 0


def _table(scores, gold_name) -> str:
    rows = ["rank  head    AER     Score   Focus   Entropy Agree   Cover"]
    for rank, s in enumerate(scores, start=1):
        aer = "-" if s.aer is None else f"{s.aer:.3f}"
        rows.append(f"{rank:<5} {s.name:<7} {aer:<7} {s.score:<7.3f} {s.focus:<7.3f} {s.entropy:<7.3f} "
                    f"{s.agreement:<7.3f} {s.coverage:<7.3f}")
    if gold_name is None:
        rows.append("no gold alignments: AER is not known; ranked by Score = Focus x Coverage (see `aiayn heads "
                    "--help` and the heads guide)")
    return "\n".join(rows)


def cmd_heads(args) -> int:
    from aiayn.decoding.translator import Translator
    from aiayn.errors import AiaynError
    from aiayn.inspect.alignment.head_choice import model_config
    from aiayn.inspect.alignment.heads import rank_heads

    if args.write_gold:
        return _write_gold(args)
    if not args.model:
        raise AiaynError("give --model (the model whose heads are ranked), or --write-gold FILE")
    if args.limit < 0:
        raise AiaynError(f"--limit {args.limit}: give 0 (all pairs) or a positive number")
    if args.plot:
        from aiayn.inspect.maps.charts import check_plot_path

        check_plot_path("--plot", args.plot, inputs=[args.src, args.tgt, args.gold], model_dirs=[args.model])
    translator = Translator.from_pretrained(args.model)
    cfg = model_config(translator)
    pairs, data_name = _pairs(args, cfg)
    golds, gold_name = _gold(args, pairs, builtin=not args.src)
    if args.limit:
        pairs, golds = pairs[: args.limit], golds[: args.limit] if golds is not None else None
    scores, skipped = rank_heads(translator, pairs, golds)
    if args.json:
        json.dump({"model": str(translator.model_dir), "data": data_name, "gold": gold_name, "pairs": len(pairs),
                   "skipped": skipped, "heads": [s.to_dict() for s in scores]}, sys.stdout, indent=1)
        print()
    else:
        print(f"{len(pairs) - skipped} pairs of {data_name}; gold: {gold_name or 'none'}")
        print(_table(scores, gold_name))
    if args.plot:
        from aiayn.inspect.maps.charts import draw_heads

        draw_heads(scores, args.plot, title=f"{len(pairs) - skipped} pairs of {data_name}")
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    if skipped:
        print(f"warning: {skipped} pairs skipped: the model's words (subwords merged at ▁) are not the lines' "
              f"whitespace words, so gold indices would point at other words", file=sys.stderr)
    return 0


COMMANDS = {"heads": cmd_heads}
