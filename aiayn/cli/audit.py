"""`aiayn audit`: a parallel corpus checked for overlaps, copies, outliers and bad lines (aiayn.data.audit).
Wiring and printing only."""

import json

AUDIT_DESCRIPTION = ("Prints what it finds and exits 0, findings or not. Exits 2, with one line naming the file, "
                     "when a file cannot be read (missing, a directory, a damaged .gz, over the size limits), when the "
                     "two sides of a split have different line counts, or when --json or --plot cannot be written (or "
                     "names an input); 130 when interrupted (Ctrl-C).")


def _shown(text: str) -> int:
    import argparse

    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of examples (0 or more; 0 shows counts only)")
    return int(text)


def add_parsers(sub) -> None:
    p = sub.add_parser("audit", help="check a parallel corpus: test/dev sentences in the training data, duplicates, "
                       "copies, length outliers, wrong script, encoding",
                       description=AUDIT_DESCRIPTION)
    p.add_argument("--train", nargs=2, metavar=("SRC", "TGT"), required=True, help="training files")
    p.add_argument("--dev", nargs=2, metavar=("SRC", "TGT"), help="development files")
    p.add_argument("--test", nargs=2, metavar=("SRC", "TGT"), help="test files")
    p.add_argument("--json", metavar="FILE", help="also write the full report as JSON here (atomically)")
    p.add_argument("--show", type=_shown, default=5, help="examples shown per finding (default: 5)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the report as a picture: findings per kind and "
                   "split, and the length-ratio distribution with the outlier cut-offs (needs matplotlib)")


def cmd_audit(args) -> int:
    from aiayn.data.audit import audit_corpus
    from aiayn.data.audit_report import report_text
    from aiayn.io import write_output_file

    splits = {name: getattr(args, name) for name in ("train", "dev", "test") if getattr(args, name)}
    inputs = [path for pair in splits.values() for path in pair]  # a corpus is never the report
    if args.plot:
        from aiayn.inspect.maps.charts import check_plot_path

        check_plot_path("--plot", args.plot, inputs=inputs)
    report = audit_corpus(splits)
    print(report_text(report, show=args.show))
    if args.json:
        write_output_file(args.json, json.dumps(report, indent=1, ensure_ascii=False) + "\n", inputs=inputs)
        print(f"wrote {args.json}")
    if args.plot:
        from aiayn.inspect.maps.charts import draw_audit

        draw_audit(report, args.plot)
        print(f"wrote {args.plot}")
    return 0


COMMANDS = {"audit": cmd_audit}
