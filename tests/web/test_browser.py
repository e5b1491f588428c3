"""A real browser drives the page: Debian's Chromium through Playwright, against the server on loopback.

Skipped only when no Chromium is installed and AIAYN_REQUIRE_BROWSER is unset; .ci/run installs Chromium
and sets it, so in CI these tests always run. Screenshots go to runs/test-artifacts (AIAYN_ARTIFACTS)."""

import math
import os
import shutil
from pathlib import Path

import pytest

from tests.paths import REPO
from tests.serving import serving

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("AIAYN_ARTIFACTS", REPO / "runs" / "test-artifacts"))
FIRST, SECOND = "seven hundred", "forty five thousand"  # no word in common
pytestmark = pytest.mark.slow  # a browser and a server per test

if not Path(CHROMIUM).exists() and not os.environ.get("AIAYN_REQUIRE_BROWSER"):
    pytest.skip("no Chromium here (apt-get install chromium); CI installs it", allow_module_level=True)


def serve(model_dir, alignment=None):
    """The app on loopback (alignment: `aiayn serve --alignment-head`'s value) -> its address."""
    from aiayn.decoding.translator import Translator
    from aiayn.web.app import create_app

    with serving(create_app(Translator.from_pretrained(model_dir), alignment=alignment)) as url:
        yield url


@pytest.fixture(scope="module")
def server(transformer_dir):
    yield from serve(transformer_dir)


@pytest.fixture(scope="module")
def rnn_server(rnn_dir):
    yield from serve(rnn_dir)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    yield page
    page.close()
    assert not errors, f"script errors on the page: {errors}"


def translate(page, url, text):
    page.goto(url)
    page.wait_for_selector("[data-testid=model-info] dd")
    page.fill("#text", text)
    page.click("#translate")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)


def heat_values(page) -> list[str]:
    return page.eval_on_selector_all("#heatmap td.cell", "cells => cells.map(c => c.dataset.value)")


def count(page, selector) -> int:
    return page.locator(selector).count()


def shot(page, name):
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_overview_shows_every_head_and_a_click_opens_it(page, server):
    translate(page, server, "three hundred forty five thousand twenty one")
    assert "Transformer" in page.inner_text("[data-testid=model-info]")
    assert page.inner_text("#translation").strip()
    assert count(page, "[data-testid=head-thumb]") == 2 * 4  # the tiny model: 2 layers x 4 heads
    assert count(page, "[data-testid=layer-mean-thumb]") == 2
    queries, keys = count(page, "#heatmap th.query"), count(page, "#heatmap th.key")
    before = heat_values(page)
    assert len(before) == queries * keys and keys >= 7  # three hundred forty five thousand twenty one </s>
    page.click("[data-testid=head-thumb][data-layer='0'][data-head='2']")
    assert page.input_value("#layer") == "1" and page.input_value("#head") == "3"  # 1-based
    assert "layer 1 · head 3" in page.inner_text("#matrix-caption")  # 1-based where the user reads
    assert heat_values(page) != before, "opening another head must change the matrix"
    assert page.get_attribute("[data-testid=head-thumb][data-layer='0'][data-head='2']", "aria-pressed") == "true"
    page.hover("#heatmap th.query >> nth=1")
    assert count(page, "[data-testid=line-view] svg line") > 0, "hovering a query draws its lines"
    page.check("#overlay")
    colours = page.eval_on_selector_all("[data-testid=line-view] svg line",
                                        "ls => new Set(ls.map(l => l.getAttribute('stroke'))).size")
    assert colours == 4, "every head of the layer overlaid in its own colour"
    shot(page, "web_overview")


def test_line_view_overlays_the_chosen_heads_each_in_its_colour(page, server):
    translate(page, server, "three hundred forty five thousand twenty one")
    view, chips = "[data-testid=line-view]", "[data-testid=line-view] [data-testid=head-chip]"
    pressed = page.locator(f"{chips}[aria-pressed=true]")
    assert count(page, chips) == 4 and pressed.count() == 0

    def strokes():
        return page.eval_on_selector_all(f"{view} svg line",
                                         "ls => [...new Set(ls.map(l => l.getAttribute('stroke')))]")

    page.click(f"{view} text.lq >> nth=1")  # the query: its lines stay drawn, its step view opens
    page.wait_for_selector("#step-table")
    assert len(strokes()) == 1, "no head chosen: the lines of the matrix's head alone"
    page.click(f"{chips}[data-head='1']")
    page.focus(f"{chips}[data-head='3']")
    page.keyboard.press("Enter")  # the chips work from the keyboard too
    assert pressed.all_inner_texts() == ["head 2", "head 4"], "the legend names the chosen heads (1-based)"
    colours = pressed.evaluate_all("bs => bs.map(b => b.style.getPropertyValue('--c'))")
    assert len(set(colours)) == 2 and sorted(strokes()) == sorted(colours), "two heads, two colours, as in the legend"
    assert "heads 2, 4" in page.inner_text("#line-caption")
    assert page.evaluate("document.getElementById('overlay').indeterminate")
    assert page.locator("#line-tops li").all_inner_texts()[0].startswith("head 2:")
    shot(page, "web_line_heads")
    page.click(f"{chips}[data-head='1']")  # toggled off: its lines go
    assert strokes() == [colours[1]] and pressed.all_inner_texts() == ["head 4"]
    assert page.get_attribute(f"{chips}[data-head='1']", "aria-pressed") == "false"
    # still linked to the matrix and the step view: a token click selects that row in both
    page.click(f"{view} text.lq >> nth=2")
    page.wait_for_function("document.querySelector('[data-testid=step-view]').textContent.includes('(row 3)')")
    assert "selected" in page.get_attribute("#heatmap tbody tr >> nth=2", "class")
    page.set_viewport_size({"width": 390, "height": 844})
    page.click(f"{chips}[data-head='0']")
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide on a {width[1]} px screen"
    shot(page, "web_line_heads_phone")


def test_decoder_self_attention_shows_masked_cells_and_the_step_softmax(page, server):
    translate(page, server, "forty five thousand")
    page.select_option("#kind", "decoder_self")
    T = count(page, "#heatmap th.query")
    assert count(page, "[data-testid=cell-masked]") == T * (T - 1) // 2, "every future cell is masked"
    assert "masked" in page.get_attribute("[data-testid=cell-masked] >> nth=0", "title")
    page.select_option("#layer", "1")
    page.select_option("#head", "3")
    with page.expect_response("**/api/step") as answer:
        page.click("#heatmap button.q >> nth=1")
    step = answer.value.json()
    page.wait_for_selector("[data-testid=step-view] #step-table")
    q, keys, mask = step["query_vector"], step["keys"], step["mask"]
    assert mask == [k <= 1 for k in range(T)], "decoder self-attention: keys after the query are masked"
    scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(len(q)) for k in keys]
    top = max(s for s, m in zip(scores, mask) if m)
    exps = [math.exp(s - top) if m else 0.0 for s, m in zip(scores, mask)]
    expected = [e / sum(exps) for e in exps]
    shown = page.eval_on_selector_all("#step-table tbody tr", "rs => rs.map(r => Number(r.dataset.weight))")
    assert len(shown) == T, "the step table lists the masked keys too"
    assert all(abs(a - b) < 1e-3 for a, b in zip(shown, expected)), (shown, expected)
    texts = page.eval_on_selector_all("#step-table tbody td.w", "ts => ts.map(t => t.textContent)")
    assert texts == [f"{w:.3f}" for w in step["weights"]]
    assert page.locator("#step-table tr.masked").count() == T - 2
    assert "−∞" in page.inner_text("#step-table tr.masked >> nth=0")
    assert "layer 1, head 3" in page.inner_text("[data-testid=step-view]")  # 1-based, as selected
    shot(page, "web_decoder_self_step")


def test_changes_never_leave_stale_panels(page, server):
    translate(page, server, FIRST)
    page.click("#heatmap button.q >> nth=0")
    page.wait_for_selector("#step-table")
    page.select_option("#head", "2")  # a new head: the step view is recomputed for it
    page.wait_for_function("document.querySelector('[data-testid=step-view]').textContent.includes('head 2')")
    page.mouse.move(0, 0)
    page.select_option("#kind", "encoder_self")  # a new kind: the query is gone, so is its step view
    assert count(page, "#step-table") == 0 and page.inner_text("#hover-view") == ""
    page.fill("#text", SECOND)
    page.click("#translate")
    page.wait_for_function(f"document.querySelector('#heatmap table')?.getAttribute('aria-label')"
                           f".includes('{SECOND.split()[0]}')", timeout=30000)
    keys = page.eval_on_selector_all("#heatmap th.key", "e => e.map(x => x.textContent)")
    assert keys == ["forty", "five", "thousand", "</s>"]
    for panel in ("#heatmap", "[data-testid=line-view]", "[data-testid=step-view]", "#hover-view", "#matrix-caption"):
        text = page.inner_text(panel)
        assert "seven" not in text and "hundred" not in text, f"{panel} still shows the first sentence"
    # a failed request leaves no panel of the old sentence up, and says what happened in words
    page.route("**/api/translate", lambda route: route.abort())
    page.click("#translate")
    page.wait_for_function("document.getElementById('error').textContent.length > 0")
    assert "cannot be reached" in page.inner_text("#error")
    assert not page.is_visible("#views") and page.inner_text("#translation") == ""


def test_mean_never_feeds_the_step_view(page, server):
    translate(page, server, "forty five")
    steps = []
    page.on("request", lambda r: steps.append(r) if "/api/step" in r.url else None)
    page.select_option("#head", "mean")
    page.click("#heatmap button.q >> nth=0")
    assert "one head" in page.inner_text("[data-testid=step-view]")
    assert steps == [] and count(page, "#step-table") == 0
    page.select_option("#head", "1")  # one head again (the first): its step view is computed
    page.wait_for_selector("#step-table")
    page.select_option("#layer", "mean")
    assert "one head" in page.inner_text("[data-testid=step-view]") and count(page, "#step-table") == 0
    bodies = [r.post_data_json for r in steps]
    assert len(bodies) == 1 and bodies[0]["head"] == 0 and isinstance(bodies[0]["layer"], int)


def test_keyboard_alone(page, server):
    page.goto(server)
    page.wait_for_selector("[data-testid=model-info] dd")
    page.focus("#text")
    page.keyboard.type("forty five thousand")
    page.keyboard.press("Enter")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    for _ in range(60):  # Tab to the first thumbnail, open it with Enter
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.testid") == "head-thumb":
            break
    page.keyboard.press("Tab")  # the next thumbnail: layer 0, head 1
    page.keyboard.press("Enter")
    assert page.input_value("#head") == "2"  # the second head, 1-based
    # the focus goes to that head's matrix, on its first query token
    assert page.evaluate("document.activeElement.classList.contains('q') && document.activeElement.dataset.q") == "0"
    page.keyboard.press("Enter")
    page.wait_for_selector("#step-table")
    assert "(row 1)" in page.inner_text("[data-testid=step-view]")  # rows count from 1 on the page
    page.keyboard.press("ArrowDown")
    page.wait_for_function("document.querySelector('[data-testid=step-view]').textContent.includes('(row 2)')")
    assert page.evaluate("document.activeElement.dataset.q") == "1", "the arrow key moves the focus with the query"
    assert page.get_attribute("#heatmap button.q >> nth=1", "aria-label")
    for _ in range(20):  # on to the line view's tokens: arrows move, Enter opens the step view
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('lq')"):
            break
    assert page.evaluate("document.activeElement.dataset.q") == "1"
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function("document.querySelector('[data-testid=step-view]').textContent.includes('(row 3)')")
    assert page.evaluate("document.activeElement.dataset.q") == "2", "the focus stays on the line view's token"
    shot(page, "web_keyboard")


def test_phone_width_does_not_scroll_sideways(browser, server):
    page = browser.new_page(viewport={"width": 390, "height": 844})
    translate(page, server, "three hundred forty five thousand six hundred twenty one")
    page.click("#heatmap button.q >> nth=2")
    page.wait_for_selector("#step-table")
    page.click("#step-table details.vec >> nth=0")  # an unfolded vector wraps in its box
    width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page is {width[0]} px wide on a {width[1]} px screen"
    assert page.evaluate("document.getElementById('step').getBoundingClientRect().top < window.innerHeight"), \
        "the step view scrolls into sight when a row is clicked"
    shot(page, "web_phone")
    page.close()


def test_errors_are_readable_sentences(page, server):
    page.goto(server)
    page.wait_for_selector("[data-testid=model-info] dd")
    page.click("#translate")
    assert page.inner_text("#error") == "Type a sentence first."
    page.fill("#text", "forty five")
    page.fill("#beam", "0")
    page.click("#translate")
    page.wait_for_function("document.getElementById('error').textContent.length > 0")
    message = page.inner_text("#error")
    assert message.startswith("beam:") and "{" not in message and "forty" not in message
    assert page.is_enabled("#translate"), "the button comes back after the request"
    page.fill("#beam", "2")
    page.fill("#text", "45 thousand")  # digits: the number-word model has no pieces for them
    page.click("#translate")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    assert page.inner_text("#error") == "" and "unknown to this model" in page.inner_text("#warning")


def test_rnn_model_gets_seed_002s_step_view(page, rnn_server):
    translate(page, rnn_server, "forty five thousand")
    assert "RNN" in page.inner_text("[data-testid=model-info]")
    assert page.eval_on_selector_all("#kind option", "o => o.map(x => x.value)") == ["cross"]
    assert count(page, "[data-testid=head-thumb]") == 1
    row = [float(v) for v in heat_values(page)[:4]]  # forty five thousand </s>
    with page.expect_response("**/api/step") as answer:
        page.click("#heatmap button.q >> nth=0")
    step = answer.value.json()
    page.wait_for_selector("[data-testid=step-view] #step-table")
    view = page.inner_text("[data-testid=step-view]")
    for part in ("score(s, h_i)", step["score_name"], "tanh(W_c [a_t; s_t] + b_c)", "softmax"):
        assert part in view, part
    assert math.isclose(sum(step["weights"]), 1.0, abs_tol=1e-4)
    assert all(abs(a - b) < 2e-3 for a, b in zip(step["weights"], row)), "the step's alpha is the matrix's row"
    assert page.locator("[data-testid=step-view] ol.top li").count() == len(step["top"]) > 0
    assert step["top"][0]["token"].lstrip("▁") in view
    shot(page, "web_rnn_step")


def test_word_view_merges_pieces(page, server):
    translate(page, server, "seventeen thousand")
    pieces = page.eval_on_selector_all("#heatmap th.key", "e => e.map(x => x.textContent)")
    page.check("#words")
    assert page.is_visible("#words-rule") and "▁" in page.inner_text("#words-rule")
    words = page.eval_on_selector_all("#heatmap th.key", "e => e.map(x => x.textContent)")
    assert words == ["seventeen", "thousand", "</s>"] and len(pieces) >= len(words)
    assert all("▁" not in p for p in pieces), "pieces are shown without SentencePiece's ▁"


# ---- an imported Marian (OPUS-MT) model: separate vocabularies, decoder start <pad> -------------------
# (the minimum of tests/interop/test_interop_marian.py's helpers, with SentencePiece models of the built-in task)
def _marian_spm(lines: list[str], vocab_size: int) -> bytes:
    """A unigram model as Marian's: </s> = 0, <unk> = 1, no <s> or <pad>."""
    import io

    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, model_type="unigram",
                                   vocab_size=vocab_size, eos_id=0, unk_id=1, bos_id=-1, pad_id=-1, num_threads=1,
                                   minloglevel=2, hard_vocab_limit=False)
    return model.getvalue()


def _marian_dir(root: Path) -> Path:
    """A random MarianMTModel (d_model 32, 2 + 2 layers, separate vocabularies of different sizes, <pad> at
    the same id in both tables), saved with save_pretrained, then imported with `aiayn import-hf`."""
    import json

    import sentencepiece as spm
    import torch

    from aiayn.cli import main
    from aiayn.data.synthetic import number_task

    transformers = pytest.importorskip("transformers")
    pairs = number_task(400, 10, 10, seed=3)["train"]
    models = [_marian_spm([p[i] for p in pairs], 60) for i in (0, 1)]
    pieces = [[sp.id_to_piece(j) for j in range(2, sp.get_piece_size())]
              for sp in (spm.SentencePieceProcessor(model_proto=m) for m in models)]
    pad = 2 + min(len(p) for p in pieces)  # last in the smaller table, inside the larger one
    source, target = (["</s>", "<unk>", *p[: pad - 2], "<pad>", *p[pad - 2:]] for p in pieces)
    assert len(source) != len(target)
    hf = root / "hf"
    hf.mkdir()
    for name, data in (("source.spm", models[0]), ("target.spm", models[1])):
        (hf / name).write_bytes(data)
    for name, table in (("vocab.json", source), ("target_vocab.json", target)):
        (hf / name).write_text(json.dumps({p: i for i, p in enumerate(table)}), encoding="utf-8")
    tok = transformers.MarianTokenizer(str(hf / "source.spm"), str(hf / "target.spm"), str(hf / "vocab.json"),
                                       separate_vocabs=True, target_vocab_file=str(hf / "target_vocab.json"))
    config = transformers.MarianConfig(
        vocab_size=len(source), decoder_vocab_size=len(target), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=96, pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0,
        forced_eos_token_id=None, activation_function="swish", scale_embedding=True, dropout=0.0,
        share_encoder_decoder_embeddings=False, separate_vocabs=True)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config).eval()
    model.save_pretrained(hf)
    tok.save_pretrained(hf)
    assert main(["import-hf", str(hf), "--out", str(root / "imported")]) == 0
    return root / "imported"


@pytest.fixture(scope="module")
def marian_dir(tmp_path_factory):
    return _marian_dir(tmp_path_factory.mktemp("marian"))


@pytest.fixture(scope="module")
def marian_server(marian_dir):
    yield from serve(marian_dir)


@pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses:UserWarning")
def test_imported_marian_model_shows_its_attention_and_step_view(page, marian_dir, marian_server):
    from aiayn.data.tokenizer import load_dir

    text = "forty five thousand"
    tok = load_dir(marian_dir)
    pieces = tok.source_id_to_piece(tok.encode_source([text])[0]) + ["</s>"]
    translate(page, marian_server, text)
    assert "Transformer" in page.inner_text("[data-testid=model-info]")
    assert count(page, "[data-testid=head-thumb]") == 2 * 4  # 2 decoder layers x 4 heads
    keys = page.eval_on_selector_all("#heatmap th.key", "e => e.map(x => x.textContent)")
    # the source side's own pieces (the page marks a piece that continues a word with "·")
    assert [k.lstrip("·") for k in keys] == [p.lstrip("▁") for p in pieces], (keys, pieces)
    queries = count(page, "#heatmap th.query")
    assert queries >= 1 and len(heat_values(page)) == queries * len(keys)
    with page.expect_response("**/api/step") as answer:
        page.click("#heatmap button.q >> nth=0")
    step = answer.value.json()
    page.wait_for_selector("[data-testid=step-view] #step-table")
    assert math.isclose(sum(step["weights"]), 1.0, abs_tol=1e-4) and len(step["weights"]) == len(keys)
    page.select_option("#kind", "decoder_self")
    assert page.inner_text("#heatmap th.query >> nth=0").startswith("<pad>"), "the decoder starts from <pad>"
    shot(page, "web_imported_marian")
