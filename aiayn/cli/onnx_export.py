"""export-onnx: a Transformer as ONNX graphs that also return its attention maps (aiayn.interop.onnx_export).
Wiring only."""

from pathlib import Path

from aiayn.cli.common import MODEL_HELP


def add_parsers(sub) -> None:
    p = sub.add_parser("export-onnx", help="write a Transformer as ONNX graphs that also return every attention "
                       "map, with its tokenizer (needs aiayn[onnx])")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--out", required=True, help="new or empty directory for encoder.onnx, decoder.onnx, model.json, "
                   "the tokenizer and a README naming the graphs' inputs and outputs")
    p.add_argument("--force", action="store_true", help="replace an earlier export-onnx at --out (default: refuse)")


def cmd_export_onnx(args) -> int:
    from aiayn.interop.onnx_export import export_onnx

    out = export_onnx(args.model, Path(args.out), force=args.force)
    print(f"wrote {out}: encoder.onnx and decoder.onnx (with their attention maps), model.json and the tokenizer; "
          f"{out}/README.md names their inputs and outputs")
    return 0


COMMANDS = {"export-onnx": cmd_export_onnx}
