"""The commands that make model directories from others: average (checkpoint weights), export (to
CTranslate2), import-hf (a Hugging Face Marian model) and export-hf (to one). Wiring only."""

from pathlib import Path

from aiayn.cli.common import MODEL_HELP


def _add_out(p, what: str, kind: str) -> None:
    """--out and --force: every command here writes a new directory, or replaces only its own earlier one."""
    p.add_argument("--out", required=True, help=f"new or empty directory for {what}")
    p.add_argument("--force", action="store_true", help=f"replace an earlier {kind} at --out (default: refuse)")


def add_parsers(sub) -> None:
    p = sub.add_parser("average", help="average the weights of several checkpoints")
    p.add_argument("checkpoints", nargs="+", help="checkpoint directories of one model")
    _add_out(p, "the averaged checkpoint", "average")

    p = sub.add_parser("export", help="convert a Transformer to CTranslate2 (needs aiayn[export])")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    _add_out(p, "the CTranslate2 model", "export")

    p = sub.add_parser("import-hf", help="import a Hugging Face Marian / OPUS-MT model (needs aiayn[hf])")
    p.add_argument("src", metavar="SRC", help="a directory written by save_pretrained (model and tokenizer), or, "
                   "online, a hub name such as Helsinki-NLP/opus-mt-de-en")
    _add_out(p, "the aiayn checkpoint", "import")
    p.add_argument("--src-lang", metavar="CODE", help="the model's source language, such as de, when the folder "
                   "does not name it (its tokenizer_config.json's source_lang, or an opus-mt-de-en name); the "
                   "server's LibreTranslate API needs the pair. With --tgt-lang")
    p.add_argument("--tgt-lang", metavar="CODE", help="the model's target language, such as en; with --src-lang")

    p = sub.add_parser("export-hf", help="write a Transformer as a Hugging Face Marian model (needs aiayn[hf])")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    _add_out(p, "the MarianMTModel and MarianTokenizer", "export-hf")
    p.add_argument("--license", default="other", metavar="ID",
                   help="the licence the model card (README.md) names, a Hugging Face hub id such as apache-2.0 or "
                        "cc-by-nc-4.0 (default: other)")


def cmd_average(args) -> int:
    from aiayn.checkpoint import average_checkpoints

    out = average_checkpoints([Path(p) for p in args.checkpoints], Path(args.out), force=args.force)
    count = len(args.checkpoints)
    print(f"averaged {count} checkpoint{'s' if count > 1 else ''} into {out} (listed in {out}/info.json)")
    return 0


def cmd_export(args) -> int:
    from aiayn.interop.ctranslate2 import to_ctranslate2

    out = to_ctranslate2(args.model, args.out, force=args.force)
    print(f"wrote {out} (CTranslate2; source lines need a final </s> piece)")
    return 0


def cmd_import_hf(args) -> int:
    from aiayn.interop.marian import import_marian
    from aiayn.interop.marian_languages import recorded_pair

    out = import_marian(args.src, Path(args.out), force=args.force, src_lang=args.src_lang, tgt_lang=args.tgt_lang)
    pair = recorded_pair(out)
    named = f"{pair[0]}->{pair[1]}" if pair else "languages not named (add --src-lang and --tgt-lang to serve " \
        "the LibreTranslate API)"
    print(f"wrote {out}: an aiayn checkpoint, {named}; try  aiayn translate --model {out}")
    return 0


def cmd_export_hf(args) -> int:
    from aiayn.interop.marian_export import export_marian

    out, notes = export_marian(args.model, Path(args.out), force=args.force, license=args.license)
    for note in notes:
        print(f"note: {note}")
    print(f"wrote {out}: a Hugging Face Marian model with its model card (README.md); load it with "
          f"MarianMTModel.from_pretrained and MarianTokenizer.from_pretrained, or convert it with "
          f"ct2-transformers-converter")
    return 0


COMMANDS = {"average": cmd_average, "export": cmd_export, "import-hf": cmd_import_hf, "export-hf": cmd_export_hf}
