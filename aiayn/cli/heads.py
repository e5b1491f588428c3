"""`aiayn heads`: cross-attention heads ranked by how well they align words (aiayn.inspect.alignment.heads),
or, with --ablate, every head taken out in turn and the least useful pruned greedily (aiayn.inspect.ablation).
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
    p.add_argument("--alignment-from", default="weights", choices=["weights", "contributions"],
                   help="with --alignment: what the links are read from: weights (the cross-attention weights) or "
                   "contributions (the cross-attention's value-norm maps ||alpha_ij f(x_j)||, each row normalised "
                   "to sum to 1, from the same head or layer mean; Transformer models) (default: weights)")


def check_alignment_head(args, cfg) -> None:
    """--alignment-head against --alignment and the model's config, before the model is loaded (or compiled)."""
    from aiayn.errors import AiaynError
    from aiayn.inspect.alignment.head_choice import check_head

    if args.alignment_head and not getattr(args, "alignment", True):
        raise AiaynError("--alignment-head chooses where --alignment's links come from: add --alignment")
    if args.alignment_head:
        check_head(args.alignment_head, cfg)


def alignment_function(args, translator):
    """result -> its Pharaoh alignment for --alignment (None without it), from --alignment-head's head, read
    from --alignment-from's measure."""
    from aiayn.errors import AiaynError
    from aiayn.inspect.alignment.head_choice import choose_head, head_alignment

    if not args.alignment:
        if args.alignment_head:
            raise AiaynError("--alignment-head chooses where --alignment's links come from: add --alignment")
        return lambda result: None
    # default (None, None): the last layer's mean
    layer, head = choose_head(args.alignment_head, translator) if args.alignment_head else (None, None)
    return lambda result: head_alignment(result, translator, layer, head, measure=args.alignment_from)


def add_parsers(sub) -> None:
    p = sub.add_parser("heads", help="rank cross-attention heads by alignment error rate (AER) against gold "
                       "word alignments; with --ablate, take each head out and measure what BLEU and loss lose")
    p.add_argument("--model", help=MODEL_HELP)
    p.add_argument("--gold", metavar="FILE", help=GOLD_HELP)
    p.add_argument("--src", metavar="FILE", help="source sentences, one a line (with --tgt; default: the built-in "
                   "task's held-out test pairs, for a model trained on it)")
    p.add_argument("--tgt", metavar="FILE", help="target sentences forced through the model (teacher forcing)")
    p.add_argument("--limit", type=int, default=0, help="rank (or ablate) on the first N pairs only (default: 0 = "
                   "all)")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE", help="machine-readable output: on stdout, or "
                   "written to FILE (default: a table)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the result as a picture: a layer x head grid of "
                   "AER (or Score without gold), the numbers in the cells, the best outlined; with --ablate, each "
                   "head's BLEU change and the greedy pruning's BLEU curve (needs matplotlib)")
    p.add_argument("--ablate", action="store_true", help="take every head out in turn (encoder self, decoder self "
                   "and cross-attention; its output zeroed before W^O) and report the change in BLEU (sacreBLEU) "
                   "and loss (teacher-forced NLL per reference token) on --src/--ref; then prune --prune's heads "
                   "greedily (the one whose removal costs least goes, repeat), BLEU after each removal")
    p.add_argument("--ref", metavar="FILE", help="with --ablate: reference translations of --src, one a line "
                   "(default: the built-in task's held-out test pairs, for a model trained on it)")
    p.add_argument("--beam", type=int, default=1, help="with --ablate: beam size of the translations scored (default: "
                   "1, greedy; each head costs one pass over the sentences)")
    p.add_argument("--prune", default="encoder_self", metavar="KINDS", help="with --ablate: the heads the greedy "
                   "pruning chooses from: kinds separated by commas of encoder_self, decoder_self, cross, or all, or "
                   "none (default: encoder_self; the pruning measures every head left at every step)")
    p.add_argument("--prune-steps", type=int, default=0, metavar="N", help="with --ablate: stop the pruning after N "
                   "heads (default: 0 = until all of --prune's heads are out)")
    p.add_argument("--max-drop", type=float, default=0.5, metavar="BLEU", help="with --ablate: report how many "
                   "heads the pruning takes out before BLEU falls more than this below the baseline (default: 0.5)")
    p.add_argument("--write-gold", metavar="FILE", help="write the built-in task's held-out pairs and their gold "
                   "alignments: FILE (Pharaoh), FILE.src and FILE.tgt (of --model's task, else configs/demo.yaml's), "
                   "and stop")
    p.add_argument("--force", action="store_true", help="with --write-gold: replace existing FILE.src and FILE.tgt "
                   "(default: refuse; FILE itself is replaced like any output)")



def _pairs(args, cfg, tgt_option: str = "--tgt"):
    """The sentence pairs: --src with its --tgt (or --ref, for --ablate), else the built-in task's."""
    from aiayn.errors import AiaynError
    from aiayn.inspect.alignment.head_choice import builtin_pairs

    tgt_path = args.ref if tgt_option == "--ref" else args.tgt
    if bool(args.src) != bool(tgt_path):
        raise AiaynError(f"give --src and {tgt_option} together (the sentence pairs forced through the model)")
    if args.src:
        from aiayn.data.corpus import read_lines

        src, tgt = read_lines(args.src, allow_empty=True), read_lines(tgt_path, allow_empty=True)
        if len(src) != len(tgt):
            raise AiaynError(f"--src {args.src} has {len(src)} lines, {tgt_option} {tgt_path} {len(tgt)}: give one "
                             f"target line per source line")
        blank = next((n for n, pair in enumerate(zip(src, tgt), start=1) if not all(s.strip() for s in pair)), None)
        if not src or blank is not None:
            where = "have no lines" if not src else f"line {blank} is blank"
            raise AiaynError(f"--src {args.src} / {tgt_option} {tgt_path}: {where}; heads are measured on sentence "
                             f"pairs, one a line on each side")
        return list(zip(src, tgt)), f"{args.src} / {tgt_path}"
    pairs = builtin_pairs(cfg.data)
    if pairs is None:
        more = "" if tgt_option == "--ref" else " (and --gold for AER)"
        raise AiaynError(f"this model was not trained on the built-in task: give --src and {tgt_option}{more}")
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


def _emit_json(args, data: dict) -> None:
    """--json: on stdout, or written to its file (checked before any work: _check_json)."""
    text = json.dumps(data, indent=1) + "\n"
    if args.json == "-":
        sys.stdout.write(text)
        return
    from aiayn.io import write_output_file

    write_output_file(args.json, text, inputs=[args.src, args.tgt, args.ref, args.gold], model_dirs=[args.model])
    print(f"wrote {args.json}", file=sys.stderr)


def _check_outputs(args) -> None:
    """--json FILE and --plot are checked before the model is loaded (nothing is computed to be lost)."""
    inputs = [args.src, args.tgt, args.ref, args.gold]
    if args.json not in (None, "-"):
        from aiayn.io import check_output_file

        check_output_file(args.json, inputs, [args.model])
    if args.plot:
        from aiayn.inspect.maps.charts import check_plot_path

        check_plot_path("--plot", args.plot, inputs=inputs, model_dirs=[args.model])


def _prune_kinds(text: str) -> tuple[str, ...]:
    from aiayn.errors import AiaynError
    from aiayn.inspect.ablation import HEAD_KINDS

    names = [k.strip() for k in text.split(",") if k.strip()]
    if names == ["all"]:
        return HEAD_KINDS
    if names == ["none"]:
        return ()
    wrong = [k for k in names if k not in HEAD_KINDS]
    if wrong or not names:
        raise AiaynError(f"--prune {text}: give kinds separated by commas of {', '.join(HEAD_KINDS)}, or all, or "
                         f"none")
    return tuple(names)


def _check_ablate_args(args) -> tuple[str, ...]:
    from aiayn.errors import AiaynError

    if not args.ablate:
        if args.ref:
            raise AiaynError("--ref gives --ablate's references: add --ablate (ranking by alignment takes --tgt)")
        return ()
    for option, value in (("--tgt", args.tgt), ("--gold", args.gold)):
        if value:
            raise AiaynError(f"{option} is for ranking heads by alignment; --ablate scores translations against "
                             f"--ref (give --src and --ref)")
    if args.beam < 1:
        raise AiaynError(f"--beam {args.beam}: give 1 (greedy) or more")
    if args.prune_steps < 0:
        raise AiaynError(f"--prune-steps {args.prune_steps}: give 0 (until all are out) or a positive number")
    if args.max_drop < 0:
        raise AiaynError(f"--max-drop {args.max_drop}: give a BLEU drop of 0 or more")
    return _prune_kinds(args.prune)


def _ablation_table(ablation, max_drop: float) -> str:
    base = ablation.baseline
    rows = [f"baseline: BLEU {base.bleu:.2f}, loss {base.loss:.4f}", "",
            "head       BLEU    dBLEU   loss     dloss"]

    def row(label, removal):
        q = removal.quality
        return f"{label:<10} {q.bleu:<7.2f} {q.bleu - base.bleu:<+7.2f} {q.loss:<8.4f} {q.loss - base.loss:+.4f}"

    rows += [row(r.head.name, r) for r in ablation.single]
    if ablation.pruned:
        rows += ["", f"greedy pruning ({ablation.pruned_words}): the heads out so far, BLEU after each removal",
                 "step  head       BLEU    dBLEU   loss     dloss"]
        rows += [f"{step:<5} " + row(r.head.name, r) for step, r in enumerate(ablation.pruned, start=1)]
        rows.append(f"{ablation.removable(max_drop)} of {len(ablation.pruned)} heads out before BLEU falls more than "
                    f"{max_drop:g} below the baseline")
    return "\n".join(rows)


def _cmd_ablate(args, translator, pairs, data_name, kinds) -> int:
    from aiayn.decoding.options import DecodeOptions
    from aiayn.inspect.ablation import ablate

    if args.limit:
        pairs = pairs[: args.limit]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    search = "greedy" if args.beam == 1 else f"beam {args.beam}"
    print(f"{len(pairs)} pairs of {data_name}; {search}; every head out in turn", file=sys.stderr)
    result = ablate(translator, sources, refs, DecodeOptions(beam=args.beam), prune_kinds=kinds,
                    prune_steps=args.prune_steps, progress=lambda line: print(line, file=sys.stderr, flush=True))
    if args.json:
        _emit_json(args, {"model": str(translator.model_dir), "data": data_name, "pairs": len(pairs),
                          "beam": args.beam, **result.to_dict(args.max_drop)})
    if args.json != "-":
        print(f"{len(pairs)} pairs of {data_name}; {search}")
        print(_ablation_table(result, args.max_drop))
    if args.plot:
        from aiayn.inspect.maps.charts import draw_ablation

        draw_ablation(result, args.plot, max_drop=args.max_drop, title=f"{len(pairs)} pairs of {data_name}, {search}")
        print(f"wrote {args.plot}", file=sys.stderr if args.json == "-" else sys.stdout)
    return 0


def cmd_heads(args) -> int:
    from aiayn.cli.common import model_configs
    from aiayn.decoding.translator import Translator
    from aiayn.errors import AiaynError
    from aiayn.inspect.alignment.heads import rank_heads

    if args.write_gold:
        return _write_gold(args)
    if not args.model:
        raise AiaynError("give --model (the model whose heads are ranked), or --write-gold FILE")
    if args.limit < 0:
        raise AiaynError(f"--limit {args.limit}: give 0 (all pairs) or a positive number")
    kinds = _check_ablate_args(args)
    _check_outputs(args)
    # the model's config, the sentence pairs and the gold before the model loads: a wrong file is one line now
    cfg = model_configs([args.model])[0]
    if args.ablate:
        pairs, data_name = _pairs(args, cfg, tgt_option="--ref")
        return _cmd_ablate(args, Translator.from_pretrained(args.model), pairs, data_name, kinds)
    pairs, data_name = _pairs(args, cfg)
    golds, gold_name = _gold(args, pairs, builtin=not args.src)
    translator = Translator.from_pretrained(args.model)
    if args.limit:
        pairs, golds = pairs[: args.limit], golds[: args.limit] if golds is not None else None
    scores, skipped = rank_heads(translator, pairs, golds)
    if args.json:
        _emit_json(args, {"model": str(translator.model_dir), "data": data_name, "gold": gold_name,
                          "pairs": len(pairs), "skipped": skipped, "heads": [s.to_dict() for s in scores]})
    if args.json != "-":
        print(f"{len(pairs) - skipped} pairs of {data_name}; gold: {gold_name or 'none'}")
        print(_table(scores, gold_name))
    if args.plot:
        from aiayn.inspect.maps.charts import draw_heads

        draw_heads(scores, args.plot, title=f"{len(pairs) - skipped} pairs of {data_name}")
        print(f"wrote {args.plot}", file=sys.stderr if args.json == "-" else sys.stdout)
    if skipped:
        print(f"warning: {skipped} pairs skipped: the model's words (subwords merged at ▁) are not the lines' "
              f"whitespace words, so gold indices would point at other words", file=sys.stderr)
    return 0


COMMANDS = {"heads": cmd_heads}
