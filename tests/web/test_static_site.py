"""The static explorer (`aiayn export-site`) in a real browser, served by `python -m http.server` with no aiayn
server anywhere: its translations equal aiayn's (greedy and beam search), with their scores and the beam's
n-best list, the cross-attention maps it draws (every layer and head) equal aiayn's within 1e-4, and so does
its word alignment; a given target's maps equal `aiayn attention --target`'s; post-editing equals the
server's; what needs the server says so.

Needs Chromium (as tests/web/test_browser.py finds it), onnx, and the npm packages onnxruntime-web and
@agnai/sentencepiece-js in the repository's node_modules (or the folder AIAYN_NODE_MODULES names, as
tests/interop/test_onnx_web.py); skipped without them."""

import html
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.model_helpers import model_dir
from tests.paths import REPO
from tests.serving import free_port, serving
from tests.web import test_browser as shared

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NODE_MODULES = Path(os.environ.get("AIAYN_NODE_MODULES", REPO / "node_modules"))
PACKAGES = ("onnxruntime-web", "@agnai/sentencepiece-js")
SENTENCES = ["forty five", "three hundred twelve", "nine thousand one"]
TOL = 1e-4
pytestmark = pytest.mark.slow  # a browser, a file server and an ONNX export

if not Path(CHROMIUM).exists() and not os.environ.get("AIAYN_REQUIRE_BROWSER"):
    pytest.skip("no Chromium here (apt-get install chromium); CI installs it", allow_module_level=True)
if not all((NODE_MODULES / name / "package.json").is_file() for name in PACKAGES):
    pytest.skip(f"needs the npm packages {', '.join(PACKAGES)} in {NODE_MODULES} (npm ci)", allow_module_level=True)
pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def model(tmp_path_factory, tokenizer):
    return model_dir(tmp_path_factory.mktemp("static") / "model", tokenizer, "tiny")


@pytest.fixture(scope="module")
def other_model(tmp_path_factory, tokenizer):
    """A second model for the same site: one decoder layer, pre-LN."""
    return model_dir(tmp_path_factory.mktemp("static") / "other", tokenizer, "tiny", n_decoder_layers=1,
                     norm_first=True)


@pytest.fixture(scope="module")
def site_url(model, other_model, tmp_path_factory):
    """The site of both models on loopback, served by Python's plain file server."""
    from aiayn.web.static_site import export_site

    site = export_site([str(model), f"other={other_model}"], tmp_path_factory.mktemp("site") / "site",
                       node_modules=NODE_MODULES)
    yield from file_server(site)


@pytest.fixture(scope="module")
def korean_site_url(model, tmp_path_factory):
    """A site written for Korean readers (export-site --lang ko), as the docs site's ko/explorer/."""
    from aiayn.web.static_site import export_site

    site = export_site([f"demo={model}"], tmp_path_factory.mktemp("site") / "ko", node_modules=NODE_MODULES,
                       lang="ko")
    yield from file_server(site)


@pytest.fixture(scope="module")
def docs_site_url(model, other_model, tmp_path_factory):
    """The docs site as `make docs` builds it (mkdocs, then the explorer in English and Korean), with the
    test's small models under the names the learning pages' links use."""
    from aiayn.web.static_site import export_site

    site = tmp_path_factory.mktemp("docs") / "site"
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)], cwd=REPO,
                   check=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    for lang, out in (("en", site / "explorer"), ("ko", site / "ko" / "explorer")):
        export_site([f"demo={model}", f"coreference={other_model}"], out, node_modules=NODE_MODULES, lang=lang)
    for url in file_server(site):  # one address; the server stops after the module's tests
        yield site, url


def file_server(site):
    """Python's plain file server over site, on loopback: yields its address once, then stops it."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                               "--directory", str(site)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.1)
    try:
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


browser = shared.browser  # the shared fixture (tests/web/test_browser.py)


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors, requests = [], []
    page.on("pageerror", lambda error: errors.append(error))
    page.on("request", lambda request: requests.append(request.url))
    yield page
    page.close()
    assert not errors, f"script errors on the page: {errors}"
    assert not [u for u in requests if "/api/" in u], "the static page asked a server"


def translate(page, url, text, target="", beam=None):
    page.goto(url)
    page.wait_for_selector("[data-testid=model-info] dd")
    page.fill("#text", text)
    page.fill("#target", target)
    if beam is not None:
        page.fill("#beam", str(beam))
    page.click("#translate")
    page.wait_for_selector("#heatmap td.cell", timeout=60000)


def drawn(page, kind, layer, head) -> np.ndarray:
    """The heatmap's weights (piece view) of one kind, layer and head, 0-based, as the page draws them."""
    page.select_option("#kind", kind)
    page.select_option("#layer", str(layer + 1))
    page.select_option("#head", str(head + 1))
    rows = page.eval_on_selector_all("#heatmap tbody tr", "trs => trs.map(tr => Array.from("
                                     "tr.querySelectorAll('td.cell'), c => Number(c.dataset.value)))")
    return np.array(rows)


@pytest.mark.parametrize("beam", [1, 4])
def test_static_site_translates_and_draws_aiayns_cross_attention(page, site_url, model, beam):
    from aiayn.decoding.translator import Translator
    from aiayn.inspect.alignment.head_choice import maps_alignment
    from aiayn.inspect.maps.capture import maps_of

    translator = Translator.from_pretrained(model)
    expected = translator.translate(SENTENCES, beam=beam, return_attention=True, n_best=beam)
    for sentence, ours in zip(SENTENCES, expected):
        translate(page, site_url, sentence, beam=beam)
        assert page.text_content("#translation") == ours.text, sentence
        assert f"{ours.score:.3f}" in page.text_content("#result-kind"), sentence
        cross = ours.attention["cross"]  # (L, H, T, S)
        for layer in range(cross.shape[0]):
            for head in range(cross.shape[1]):
                got = drawn(page, "cross", layer, head)
                assert got.shape == cross[layer, head].shape, (sentence, layer, head)
                assert np.abs(got - cross[layer, head]).max() < TOL, (sentence, layer, head)
        page.check("[data-testid=alignment-toggle]")  # the server's default word alignment, outlined
        links = set(page.eval_on_selector_all("#heatmap td[data-aligned]", "cs => cs.map(c => c.dataset.aligned)"))
        assert links == set(maps_alignment(maps_of(ours, translator), None, None).split()), sentence
        if beam > 1:  # the beam's other candidates, best first, with their scores
            page.wait_for_selector("#nbest li", state="attached")
            listed = page.eval_on_selector_all("#nbest button.hyp", "bs => bs.map(b => b.textContent)")
            assert listed == [f"{text} ({score:.3f})" for text, score in ours.n_best], sentence


def test_static_site_draws_a_given_targets_maps_as_aiayn_attention_target(page, site_url, model):
    from aiayn.decoding.translator import Translator
    from aiayn.inspect.maps.capture import capture

    text, target = "forty five thousand", "fünf und vierzig tausend"
    maps = capture(Translator.from_pretrained(model), text, target=target)
    translate(page, site_url, text, target)
    for kind in ("encoder_self", "decoder_self", "cross"):
        last = maps.maps[kind].shape[0] - 1
        assert np.abs(drawn(page, kind, last, 1) - maps.maps[kind][last, 1]).max() < TOL, kind


def test_static_site_post_edits_as_the_server(page, site_url, model):
    """A token's alternatives are aiayn.web.postedit's; a pick re-decodes as Translator with that target prefix."""
    from aiayn.decoding.batches import encode_sources
    from aiayn.decoding.translator import Translator
    from aiayn.web.postedit import alternatives

    translator, sentence = Translator.from_pretrained(model), "forty five thousand six hundred"
    translate(page, site_url, sentence)
    source, bos = encode_sources(translator.tokenizer, [sentence])[0], translator.tokenizer.bos_id
    ours = alternatives(translator, source, [bos], 10)["alternatives"]
    page.click("#token-probs .tp[data-t='0']")
    page.wait_for_selector("[data-testid=alternatives] button.alt")
    shown = page.eval_on_selector_all("button.alt", "bs => bs.map(b => [Number(b.dataset.id), Number(b.dataset.prob), "
                                      "b.dataset.prefix, !b.disabled])")
    assert [a[0] for a in shown] == [a["id"] for a in ours]
    assert np.abs(np.array([a[1] for a in shown]) - [a["prob"] for a in ours]).max() < TOL
    assert [(a[2], a[3]) for a in shown] == [(a["prefix"], a["pickable"]) for a in ours]
    choice = page.locator("button.alt:not([disabled]):not(.current)").first
    prefix = choice.get_attribute("data-prefix")
    choice.click()
    page.wait_for_selector("[data-testid=prefix-note]:not([hidden])")
    page.wait_for_selector("#heatmap td.cell")
    expected = translator.translate([sentence], target_prefix=[prefix], return_attention=True)[0]
    assert page.text_content("#translation") == expected.text
    last = expected.attention["cross"].shape[0] - 1
    assert np.abs(drawn(page, "cross", last, 0) - expected.attention["cross"][last, 0]).max() < TOL


def test_static_site_warns_as_the_served_page(page, browser, site_url, model):
    """Unknown pieces and an output cut at its length limit (an untrained model's): the same warnings as the
    page `aiayn serve` serves, which adds the hallucination diagnostics' (they need the server); a text of too
    many pieces: the same refusal."""
    from aiayn.decoding.translator import Translator
    from aiayn.web.app import create_app

    text = "forty ☃ five"
    served_page, long = browser.new_page(), " ".join(["zz"] * 100)  # 300 characters, over 128 pieces
    with serving(create_app(Translator.from_pretrained(model))) as url:
        translate(served_page, url, text)
        served = served_page.text_content("#warning")
        too_long = refused(served_page, long)
    served_page.close()
    translate(page, site_url, text)
    ours = page.text_content("#warning")  # the served page adds the diagnostics' warnings after these
    assert "unknown to this model" in ours and "stopped" in ours and served.startswith(ours), (ours, served)
    assert "subword tokens" in too_long and refused(page, long) == too_long


def refused(page, text) -> str:
    page.fill("#text", text)
    page.click("#translate")
    page.wait_for_selector("#error:not(:empty)")
    return page.text_content("#error")


def test_static_site_opens_the_model_its_address_names(page, site_url, other_model):
    from aiayn.decoding.translator import Translator

    ours = Translator.from_pretrained(other_model).translate([SENTENCES[1]], beam=1, return_attention=True)[0]
    translate(page, site_url + "?model=other", SENTENCES[1], beam=1)
    assert page.text_content("#translation") == ours.text
    assert "model=other" in page.url  # the address the page rewrote after translating still names the model
    cross = ours.attention["cross"]  # (1, H, T, S): one decoder layer
    assert np.abs(drawn(page, "cross", 0, 2) - cross[0, 2]).max() < TOL
    page.goto(site_url + "?model=nothing")
    page.wait_for_selector("#error:has-text('other')")
    assert "nothing" in page.text_content("#error")


@pytest.mark.parametrize("address, words", [("", "서버"), ("?model=demo&text=forty+five", "서버"),
                                            ("?lang=en", "the server")])
def test_a_site_written_for_korean_opens_in_korean_unless_the_address_says(page, korean_site_url, address, words):
    """The reader's last choice (English here) gives way to the site's language; lang= in the address wins."""
    page.goto(korean_site_url)
    page.evaluate("localStorage.setItem('aiayn-lang', 'en')")
    page.goto(korean_site_url + address)
    page.wait_for_selector("[data-testid=static-note]")
    assert words in page.text_content("[data-testid=static-note]")
    kept = dict(p.split("=") for p in address[1:].split("&") if p)
    assert all(f"{k}={v}" in page.url for k, v in kept.items()), page.url  # the rest of the address kept


@pytest.mark.parametrize("lang, words", [("en", "the server"), ("ko", "서버")])
def test_static_site_says_the_step_view_needs_the_server(page, site_url, lang, words):
    page.goto(site_url)
    page.evaluate(f"localStorage.setItem('aiayn-lang', '{lang}')")
    translate(page, site_url, SENTENCES[0])
    assert words in page.text_content("[data-testid=static-note]")
    page.click("#heatmap button.q[data-q='0']")
    page.wait_for_selector("#step .error")
    assert words in page.text_content("#step .error")


@pytest.mark.parametrize("lang, words", [("en", "the server"), ("ko", "서버")])
def test_static_site_says_the_beam_trace_and_a_heads_removal_need_the_server(page, site_url, lang, words):
    page.goto(site_url)
    page.evaluate(f"localStorage.setItem('aiayn-lang', '{lang}')")
    translate(page, site_url, SENTENCES[0])
    page.click("[data-testid=beam-trace] > summary")
    page.wait_for_selector("#beam-body .note")
    said = page.inner_text("#beam-body")
    assert words in said and "\n" not in said.strip()
    page.click("[data-testid=without-head]")  # "without this head" needs the server's model too
    page.wait_for_selector("[data-testid=ablation] .note")
    said = page.inner_text("[data-testid=ablation]")
    assert words in said and "\n" not in said.strip()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_every_learning_pages_link_opens_its_view_in_the_explorer_of_its_language(page, docs_site_url, lang):
    """Each link of the built learning pages: the explorer of the page's language, which translates the
    link's sentence and shows the link's kind, layer and head (the address the page writes back from what it
    shows), in the page's language, with the panel it names."""
    site, url = docs_site_url
    learn = site / ("ko/learn" if lang == "ko" else "learn")
    pages = sorted(learn.rglob("index.html"))
    assert len(pages) >= 13
    for built in pages:
        page_url = url + built.parent.relative_to(site).as_posix() + "/"
        hrefs = re.findall(r'href="([^"]*explorer/\?[^"]*)"', built.read_text(encoding="utf-8"))
        assert hrefs, built
        for href in hrefs:
            target = urllib.parse.urljoin(page_url, html.unescape(href))
            parts = urllib.parse.urlsplit(target)
            assert parts.path == ("/ko/explorer/" if lang == "ko" else "/explorer/"), (built, href)
            asked = dict(urllib.parse.parse_qsl(parts.query))
            page.goto(target)
            page.wait_for_selector("#heatmap td.cell", timeout=60000)
            assert page.text_content("#translation"), (built, href)
            shown = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(page.url).query))
            for name in ("text", "kind", "layer", "head", "words", "lang", "model"):
                assert shown.get(name) == asked.get(name), (built, href, name, shown)
            assert shown["beam"] == asked.get("beam", shown["beam"]), (built, href)  # else the model's own
            assert page.evaluate("document.documentElement.lang") == lang
            if asked.get("open") == "pe":
                page.wait_for_selector("[data-testid=pe-panel]:not([hidden])")
            assert urllib.parse.urlsplit(page.url).fragment == parts.fragment
