"""export-site: the explorer as a static site whose page runs the model in the browser
(aiayn.web.static_site). Wiring only."""

from pathlib import Path

from aiayn.cli.common import MODEL_HELP


def add_parsers(sub) -> None:
    p = sub.add_parser("export-site", help="write the explorer as a static site that runs the model in the browser "
                       "(onnxruntime-web): serve it with any file server (needs aiayn[onnx] and `npm ci`)")
    p.add_argument("--model", required=True, action="append", metavar="[NAME=]MODEL",
                   help=f"{MODEL_HELP}; repeat with NAME=MODEL for several models: the page opens the first, "
                   f"and ?model=NAME another")
    p.add_argument("--out", required=True, help="new or empty directory for the site (index.html, the page, the "
                   "model's ONNX export and the browser runtime)")
    p.add_argument("--node-modules", help="the node_modules folder with onnxruntime-web and @agnai/sentencepiece-js "
                   "(default: ./node_modules, else that of the aiayn checkout: `npm ci` there installs them)")
    p.add_argument("--lang", choices=("en", "ko"), help="the page's language when its address names none "
                   "(lang= in the address wins; default: the language the reader last chose, English at first)")
    p.add_argument("--force", action="store_true", help="replace an earlier export-site at --out (default: refuse)")


def cmd_export_site(args) -> int:
    from aiayn.web.static_site import export_site

    out = export_site(args.model, Path(args.out), node_modules=args.node_modules, force=args.force,
                      lang=args.lang)
    print(f"wrote {out}: the explorer with the model in the browser; serve it with "
          f"`python -m http.server --directory {out}` and open http://localhost:8000/")
    return 0


COMMANDS = {"export-site": cmd_export_site}
