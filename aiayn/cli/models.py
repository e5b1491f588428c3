"""CLI subcommand that imports other toolkits' models: import-hf (wiring only)."""

from pathlib import Path


def add_parsers(sub) -> None:
    p = sub.add_parser("import-hf", help="import a Hugging Face Marian / OPUS-MT model (needs aiayn[hf])")
    p.add_argument("src", metavar="SRC", help="a directory written by save_pretrained (model and tokenizer), or, "
                   "online, a hub name such as Helsinki-NLP/opus-mt-de-en")
    p.add_argument("--out", required=True, help="new or empty directory for the aiayn checkpoint")
    p.add_argument("--force", action="store_true", help="replace an earlier import at --out (default: refuse)")


def cmd_import_hf(args) -> int:
    from aiayn.interop.marian import import_marian

    out = import_marian(args.src, Path(args.out), force=args.force)
    print(f"wrote {out}: an aiayn checkpoint; try  aiayn translate --model {out}")
    return 0


COMMANDS = {"import-hf": cmd_import_hf}
