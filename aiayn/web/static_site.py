"""The static explorer (`aiayn export-site`): the explorer page as a folder any file server can serve, with no
aiayn server behind it, for one model or several (?model=NAME chooses). The model runs in the browser: its
`aiayn export-onnx` graphs on onnxruntime-web (WebAssembly) and its SentencePiece model on sentencepiece-js,
both copied from the npm packages package.json names. Layout of OUT:

    index.html       the served page, its paths made relative and a <meta name="aiayn-static"> naming static.json
    static.json      {"static": true, "models": {NAME: "models/NAME/"}, "default": the first NAME,
                      "runtime": the npm packages' versions}
    static/          the page's modules and style (static_mode.js answers the page's requests)
    models/NAME/     each model's export-onnx directory, plus info.json and positions.json (what /api/info and
                     /api/positions answer for it) and pieces.json (every id's subword, both vocabularies)
    vendor/          onnxruntime-web's WebAssembly build, and sentencepiece-js wrapped as an ES module
"""

import json
import re
import shutil
from pathlib import Path

from aiayn.errors import AiaynError

STATIC = Path(__file__).parent / "static"
PAGE_TYPES = (".js", ".css")
META = '<meta name="aiayn-static" content="static.json">'
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
PACKAGES = ("onnxruntime-web", "@agnai/sentencepiece-js")
NAME = r"[A-Za-z0-9_-]+"  # a model's name in the page's address (?model=NAME) and its folder under models/
LANGUAGES = ("en", "ko")  # the page's (i18n.js)
# The page takes its language from the address (lang=), else from the last one the reader chose; a site
# written for one language puts lang= into an address that names none, before the page's modules run.
LANGUAGE_SCRIPT = ("<script>{{const p = new URLSearchParams(location.search); if (!p.has(\"lang\")) "
                   "{{p.set(\"lang\", \"{lang}\"); history.replaceState(null, \"\", "
                   "location.pathname + \"?\" + p + location.hash);}}}}</script>")


def package_dirs(node_modules: Path | None) -> dict[str, Path]:
    """{npm package: its folder} from node_modules (None: ./node_modules, else the node_modules of the aiayn
    checkout this runs from), or one line naming what is missing and how to install it."""
    checkout = Path(__file__).resolve().parents[2] / "node_modules"
    places = [node_modules] if node_modules is not None else [Path("node_modules"), checkout]
    for place in places:
        dirs = {name: place / name for name in PACKAGES}
        if all((d / "package.json").is_file() for d in dirs.values()):
            return dirs
    where = " or ".join(str(p) for p in places)
    raise AiaynError(f"no {' and '.join(PACKAGES)} in {where}: run `npm ci` in aiayn's repository (package.json "
                     f"names them), or give --node-modules the node_modules folder that has them")


def _version(package: Path) -> str:
    return str(json.loads((package / "package.json").read_text(encoding="utf-8"))["version"])


def sentencepiece_module(index_js: str) -> str:
    """sentencepiece-js's CommonJS build as an ES module a browser imports: `require("fs")` answered from
    memory (its load() reads the model by path), and loadTokenizer(bytes) -> a loaded SentencePieceProcessor.
    Its WebAssembly is inline (a data: URL), so the module is one file."""
    return (
        "// sentencepiece-js (Apache-2.0, LICENSE beside this file) wrapped by aiayn export-site as an ES module\n"
        "const files = new Map();\n"
        "const require = name => {\n"
        "  if (name === 'fs') return {readFileSync: path => files.get(path)};\n"
        "  throw new Error('sentencepiece-js asked for ' + name + ', which a browser has not');\n"
        "};\n"
        "const exports = {};\n"
        + index_js +
        "\nexport async function loadTokenizer(bytes) {\n"
        "  files.set('tokenizer.model', bytes);\n"
        "  const processor = new exports.SentencePieceProcessor();\n"
        "  await processor.load('tokenizer.model');\n"
        "  files.delete('tokenizer.model');\n"
        "  return processor;\n"
        "}\n")


def write_vendor(packages: dict[str, Path], out: Path) -> dict[str, str]:
    """The browser runtime into out/ -> {package: version}."""
    out.mkdir()
    ort = packages["onnxruntime-web"]
    for name in ORT_FILES:
        shutil.copyfile(ort / "dist" / name, out / name)
    sp = packages["@agnai/sentencepiece-js"]
    (out / "sentencepiece.mjs").write_text(sentencepiece_module((sp / "dist" / "index.js").read_text(encoding="utf-8")),
                                           encoding="utf-8")
    shutil.copyfile(sp / "LICENSE", out / "LICENSE.sentencepiece-js")
    versions = {name: _version(d) for name, d in packages.items()}
    (out / "README.md").write_text(
        "The browser runtime of this static explorer, copied from npm: onnxruntime-web "
        f"{versions['onnxruntime-web']} (MIT; its dist/ files) and @agnai/sentencepiece-js "
        f"{versions['@agnai/sentencepiece-js']} (Apache-2.0, LICENSE.sentencepiece-js; wrapped as an ES module).\n",
        encoding="utf-8")
    return versions


def write_page(out: Path, lang: str | None = None) -> None:
    """index.html (relative paths: the site may live in a sub-folder; the static-mode meta; with lang, the
    page's language when the address names none) and static/."""
    (out / "static").mkdir()
    for path in sorted(STATIC.iterdir()):
        if path.suffix in PAGE_TYPES:
            shutil.copyfile(path, out / "static" / path.name)
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    if '"/static/' not in html or '<meta charset="utf-8">' not in html:
        raise AiaynError(f"{STATIC / 'index.html'}: no /static/ paths or no <meta charset> to place the "
                         f"static mode after; the page changed: update aiayn/web/static_site.py")
    head = META if lang is None else f"{META}\n{LANGUAGE_SCRIPT.format(lang=lang)}"
    html = html.replace('"/static/', '"static/').replace('<meta charset="utf-8">', f'<meta charset="utf-8">\n{head}', 1)
    if lang is not None:
        html = html.replace('<html lang="en">', f'<html lang="{lang}">', 1)
    (out / "index.html").write_text(html, encoding="utf-8")


def write_model_facts(model_dir: Path, out: Path) -> None:
    """info.json, positions.json and pieces.json of the model into out/ (an export-onnx directory)."""
    from aiayn.decoding.translator import Translator
    from aiayn.web.info import model_info
    from aiayn.web.limits import MAX_SOURCE_TOKENS, MAX_TEXT
    from aiayn.web.positions import positions_panel

    translator = Translator.from_pretrained(model_dir)
    info = model_info(translator, MAX_SOURCE_TOKENS, MAX_TEXT)
    info = {**info, "engine": "onnxruntime-web"}
    tok = translator.tokenizer
    pieces = {"source": tok.source_id_to_piece(list(range(tok.src_vocab_size))),
              "target": tok.id_to_piece(list(range(tok.tgt_vocab_size)))}
    for name, value in (("info.json", info), ("positions.json", positions_panel(translator.model)),
                        ("pieces.json", pieces)):
        (out / name).write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")


def model_specs(specs: list[str]) -> dict[str, str]:
    """--model values (MODEL, or NAME=MODEL) -> {name: model}, in order; a bare MODEL is named "model"."""
    named: dict[str, str] = {}
    for spec in specs:
        name, sep, model = spec.partition("=")
        if not sep or not re.fullmatch(NAME, name):
            name, model = "model", spec
        if name in named:
            raise AiaynError(f"--model {spec}: a second model named {name!r}; name each as NAME=MODEL (NAME: "
                             f"letters, digits, - and _), each name once")
        named[name] = model
    return named


def export_site(models: list[str], out: str | Path, node_modules: str | Path | None = None,
                force: bool = False, lang: str | None = None) -> Path:
    """Write the static explorer of the models (model_specs' forms) into OUT (new or empty, or with force an
    earlier export-site). The page opens the first; ?model=NAME opens another. lang (LANGUAGES): the page's
    language when its address names none (None: the reader's last choice, as the served page)."""
    from aiayn.checkpoint import EXPORT_MARKER, check_output_dir
    from aiayn.io import atomic_dir
    from aiayn.run_dir import resolve_model_dir

    if lang is not None and lang not in LANGUAGES:
        raise AiaynError(f"--lang {lang}: the page speaks {' and '.join(LANGUAGES)}; give one of them")
    packages = package_dirs(None if node_modules is None else Path(node_modules))
    named = model_specs(models)
    sources = {name: resolve_model_dir(model) for name, model in named.items()}
    check_output_dir(out, "export-site", force, inputs=[*named.values(), *sources.values()])
    with atomic_dir(out) as tmp:
        for name, source in sources.items():
            write_model(named[name], source, tmp / "models" / name)
        runtime = write_vendor(packages, tmp / "vendor")
        write_page(tmp, lang)
        config = {"static": True, "models": {name: f"models/{name}/" for name in named}, "default": next(iter(named)),
                  "runtime": runtime}
        (tmp / "static.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
        marker = {"output": "export-site", "models": {name: str(source.resolve()) for name, source in sources.items()},
                  "files": sorted(p.name for p in tmp.iterdir()) + [EXPORT_MARKER]}
        (tmp / EXPORT_MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")
    return Path(out)


def write_model(given: str, source: Path, out: Path) -> None:
    """One model's export-onnx directory and the page's facts of it into out/."""
    from aiayn.interop.onnx_export import export_onnx

    export_onnx(source, out)
    facts = json.loads((out / "model.json").read_text(encoding="utf-8"))
    if facts["tokenizer"]["kind"] != "sentencepiece":
        raise AiaynError(f"--model {given}: its tokenizer is a Marian pair of vocabularies; the static explorer "
                         f"runs one SentencePiece model (an aiayn-trained model)")
    write_model_facts(source, out)
