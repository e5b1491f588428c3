"""Screenshots of the page's diagnostic tools for the guides (how these pictures were made):

    python docs/screenshots.py diagnostics --model runs/de_en --out docs/img/diagnostics.png
    python docs/screenshots.py post-editing --model runs/de_en --out docs/img/post_editing.png
    python docs/screenshots.py timeline --model runs/demo/average --out docs/img/timeline.png
    python docs/screenshots.py head-search --model runs/coreference --kind encoder_self --out docs/img/it_animal.png
    python docs/screenshots.py view --model runs/demo/average --lang ko --out masks.png \
        --view "text=forty five thousand six hundred twenty one&kind=decoder_self&layer=1&head=1"
    python docs/screenshots.py learn --model runs/demo/average --out docs/img

- diagnostics: the page translates "Ein Hund rennt über eine Wiese." with a looping target forced (--target),
  and the picture shows the input, the flags the page writes under it, and the translation;
- post-editing: the page translates "Ein Mann fährt Fahrrad.", a click on a token of the row of probabilities
  (--token, from 0) opens the model's alternatives for it: the translation and that list;
- timeline: for a model directory inside a run trained with train.attention_timeline, the panel "Attention as it
  learned" at the first and at the last stored step, side by side (--kind, --layer, --head, --sentence);
- head-search: the page translates the posts' sentence (or --text), shows words, and asks "Which head does
  this?" for the query word --query and the key word --key in --kind: the ranking and the head it opens,
  with that head's step view of the query's row;
- view: the page at an address of its own (--view, the query of a learning page's explorer link, model= left
  out: the served page has one model), and the parts --panel names (CSS selectors, left to right; default the
  matrix, #matrix-panel). q= opens that row's step view, open=pe or open=ffn a panel of the Transformer's map.

- learn: every learning page's picture (LEARN below), English and Korean, into the folder --out.

--lang ko takes any of them in the page's Korean (Chromium needs a Korean font: apt-get install fonts-nanum).

Needs the web and dev extras (uvicorn, Playwright) and a Chromium (`apt-get install chromium`, or --chromium).
"""

import argparse
import io
import socket
import threading
import time
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode

LOOPING = "A dog dog dog runs across a field."
DEMO = "text=forty five thousand six hundred twenty one"
# The learning pages' pictures (learn): docs/img/learn_NAME.png from the English page, learn_NAME_ko.png from
# the Korean, each the page at an address (DEMO's sentence) and the parts taken (CSS selectors; "stack": top to
# bottom), at a browser width.
LEARN = [
    ("seq2seq", "kind=cross&layer=2&head=mean", ["#line-panel"], {}),
    ("rnn_attention", "kind=cross&layer=1&head=1&q=2", ["#matrix-panel", "#step-table"], {"width": 1440}),
    ("self_attention", "kind=encoder_self&layer=1&head=1", ["#matrix-panel"], {}),
    ("scaled_dot_product", "kind=encoder_self&layer=2&head=1&q=3", ["[data-testid=step-unscaled]", "#step-table"],
     {"stack": True}),
    ("multi_head", "kind=cross&layer=1&head=1", ["#overview-panel"], {}),
    ("masks", "kind=decoder_self&layer=1&head=1", ["#matrix-panel"], {}),
    ("cross_attention", "kind=cross&layer=1&head=mean", ["#matrix-panel"], {}),
    ("positional_encoding", "kind=encoder_self&layer=1&head=1&open=pe", ["#pe-panel"], {}),
    ("feed_forward", "kind=encoder_self&layer=1&head=1&q=3&open=ffn", ["#ffn-panel"], {}),
    ("residual_layernorm", "kind=encoder_self&layer=2&head=1&q=3", ["#layer-steps"], {}),
    ("encoder_decoder", "kind=cross&layer=2&head=mean", ["#arch-panel"], {}),
    ("training_decoding", "beam=4&kind=cross&layer=2&head=mean", ["#result"], {}),
    ("contributions", "kind=cross&layer=1&head=1&measure=contributions", ["#matrix-panel"], {}),
]


@contextmanager
def served(model: str):
    """The page for `model` on a free local port: yields its address."""
    import uvicorn

    from aiayn.decoding.translator import Translator
    from aiayn.web.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(Translator.from_pretrained(model)), host="127.0.0.1",
                                           port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True


def union(page, selectors, pad=8) -> dict:
    """The clip around the elements of `selectors` (page coordinates)."""
    boxes = [page.locator(s).bounding_box() for s in selectors]
    x0, y0 = min(b["x"] for b in boxes) - pad, min(b["y"] for b in boxes) - pad
    x1, y1 = max(b["x"] + b["width"] for b in boxes) + pad, max(b["y"] + b["height"] for b in boxes) + pad
    return {"x": max(0, x0), "y": max(0, y0), "width": x1 - max(0, x0), "height": y1 - max(0, y0)}


def translate(page, text: str, target: str = ""):
    page.wait_for_selector("[data-testid=model-info] dd")
    page.fill("#text", text)
    page.fill("#target", target)
    page.click("#translate")
    page.wait_for_selector("#heatmap td.cell", timeout=60000)


def diagnostics(page, args):
    translate(page, args.text or "Ein Hund rennt über eine Wiese.", args.target or LOOPING)
    page.wait_for_function("document.getElementById('warning').textContent.length > 0")
    page.screenshot(path=args.out, full_page=True,
                    clip=union(page, ["section[aria-labelledby=input-label]", "#translation", "#token-probs"]))


def post_editing(page, args):
    translate(page, args.text or "Ein Mann fährt Fahrrad.")
    page.click(f"#token-probs .tp[data-t='{args.token}']")
    page.wait_for_selector("[data-testid=alternatives] button.alt")
    page.mouse.move(0, 0)
    page.screenshot(path=args.out, full_page=True,
                    clip=union(page, ["#result-kind", "#translation", "#token-probs", "#alternatives"]))


def timeline(page, args):
    from PIL import Image
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        slider = page.wait_for_selector("[data-testid=timeline]", timeout=15000)
    except PlaywrightTimeout:
        raise SystemExit(f"{args.model}: the page shows no timeline; give a model of a run trained with "
                         f"train.attention_timeline (its RUN/timeline/ holds the stored maps)") from None
    page.select_option("#tl-sentence", str(args.sentence))
    page.select_option("#tl-kind", args.kind)
    page.select_option("#tl-layer", args.layer)
    page.select_option("#tl-head", args.head)
    shots = []
    for position in (slider.get_attribute("min") or "0", slider.get_attribute("max")):
        page.eval_on_selector("[data-testid=timeline]",
                              "(s, v) => { s.value = v; s.dispatchEvent(new Event('input')); }", position)
        page.wait_for_timeout(500)
        panel = page.locator("#timeline-panel")
        panel.scroll_into_view_if_needed()
        shots.append(Image.open(io.BytesIO(panel.screenshot())))
    joined(shots, args.out)


def head_search(page, args):
    translate(page, args.text or "The animal didn't cross the street because it was too tired.")
    page.select_option("#kind", args.kind)
    page.check("#words")
    for select, word in (("#search-query", args.query), ("#search-key", args.key)):
        options = page.eval_on_selector_all(f"{select} option", "os => os.map(o => [o.value, o.textContent])")
        page.select_option(select, next(v for v, label in options if label.split()[0].rstrip(".,") == word))
    page.click("#search-go")
    page.wait_for_selector("#step-table")
    page.mouse.move(0, 0)
    side_by_side(page, ["[data-testid=head-search]", "#matrix-panel"], args.out)


def view(page, args):
    shown(page, args.view)
    side_by_side(page, args.panel or ["#matrix-panel"], args.out, stacked=args.stack)


def learn(browser, address, args):
    """Every picture of LEARN in both languages into the folder --out."""
    from pathlib import Path

    for lang in ("en", "ko"):
        for name, address_view, parts, how in LEARN:
            page = browser.new_page(viewport={"width": how.get("width", args.width), "height": 900})
            query = f"{DEMO}&{address_view}"
            page.goto(f"{address}/?{urlencode([*parse_qsl(query), ('lang', lang)])}")
            shown(page, query)
            out = Path(args.out) / f"learn_{name}{'_ko' if lang == 'ko' else ''}.png"
            side_by_side(page, parts, out, stacked=how.get("stack", False))
            page.close()
            print(f"wrote {out}")


def shown(page, query):
    """Wait until the page shows what its address (query) asks for."""
    page.wait_for_selector("#heatmap td.cell", timeout=60000)
    asked = dict(parse_qsl(query))
    if "q" in asked:
        page.wait_for_selector("#step-table")
    if asked.get("open") in ("pe", "ffn"):
        page.wait_for_selector(f"#{asked['open']}-panel:not([hidden])")
    if asked.get("beam", "1") != "1":  # the beam's other candidates, opened
        page.wait_for_selector("#nbest li", state="attached")
        page.eval_on_selector("#nbest-box", "box => { box.open = true; }")
    page.mouse.move(0, 0)
    page.wait_for_timeout(300)


def side_by_side(page, selectors, out, stacked=False):
    """Screenshots of the elements of `selectors`, joined left to right (stacked: top to bottom)."""
    from PIL import Image

    shots = []
    for selector in selectors:
        element = page.locator(selector)
        element.scroll_into_view_if_needed()
        shots.append(Image.open(io.BytesIO(element.screenshot())))
    joined(shots, out, stacked=stacked)


def joined(shots, out, gap=16, stacked=False):
    """PIL images saved side by side, left to right (stacked: top to bottom), gap pixels apart."""
    from PIL import Image

    along = (lambda s: s.height) if stacked else (lambda s: s.width)
    across = (lambda s: s.width) if stacked else (lambda s: s.height)
    length = sum(along(s) for s in shots) + gap * (len(shots) - 1)
    size = (max(across(s) for s in shots), length) if stacked else (length, max(across(s) for s in shots))
    picture = Image.new("RGB", size, "white")
    offset = 0
    for shot in shots:
        picture.paste(shot, (0, offset) if stacked else (offset, 0))
        offset += along(shot) + gap
    picture.save(out, optimize=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("picture", choices=["diagnostics", "post-editing", "timeline", "head-search", "view", "learn"])
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True, help="the picture's file (learn: the folder of its pictures)")
    p.add_argument("--text", help="the source sentence (default: the picture's own)")
    p.add_argument("--target", help="diagnostics: the forced target (default: a looping one)")
    p.add_argument("--token", type=int, default=2, help="post-editing: the token clicked, from 0")
    p.add_argument("--sentence", type=int, default=0, help="timeline: the stored sentence, from 0")
    p.add_argument("--kind", default="cross", help="timeline, head-search: the kind of attention")
    p.add_argument("--query", default="it", help="head-search: the query word")
    p.add_argument("--key", default="animal", help="head-search: the key word")
    p.add_argument("--layer", default="2", help="timeline: the layer, from 1")
    p.add_argument("--head", default="1", help="timeline: the head, from 1")
    p.add_argument("--view", default="", help="view: the page's address, e.g. \"text=forty five&kind=cross&layer=1\"")
    p.add_argument("--panel", action="append",
                   help="view: a CSS selector of a part to take (repeatable; default #matrix-panel)")
    p.add_argument("--stack", action="store_true", help="view: the parts top to bottom (default: left to right)")
    p.add_argument("--lang", choices=["en", "ko"], default="en", help="the page's language")
    p.add_argument("--width", type=int, default=900, help="the browser's width in pixels")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    args = p.parse_args(argv)

    from playwright.sync_api import sync_playwright

    take = {"diagnostics": diagnostics, "post-editing": post_editing, "timeline": timeline,
            "head-search": head_search, "view": view}.get(args.picture)
    with served(args.model) as address, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=args.chromium, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        if take is None:
            learn(browser, address, args)
            browser.close()
            return
        page = browser.new_page(viewport={"width": args.width, "height": 900})
        page.goto(f"{address}/?{urlencode([*parse_qsl(args.view), ('lang', args.lang)])}")
        take(page, args)
        browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
