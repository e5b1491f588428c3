"""The page a learner reads top to bottom, measured in a real browser (Chromium through Playwright, as
tests/web/test_browser.py): the matrix in the first screen after translating, the step view beside it on a
wide screen, the step table in the formula's order, the FFN and positional-encoding panels, the word view's
rows and caption, the label-smoothing note, the address that keeps the language and the open panel, an
empty input that clears the maps, the one-click lessons of the coreference model, vectors as coloured strips
and one head's score matrix through scale, mask and softmax. Both languages where words are shown."""

import re

import numpy as np
import pytest

from tests.web import test_browser as shared
from tests.web.test_browser import ARTIFACTS

pytestmark = pytest.mark.slow
browser, server = shared.browser, shared.server  # the shared fixtures
SENTENCE = "three hundred forty five thousand twenty one"
TARGET = "drei hundert fünf und vierzig tausend ein und zwanzig"
SCREENS = {(1280, 800): 1.0, (390, 844): 1.5}  # where the matrix must start: within this many screens


def open_page(browser, url, width, height, lang):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(error))
    page.goto(url)
    page.evaluate(f"localStorage.setItem('aiayn-lang', '{lang}')")
    page.goto(url)
    page.wait_for_selector("[data-testid=model-info] dd")
    return page


def translate_here(page, text=SENTENCE, target=TARGET):
    """Types the sentence (and a target: the same length on every run) and presses Translate, at the top."""
    page.fill("#text", text)
    page.fill("[data-testid=target-input]", target)
    page.click("#translate")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)


def top(page, selector):
    """Where the element starts, in px from the top of the page."""
    return page.evaluate(f"document.querySelector('{selector}').getBoundingClientRect().top + scrollY")


def box(page, selector):
    return page.evaluate(f"(() => {{ const r = document.querySelector('{selector}').getBoundingClientRect(); "
                         "return {left: r.left, right: r.right, top: r.top + scrollY, bottom: r.bottom + scrollY, "
                         "width: r.width, height: r.height}; })()")


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("size", list(SCREENS))
def test_the_matrix_starts_in_the_first_screen_after_translating(browser, server, size, lang):
    width, height = size
    page = open_page(browser, server, width, height, lang)
    translate_here(page)
    matrix = top(page, "[data-testid=matrix]")
    print(f"{lang} {width}x{height}: matrix box at {matrix:.0f} px, first cell at {top(page, '#heatmap td.cell'):.0f}")
    assert matrix < SCREENS[size] * height, f"{lang} {width}x{height}: the matrix starts at {matrix:.0f} px"
    if width >= 1100:  # the step view beside the matrix, not under it
        step, grid = box(page, "[data-testid=step-view]"), box(page, "[data-testid=matrix]")
        assert step["left"] >= grid["right"] and abs(step["top"] - grid["top"]) < 5, (step, grid)
    page.screenshot(path=str(ARTIFACTS / f"web_layout_{lang}_{width}.png"))
    # the other views are below the matrix, not above it, and one click on their link away
    for panel in ("head-search", "arch-map", "overview"):
        selector = f"[data-testid={panel}]" if panel != "overview" else "#overview-panel"
        assert top(page, selector) > matrix, panel
    page.click(".jumps a[href='#search-panel']")
    page.wait_for_function("document.querySelector('#search-panel').getBoundingClientRect().top < innerHeight")
    assert "#search-panel" in page.url
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth") and not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_first_cell_is_in_the_first_screen_and_stays_there_when_a_head_is_taken_out(browser, server, lang):
    """The demo's kind of model and sentence at 1280x800: the jump links on one line, the matrix's first cell in
    the first screen, and the comparison without a head under the matrix, not between it and its controls."""
    page = open_page(browser, f"{server}?lang={lang}", 1280, 800, lang)
    translate_here(page, "forty five thousand six hundred", "fünf und vierzig tausend sechs hundert")
    links = page.eval_on_selector_all(".jumps a", "as => as.map(a => a.getBoundingClientRect().top)")
    assert max(links) - min(links) < 2, f"{lang}: the jump links wrap: {links}"
    cell = top(page, "#heatmap td.cell")
    print(f"{lang} 1280x800: first cell at {cell:.0f} px")
    assert cell <= 800, f"{lang} 1280x800: the first cell starts at {cell:.0f} px"
    page.click("[data-testid=without-head]")
    page.wait_for_selector("[data-testid=ablation-after]")
    assert abs(top(page, "#heatmap td.cell") - cell) < 1 and top(page, "[data-testid=ablation]") > cell
    page.screenshot(path=str(ARTIFACTS / f"web_first_cell_{lang}_1280.png"))
    assert not page.errors


@pytest.mark.parametrize("width", [1280, 390])
def test_step_table_runs_in_the_formulas_order_with_the_unscaled_softmax_after_it(browser, server, width):
    page = open_page(browser, server, width, 844, "en")
    translate_here(page)
    page.click("#heatmap button.q >> nth=2")
    page.wait_for_selector("#step-table")
    heads = page.eval_on_selector_all("#step-table thead th", "ts => ts.map(t => t.innerText.trim())")
    order = [next(i for i, h in enumerate(heads) if re.fullmatch(pattern, h)) for pattern in
             (r"q·k", r"÷ √d\s*k", r"exp", r"softmax", r"for comparison.*without.*")]
    assert order == sorted(order), heads  # q·k, ÷ √dₖ, exp, softmax, then the comparison
    softmax, compare = box(page, "#step-table th.w"), box(page, "#step-table th.cmp")
    shown = box(page, "#step .table-box")
    assert softmax["right"] <= shown["right"] + 1, f"the weight is off the table's box at {width} px"
    assert compare["left"] >= softmax["right"]
    weights = page.eval_on_selector_all("#step-table tbody tr", "rs => rs.map(r => Number(r.dataset.weight))")
    cells = page.eval_on_selector_all("#step-table tbody td.w", "ts => ts.map(t => Number(t.innerText))")
    assert cells == pytest.approx(weights, abs=6e-4) and sum(weights) == pytest.approx(1, abs=1e-3)
    assert not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_ffn_panel_names_its_row_and_follows_the_block_clicked(browser, server, lang):
    page = open_page(browser, server, 1280, 800, lang)
    translate_here(page)
    page.click("#heatmap button.q >> nth=1")
    page.wait_for_selector("#step-table")
    page.click("[data-testid=arch-map] .blk-ffn[data-stack=decoder]")
    where = page.wait_for_selector("[data-testid=ffn-where]")
    assert where.get_attribute("data-stack") == "decoder" and page.input_value("#kind") == "cross"
    text = where.inner_text()
    layer = page.input_value("#layer")
    assert (f"decoder layer {layer}" in text if lang == "en" else f"디코더 {layer}층" in text), text
    assert "3" in text and "drei" in text, text  # the third sublayer; the row's token
    page.click("[data-testid=arch-map] .blk-ffn[data-stack=encoder]")
    page.wait_for_function("document.getElementById('kind').value === 'encoder_self'")
    assert page.is_visible("[data-testid=ffn-panel]") and page.locator("[data-testid=ffn-where]").count() == 0
    page.click("#heatmap button.q >> nth=2")
    where = page.wait_for_selector("[data-testid=ffn-where][data-stack=encoder]")
    assert ("encoder layer" in where.inner_text() if lang == "en" else "인코더" in where.inner_text())
    assert "forty" in where.inner_text()  # the encoder row's own token
    assert page.get_attribute("[data-testid=arch-map] .blk-ffn[data-stack=encoder]", "aria-expanded") == "true"
    assert not page.errors


def test_positions_panel_draws_a_square_with_axes_curves_and_each_offset_once(browser, server):
    page = open_page(browser, server, 1280, 800, "en")
    translate_here(page)
    page.click("[data-testid=arch-map] .blk-pe >> nth=0")
    page.wait_for_selector("#pe-dots")
    square = box(page, "#pe-dots")
    assert abs(square["width"] - square["height"]) < 2 and square["width"] >= 200, square
    ticks = page.eval_on_selector_all("#pe-dots text", "ts => ts.map(t => t.textContent)")
    assert {"0", "10", "20"} <= set(ticks)
    dims = page.eval_on_selector_all("#pe-curves polyline", "ps => ps.map(p => [Number(p.dataset.dim), "
                                     "p.getAttribute('points').split(' ').length])")
    table = page.evaluate("fetch('/api/positions').then(r => r.json())")
    assert len(dims) >= 3 and all(n == len(table["table"]) for _, n in dims)  # a curve over every position
    offsets = page.eval_on_selector_all("[data-testid=pe-panel] .offsets li", "ls => ls.map(l => l.innerText)")
    assert offsets[2].startswith("2:") and page.locator("[data-testid=pe-panel] ol.offsets").count() == 0
    assert not page.errors


def test_word_view_keeps_the_decoder_input_and_shows_words(browser, server):
    page = open_page(browser, server, 1280, 800, "en")
    translate_here(page, "seventeen thousand eight hundred", "siebzehntausend achthundert")
    page.check("#words")
    rows = page.eval_on_selector_all("#heatmap button.q", "bs => bs.map(b => b.innerText.replace(/\\s+/g, ' '))")
    assert rows[0].startswith("<s>") and "→ siebzehntausend" in rows[0], rows
    assert rows[1].startswith("siebzehntausend") and "→ achthundert" in rows[1], rows
    caption = page.inner_text("#matrix-caption")
    sentence = re.search(r"“([^”]*)”", caption).group(1)
    assert sentence.startswith("seventeen thousand eight hundred") and "·" not in sentence, caption
    split = page.evaluate("""import('/static/matrix.js').then(m => [
        m.splitPunctuation([["tired."], [[0, 1]]], ["▁tired", "."]),
        m.splitPunctuation([["didn't"], [[0, 1, 2]]], ["▁didn", "'", "t"]),
        m.splitPunctuation([["(it)"], [[0, 1, 2]]], ["▁(", "it", ")"])])""")
    assert split[0] == [["tired", "."], [[0], [1]]]
    assert split[1] == [["didn't"], [[0, 1, 2]]]  # inside a word it stays
    assert split[2] == [["(", "it", ")"], [[0], [1], [2]]]
    assert not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_probabilities_say_what_label_smoothing_caps_them_at(browser, server, lang):
    page = open_page(browser, server, 390, 844, lang)
    translate_here(page)
    info = page.evaluate("fetch('/api/info').then(r => r.json())")
    eps, vocab = info["label_smoothing"], info["tgt_vocab_size"]
    note = page.inner_text("[data-testid=smoothing-note]")
    assert f"ε = {eps}" in note and f"{1 - eps + eps / vocab:.4f}" in note, note
    assert box(page, "[data-testid=smoothing-note]")["top"] < box(page, "[data-testid=matrix]")["top"]
    assert not page.errors


def test_address_keeps_the_language_and_the_open_panel(browser, server):
    page = open_page(browser, server, 1280, 800, "en")
    page.goto(server + "?text=forty+five&lang=ko&open=pe#arch-panel")
    page.wait_for_selector("#pe-dots", timeout=30000)
    assert page.evaluate("document.documentElement.lang") == "ko" and page.is_visible("[data-testid=pe-panel]")
    assert page.evaluate("document.querySelector('#arch-panel').getBoundingClientRect().top") < 50
    assert "lang=ko" in page.url and "open=pe" in page.url and page.url.endswith("#arch-panel")
    page.click("#lang")
    assert "lang=en" in page.url and page.evaluate("document.documentElement.lang") == "en"
    page.click("[data-testid=arch-map] .blk-pe >> nth=0")  # closed: gone from the address
    assert "open=" not in page.url and not page.errors


def test_an_empty_input_clears_the_maps(browser, server):
    page = open_page(browser, server, 1280, 800, "en")
    translate_here(page)
    page.fill("[data-testid=target-input]", "")
    page.fill("#text", "")
    page.wait_for_function("document.querySelectorAll('#heatmap td.cell').length === 0")
    assert not page.is_visible("[data-testid=matrix]") and page.inner_text("[data-testid=translation]") == ""
    assert "text=" not in page.url and "lang=en" in page.url
    assert page.is_visible("[data-testid=model-info]") and not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_coreference_model_offers_it_animal_in_one_click(browser, server, lang):
    """The lessons appear for a model trained on the coreference task: one click translates the sentence
    and opens the encoder head that ranks first for "it" -> "animal", with the ranking and a note that one
    sentence is not the bench's share. Here the tiny number-words model stands in: its /api/info says
    coreference and the first lesson asks "five" -> "forty" of a sentence it can read."""
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(error))

    def coreference(route):
        info = route.fetch().json()
        route.fulfill(json={**info, "dataset": "coreference"})

    def readable(route):
        text = route.fetch().text().replace("The animal didn't cross the street because it was too tired.",
                                            "forty five thousand")
        route.fulfill(body=text.replace('query: "it", key: "animal"', 'query: "five", key: "forty"', 1),
                      content_type="text/javascript")

    page.route("**/api/info", coreference)
    page.route("**/static/lessons.js", readable)
    page.goto(server + f"?lang={lang}")
    buttons = page.locator("[data-testid=experiment]")
    buttons.first.wait_for()
    assert buttons.count() == 2 and "animal" in buttons.first.inner_text()
    buttons.first.click()
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    page.wait_for_selector("[data-testid=experiment-note]")
    assert page.input_value("#kind") == "encoder_self" and page.is_checked("#words")
    selected = page.inner_text("#heatmap tr.selected button.q")
    assert selected.strip() == "five", selected
    ranked = page.eval_on_selector_all("[data-testid=head-search] button.rank", "bs => bs.map(b => "
                                       "[Number(b.dataset.layer), Number(b.dataset.head)])")
    assert ranked and (int(page.input_value("#layer")) - 1, int(page.input_value("#head")) - 1) == tuple(ranked[0])
    note = page.inner_text("[data-testid=experiment-note]")
    assert "500" in note and "bench/coreference.py" in note, note
    page.screenshot(path=str(ARTIFACTS / f"web_lesson_{lang}.png"))
    assert not page.errors


def test_vectors_are_drawn_as_strips_beside_their_numbers(browser, server):
    page = open_page(browser, server, 390, 844, "en")
    translate_here(page)
    page.click("#heatmap button.q >> nth=1")
    page.wait_for_selector("#step-table")
    strips = page.eval_on_selector_all("#step .vec", """vs => vs.map(v => {
        const s = v.querySelector('.strip'), values = JSON.parse(v.dataset.values);
        const stops = [...getComputedStyle(s).backgroundImage.matchAll(/rgba?\\(([^)]*)\\)/g)].map(m => m[1]);
        return [values, Number(s.dataset.n), stops];
    })""")
    assert len(strips) > 10
    for values, n, stops in strips:
        stops = stops[::2]  # the browser writes a cell's colour at both its edges
        assert n == len(values) and len(stops) == len(values)
        top = max(range(n), key=lambda i: abs(values[i]))  # the largest |value| is the darkest cell, in its sign
        red, _, _, *alpha = (float(x) for x in stops[top].split(","))
        assert (red > 200) == (values[top] < 0) and (not alpha or alpha[0] > 0.99)
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth") and not page.errors


def test_score_matrix_goes_through_scale_mask_and_softmax_to_the_matrix(browser, server):
    page = open_page(browser, server, 1280, 800, "en")
    translate_here(page)
    page.select_option("#kind", "decoder_self")
    page.click("[data-testid=scores-go]")
    page.wait_for_selector("#scores-map table[data-stage=dots]", timeout=30000)

    def stage(n):
        page.evaluate(f"(() => {{ const s = document.getElementById('scores-slider'); s.value = '{n}'; "
                      "s.dispatchEvent(new Event('input')); })()")
        cells = page.eval_on_selector_all("#scores-map td.cell", "cs => cs.map(c => [Number(c.dataset.value), "
                                          "c.classList.contains('masked')])")
        return np.array([v for v, _ in cells]), np.array([m for _, m in cells])

    dots, _ = stage(0)
    scaled, _ = stage(1)
    d_k = page.evaluate("fetch('/api/info').then(r => r.json())")["d_k"]
    np.testing.assert_allclose(scaled, dots / np.sqrt(d_k), rtol=1e-6)
    masked, hatched = stage(2)
    n = int(np.sqrt(len(masked)))
    future = np.triu(np.ones((n, n), bool), 1).ravel()  # decoder self-attention: the keys after the query
    assert (hatched == future).all() and np.isneginf(masked[future]).all()
    weights, _ = stage(3)
    np.testing.assert_allclose(weights, heat_values(page), atol=6e-4)  # the softmax is the matrix above
    np.testing.assert_allclose(weights.reshape(n, n).sum(1), 1, atol=1e-4)
    assert not page.errors


def heat_values(page):
    return np.array(page.eval_on_selector_all("#heatmap td.cell", "cs => cs.map(c => Number(c.dataset.value))"))


@pytest.mark.parametrize("width", [1280, 390])
def test_step_view_walks_along_one_flow_of_stages(browser, server, width):
    page = open_page(browser, server, width, 800, "ko")
    translate_here(page)
    page.select_option("#layer", page.eval_on_selector_all("#layer option", "os => os.at(-1).value"))
    page.click("#heatmap button.q >> nth=2")
    page.wait_for_selector("[data-testid=step-flow]")
    stages = page.eval_on_selector_all("[data-testid=step-flow] button", "bs => bs.map(b => b.dataset.to)")
    assert stages == ["x", "qkv", "score", "softmax", "out", "concat", "norm1", "ffn", "norm2", "next"]
    for stage in ("ffn", "softmax", "next"):
        page.click(f"[data-testid=step-flow] button[data-to={stage}]")
        target = box(page, f"#step [data-flow={stage}]")
        assert page.get_attribute(f"[data-testid=step-flow] button[data-to={stage}]", "aria-current") == "true"
        shown = page.evaluate(f"(() => {{ const r = document.querySelector('#step [data-flow={stage}]')"
                              ".getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; })()")
        assert shown, (stage, target)
        flow = page.evaluate("document.querySelector('[data-testid=step-flow]').getBoundingClientRect().top")
        assert -1 <= flow < 800  # the line of stages stays in sight while the step view scrolls
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth") and not page.errors
