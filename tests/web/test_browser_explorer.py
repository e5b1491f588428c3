"""The explorer's lesson in a real browser (Chromium through Playwright, as tests/web/test_browser.py): the
target field, the head search, the step view's unscaled softmax and next token, the positional-encoding
panel, warnings, the URL that restores a view, both languages, and no sideways scroll on phones."""

import json
import re
import shutil

import numpy as np
import pytest
import torch

from aiayn.inspect.maps.capture import capture
from tests.paths import REPO
from tests.web import test_browser as shared
from tests.web.test_browser import ARTIFACTS

pytestmark = pytest.mark.slow
browser, rnn_server, server = shared.browser, shared.rnn_server, shared.server  # the shared fixtures
STATIC = REPO / "aiayn" / "web" / "static"
SENTENCE, TARGET = "forty five thousand", "fünf und vierzig tausend"
WIDTHS = (320, 360, 390, 768, 1024)


def open_page(browser, url, width=1440, lang="en"):
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(url)
    page.evaluate(f"localStorage.setItem('aiayn-lang', '{lang}')")
    page.errors = errors
    return page


def loaded(browser, url, **kwargs):
    """The page in `lang` with its model panel filled (nothing translated yet)."""
    page = open_page(browser, url, **kwargs)
    page.goto(url)
    page.wait_for_selector("[data-testid=model-info] dd")
    return page


def translated(page, url, query=""):
    page.goto(url + query)
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    return page


def heat(page):
    return np.array(page.eval_on_selector_all("#heatmap td.cell", "cs => cs.map(c => Number(c.dataset.value))"))


def test_target_field_shows_the_maps_of_aiayn_attention_target(browser, server, transformer_dir):
    from aiayn.decoding.translator import Translator

    page = loaded(browser, server)
    page.fill("#text", SENTENCE)
    page.fill("[data-testid=target-input]", TARGET)
    page.click("#translate")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    assert page.inner_text("[data-testid=translation]") == TARGET
    expected = capture(Translator.from_pretrained(transformer_dir), SENTENCE, target=TARGET).maps
    for kind in ("cross", "encoder_self", "decoder_self"):
        page.select_option("#kind", kind)
        page.select_option("#layer", "1")  # 1-based, as the page shows them
        page.select_option("#head", "3")
        np.testing.assert_allclose(heat(page), expected[kind][0, 2].ravel(), atol=6e-4)
    assert "layer 1 · head 3" in page.inner_text("#matrix-caption")
    assert "target=" in page.url and not page.errors


def test_head_search_ranks_heads_by_the_maps_values(browser, server):
    page = translated(open_page(browser, server), server, "?text=forty+five+thousand&kind=encoder_self")
    search = "[data-testid=head-search]"
    page.select_option("#search-query", "1")
    page.select_option("#search-key", "0")
    page.click(f"{search} #search-go")
    ranked = page.eval_on_selector_all(f"{search} button.rank", "bs => bs.map(b => [Number(b.dataset.layer), "
                                       "Number(b.dataset.head), Number(b.dataset.weight)])")
    assert len(ranked) == 8 and [w for *_, w in ranked] == sorted((w for *_, w in ranked), reverse=True)
    for layer, head, weight in ranked:  # each weight is the matrix's own cell (row 1, column 0)
        page.select_option("#layer", str(layer + 1))
        page.select_option("#head", str(head + 1))
        cell = float(page.get_attribute("#heatmap tbody tr[data-q='1'] td.cell >> nth=0", "data-value"))
        assert abs(cell - weight) < 1e-4
    page.click(f"{search} button.rank >> nth=0")
    assert (int(page.input_value("#layer")) - 1, int(page.input_value("#head")) - 1) == tuple(ranked[0][:2])
    if ranked[0][2] < 0.3:
        note = page.inner_text("[data-testid=search-weak]")
        assert "import-hf" in note and "parameters" in note
    page.screenshot(path=str(ARTIFACTS / "web_head_search.png"), full_page=True)
    assert not page.errors


def test_step_view_unscaled_and_next_token_equal_the_model(browser, server, transformer_dir):
    from aiayn.decoding.translator import Translator

    page = translated(open_page(browser, server), server,
                      f"?text=forty+five+thousand&target={TARGET.replace(' ', '+')}&kind=cross&layer=2&head=1&q=3")
    page.wait_for_selector("[data-testid=step-next-token] li")
    rows = page.eval_on_selector_all("#step-table tbody tr", "rs => rs.map(r => Number(r.dataset.unscaled))")
    assert "√dₖ" in page.inner_text("[data-testid=step-unscaled]")
    heights = page.eval_on_selector_all("#step-table tbody tr", "rs => rs.map(r => r.getBoundingClientRect().height)")
    assert max(heights) < 40, f"a key's row is {max(heights)} px tall: its vectors wrap"  # one line each
    model = Translator.from_pretrained(transformer_dir)
    tok = model.tokenizer
    src = torch.tensor([tok.encode_source([SENTENCE])[0] + [tok.eos_id]])
    tgt_in = torch.tensor([[tok.bos_id] + tok.encode_target([TARGET])[0]])
    with torch.no_grad():
        probs = torch.softmax(model.model(src, tgt_in)[0, 2].float(), -1)
    shown = page.eval_on_selector_all("[data-testid=step-next-token] li",
                                      "ls => ls.map(l => [Number(l.dataset.id), Number(l.dataset.prob)])")
    top = probs.topk(len(shown))
    assert [i for i, _ in shown] == top.indices.tolist()
    np.testing.assert_allclose([p for _, p in shown], top.values.numpy(), atol=1e-5)
    assert abs(sum(rows) - 1) < 1e-3
    out = json.loads(page.get_attribute("#layer-output .vec", "data-values"))
    assert len(out) == model.model.d_model
    assert not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_temperature_slider_redraws_the_next_tokens_at_that_temperature(browser, server, lang):
    page = translated(open_page(browser, server), server,
                      f"?text=forty+five+thousand&target={TARGET.replace(' ', '+')}&kind=cross&layer=2&head=1&q=3"
                      f"&lang={lang}")
    page.wait_for_selector("[data-testid=step-next-token] li")
    slider = "[data-testid=temperature] input"
    page.eval_on_selector(slider, "e => { e.value = '2.5'; e.dispatchEvent(new Event('input')); "
                                  "e.dispatchEvent(new Event('change')); }")
    page.wait_for_selector("[data-testid=step-next-token][data-temperature='2.5'] li")
    shown = page.eval_on_selector_all("[data-testid=step-next-token] li",
                                      "ls => ls.map(l => [Number(l.dataset.id), Number(l.dataset.prob)])")
    body = page.evaluate("""async target => {
        const post = async (path, body) => (await fetch(path, {method: 'POST', body: JSON.stringify(body),
                                                                headers: {'Content-Type': 'application/json'}})).json();
        const t = await post('/api/translate', {text: 'forty five thousand', target});
        const s = await post('/api/step', {source_ids: t.source_ids, target_input_ids: t.target_input_ids,
                                           kind: 'cross', layer: 1, head: 0, query: 2, temperature: 2.5});
        return s.layer_step.next_tokens; }""", TARGET)
    assert shown == [[t["id"], pytest.approx(t["prob"], abs=1e-6)] for t in body]
    assert page.inner_text("[data-testid=temperature] output") == "2.5"
    label = {"en": "temperature T", "ko": "온도 T"}[lang]
    assert label in page.inner_text("[data-testid=temperature]")
    assert not page.errors


WORDS_TEXT, WORDS_TARGET = "seventeen thousand eight hundred", "siebzehntausend achthundert"  # 4- and 8-piece words


@pytest.mark.parametrize("kind, word", [("cross", 0), ("encoder_self", 0), ("decoder_self", 1)])
def test_word_step_view_shows_the_word_row_as_the_mean_of_its_pieces(browser, server, transformer_dir, kind, word):
    from aiayn.decoding.translator import Translator
    from aiayn.inspect.maps.capture import merge_subwords, word_groups

    page = translated(open_page(browser, server), server, f"?text={WORDS_TEXT.replace(' ', '+')}&target="
                      f"{WORDS_TARGET.replace(' ', '+')}&kind={kind}&layer=2&head=1&words=1&q={word + 1}")
    page.wait_for_selector("#step-word-table")
    rows = page.eval_on_selector_all("#step-word-table tbody tr", "rs => rs.map(r => [Number(r.dataset.weight), "
                                     "[...r.querySelectorAll('td[data-piece-weight]')].map(c => "
                                     "Number(c.dataset.pieceWeight))])")
    maps = capture(Translator.from_pretrained(transformer_dir), WORDS_TEXT, target=WORDS_TARGET)
    # the heatmap's word row, unrounded: the pieces' rows averaged, keys summed per word (merge_subwords)
    np.testing.assert_allclose([w for w, _ in rows], merge_subwords(maps).maps[kind][1, 0, word], atol=1e-5)
    np.testing.assert_allclose([w for w, _ in rows], [np.mean(p) for _, p in rows], atol=1e-12)
    shown = heat(page).reshape(-1, len(rows))[word]  # the same row on the heatmap, from 3-decimal maps
    np.testing.assert_allclose([w for w, _ in rows], shown, atol=8 * 5e-4 + 1e-4)
    groups = word_groups(maps.source_tokens if kind == "encoder_self" else maps.target_tokens)[1]
    assert len(rows[0][1]) == len(groups[word]) == page.locator("#step button.piece").count() > 1
    view = page.inner_text("[data-testid=step-view]")
    assert "the row of the word" in view and "mean of the rows of its" in view and "first piece" not in view
    page.click("#step button.piece >> nth=1")  # the second piece's own step: its softmax over the pieces
    piece = groups[word][1]
    assert f"(row {piece + 1}) of the word" in page.inner_text("#step-piece h3")  # rows count from 1
    weights = page.eval_on_selector_all("#step-piece #step-table tbody tr",
                                        "rs => rs.map(r => Number(r.dataset.weight))")
    np.testing.assert_allclose(weights, maps.maps[kind][1, 0, piece], atol=1e-5)
    assert page.get_attribute("#step button.piece >> nth=1", "aria-pressed") == "true"
    assert not page.errors


def test_positional_encoding_panel_shows_the_models_table(browser, server, transformer_dir):
    from aiayn.decoding.translator import Translator

    page = translated(open_page(browser, server), server, "?text=forty+five")
    page.click("[data-testid=arch-map] .blk-pe")
    page.wait_for_selector("[data-testid=pe-panel] td[data-value]")
    cells = page.eval_on_selector_all("[data-testid=pe-panel] td[data-value]", "cs => cs.map(c => "
                                      "[Number(c.dataset.pos), Number(c.dataset.dim), Number(c.dataset.value)])")
    table = Translator.from_pretrained(transformer_dir).model.positional.table
    for pos, dim, value in cells:
        assert abs(table[pos, dim].item() - value) < 1e-5
    page.click("[data-testid=arch-map] .blk-ffn")
    assert page.is_visible("[data-testid=ffn-panel]") and not page.is_visible("[data-testid=pe-panel]")
    assert page.locator("[data-testid=arch-map] .blk.current").count() == 1
    assert not page.errors


def test_url_restores_the_view(browser, server):
    page = translated(open_page(browser, server), server, "?text=forty+five+thousand")
    page.select_option("#kind", "decoder_self")
    page.select_option("#layer", "1")
    page.select_option("#head", "4")
    page.click("#heatmap button.q >> nth=1")
    page.wait_for_selector("#step-table")
    url, values = page.url, heat(page)
    assert "&q=2" in url and "(row 2)" in page.inner_text("[data-testid=step-view]")  # 1-based, as layer and head
    other = translated(open_page(browser, server), url)
    other.wait_for_selector("#step-table")
    assert other.input_value("#kind") == "decoder_self" and other.input_value("#head") == "4"
    assert "layer 1, head 4" in other.inner_text("[data-testid=step-view]")
    assert "(row 2)" in other.inner_text("[data-testid=step-view]")
    np.testing.assert_allclose(heat(other), values)


def test_length_limit_and_long_text_are_told(browser, server):
    page = loaded(browser, server)
    page.fill("#text", "nine " * 120)  # 600 characters: refused by the page, never cut silently
    page.click("#translate")
    assert "600 characters" in page.inner_text("#error")
    assert page.get_attribute("#text", "maxlength") is None
    translated(page, server, "?text=forty+five+thousand")
    data_ended = page.evaluate("document.querySelector('#heatmap th.query:last-of-type')?.textContent")
    warning = page.inner_text("[data-testid=input-warning]")
    assert "length limit" in warning or "</s>" in (data_ended or "")


def _english_strings():
    """Every English UI string (the parts between its {fields} and tags, longer than a word or two) that
    differs from its Korean one. The dictionaries are read by node, as the page's modules."""
    import subprocess

    script = ("Promise.all([import('./i18n_en.js'), import('./i18n_ko.js')])"
              ".then(([en, ko]) => console.log(JSON.stringify([en.TEXT_EN, ko.TEXT_KO])))")
    node = shutil.which("node")
    if node is None:
        pytest.skip("node reads the page's dictionaries")
    en, ko = json.loads(subprocess.run([node, "--input-type=module", "-e", script], cwd=STATIC, check=True,
                                       capture_output=True, text=True).stdout)
    diag = {k for k in ko if k.startswith("warn.diag_")}  # a diagnostic signal's English comes from the server
    assert en.keys() == ko.keys() - diag
    fixed = [re.split(r"\{\w+\}|<[^>]+>", en[k]) for k in en if en[k] != ko[k]]
    return {part.strip() for parts in fixed for part in parts if len(part.strip()) > 12}


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_korean_page_has_no_english_ui_string(browser, server, rnn_server, arch):
    url = server if arch == "transformer" else rnn_server
    page = translated(open_page(browser, url, lang="ko"), url, "?text=forty+five+thousand&q=2")
    page.wait_for_selector("#step-table")
    if arch == "transformer":
        page.click("[data-testid=arch-map] .blk-pe")
        page.wait_for_selector("#pe-heat")
        page.click("#search-go")
    text = page.evaluate("document.body.innerText")
    if arch == "transformer":  # Korean word order: "1층", as the step view's caption says it
        assert re.search(r"\d층 · 헤드 \d", page.inner_text("#matrix-caption")), page.inner_text("#matrix-caption")
    page.check("[data-testid=alignment-toggle]")  # its legend, and the word view's step view
    page.check("#words")
    page.click("#heatmap button.q >> nth=0")
    page.wait_for_selector("#step-word-table")
    text += page.evaluate("document.body.innerText")
    found = [s for s in _english_strings() if s in text]
    assert not found, found
    assert "seed 00" not in text.lower() and page.evaluate("document.documentElement.lang") == "ko"
    page.screenshot(path=str(ARTIFACTS / f"web_ko_{arch}.png"), full_page=True)


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_no_sideways_scroll_at_phone_and_tablet_widths(browser, server, rnn_server, arch, lang):
    url = server if arch == "transformer" else rnn_server
    page = translated(open_page(browser, url, lang=lang), url, "?text=three+hundred+forty+five+thousand&q=3")
    page.wait_for_selector("#step-table")
    if arch == "transformer":
        page.click("[data-testid=arch-map] .blk-pe")
        page.wait_for_selector("#pe-heat")
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 800})
        sizes = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert sizes[0] <= sizes[1], f"{arch} {lang}: {sizes[0]} px wide at {width}"
        if arch == "rnn":
            assert not page.is_visible("[data-testid=arch-map]"), "an RNN page shows only what applies"
    page.screenshot(path=str(ARTIFACTS / f"web_{arch}_{lang}_320.png"), full_page=True)
    assert not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_model_panel_gives_each_paper_symbol_a_plain_words_label(browser, server, lang):
    page = loaded(browser, server, lang=lang)
    facts = dict(page.eval_on_selector_all("[data-testid=model-info] [data-fact]", "ds => ds.map(d => "
                                           "[d.querySelector('dt').innerText, d.querySelector('dd').innerText])"))
    info = page.evaluate("fetch('/api/info').then(r => r.json())")
    words = r"[가-힣]{2}" if lang == "ko" else r"[a-z]{4}"
    for symbol in ("d_model", "d_k", "d_ff"):  # one symbol a line, beside words that say what it is
        (label,) = [k for k in facts if symbol in k]
        assert re.search(rf"\({symbol}\)$", label) and re.search(words, label.replace(symbol, "")), label
        assert facts[label] == str(info[symbol])
    assert not page.errors


@pytest.mark.parametrize("width", [360, 1280])
def test_shown_numbers_are_11_px_and_fit_their_cells(browser, server, width):
    page = translated(open_page(browser, server, width=width), server, "?text=forty+five+thousand&kind=encoder_self")
    page.check("#numbers")
    page.wait_for_selector("table.heat.numbers td.cell")
    cells = page.eval_on_selector_all("#heatmap td.cell", "cs => cs.map(c => [c.innerText, "
                                      "parseFloat(getComputedStyle(c).fontSize), c.scrollWidth <= c.clientWidth])")
    assert cells and all(text for text, _, _ in cells)
    assert all(size >= 11 and fits for _, size, fits in cells), cells[:4]  # they were 10 px
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth") and not page.errors


def test_weak_search_note_counts_the_layers_of_the_kind_it_ranked(browser, server):
    page = loaded(browser, server)
    note = page.evaluate("""import('/static/search.js').then(m => {
        const box = document.createElement('div'), info = {parameters: 1, n_encoder_layers: 6, n_heads: 2};
        const ranked = [...Array(6).keys()].map(i => ({layer: i >> 1, head: i % 2, weight: 0.1}));
        m.showRanking(box, ranked, info, () => {});  // three decoder layers of a 6 + 3 model, none strong
        return box.querySelector('[data-testid=search-weak]').innerText;
    })""")
    assert "3 layers of 2 heads" in note, note
    assert not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_model_panel_names_the_pronoun_probe_when_the_model_had_it(browser, server, lang):
    page = loaded(browser, server, lang=lang)
    facts = page.evaluate("""import('/static/modelpanel.js').then(m => fetch('/api/info').then(r => r.json())
        .then(i => [m.facts(i), m.facts({...i, pronoun_probe: 1})].map(f => Object.fromEntries(f))))""")
    assert "f.probe" not in facts[0]
    told = facts[1]["f.probe"]
    assert "1" in told and '"it"' in told and (re.search(r"[가-힣]{4}", told) if lang == "ko" else "pronoun" in told)
    assert not page.errors


def test_head_search_says_how_many_of_its_heads_it_lists_in_the_pages_word_order(browser, server):
    page = translated(open_page(browser, server, lang="ko"), server, "?text=forty+five+thousand")
    page.click("[data-testid=head-search] #search-go")
    first = page.inner_text("[data-testid=head-search] button.rank >> nth=0")
    assert re.match(r"\d층 · 헤드 \d", first), first  # "4층", as the matrix and the step view say it
    # a model of 16 heads: the list shows 12 of them and its caption says so (it said "16 heads ranked")
    caption = page.evaluate("""import('/static/search.js').then(m => {
        const box = document.createElement('div'), info = {parameters: 1, n_encoder_layers: 4, n_heads: 4};
        const ranked = [...Array(16).keys()].map(i => ({layer: i >> 2, head: i % 4, weight: 1 - i / 16}));
        m.showRanking(box, ranked, info, () => {});
        return [box.querySelector('.caption').innerText, box.querySelectorAll('button.rank').length];
    })""")
    assert caption[1] == 12 and "16" in caption[0] and "12" in caption[0], caption
    assert not page.errors


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_model_panel_labels_stay_whole_on_a_phone(browser, server, rnn_server, arch):
    url = server if arch == "transformer" else rnn_server
    page = loaded(browser, url, width=360, lang="ko")
    lines = page.eval_on_selector_all("[data-testid=model-info] dt", "ds => ds.map(d => [d.innerText, "
                                      "d.getBoundingClientRect().height / parseFloat(getComputedStyle(d).lineHeight)])")
    broken = [text for text, n in lines if n > 1.5]  # the RNN's "구조" was squeezed into "구" over "조"
    assert not broken, broken
    has_heads = page.locator("[data-testid=model-info] [data-fact='f.heads']").count() == 1
    assert has_heads == (arch == "transformer")  # an RNN's attention has no heads: the line would say "1"
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth") and not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_input_fields_show_their_whole_placeholder_in_the_pages_font(browser, server, lang):
    page = loaded(browser, server, width=360, lang=lang)
    for width in (360, 390, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        for field in ("#text", "[data-testid=target-input]"):
            fits = page.eval_on_selector(field, """el => {
                const body = getComputedStyle(document.body).fontFamily, own = getComputedStyle(el).fontFamily;
                const shown = el.clientHeight;  // empty: the placeholder is what the field shows
                el.value = el.placeholder;  // the placeholder's text, measured as the field lays it out
                const fits = el.scrollHeight <= shown + 1;
                el.value = '';
                return [own === body, fits, el.placeholder];
            }""")
            assert fits[0] and fits[1], f"{lang} {width} px: {field} {fits}"  # it was monospace, cut at 360 px
    assert not page.errors


@pytest.mark.parametrize("width", [360, 390, 1280])
def test_line_view_labels_stay_readable_on_a_phone(browser, server, width):
    page = translated(open_page(browser, server, width=width, lang="ko"), server, "?text=forty+five+thousand")
    sizes = page.eval_on_selector_all("[data-testid=line-view] svg text", "ts => ts.map(t => "
                                      "t.getScreenCTM().a * parseFloat(getComputedStyle(t).fontSize))")
    assert sizes and min(sizes) >= 11, f"{width} px: labels drawn at {min(sizes):.1f} px"  # 7.9 px at 360 px
    page.click("[data-testid=line-view] text.lq >> nth=1")
    lines = page.eval_on_selector_all("[data-testid=line-view] svg line", "ls => ls.map(l => "
                                      "[l.x1.baseVal.value, l.x2.baseVal.value])")
    box = page.evaluate("(s => [Number(s.dataset.qx), Number(s.dataset.kx)])"
                        "(document.querySelector('[data-testid=line-view] svg'))")
    assert lines and all(box[0] < x1 < x2 < box[1] for x1, x2 in lines)  # between the two columns of tokens
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth") and not page.errors


@pytest.mark.parametrize(("lang", "word"), [("en", "probabilit"), ("ko", "확률")])
def test_post_edit_hint_points_at_the_tokens_that_answer_a_click(browser, server, lang, word):
    page = translated(open_page(browser, server, width=390, lang=lang), server, "?text=forty+five+thousand")
    hint, row = page.inner_text("#postedit-hint"), page.inner_text("[data-testid=token-probs] .note")
    # the clickable tokens are the probability row's, not the bold translation above it ("a token of the
    # translation" sent a reader to text that does nothing)
    assert word in hint and word in row, (hint, row)
    assert page.eval_on_selector("#translation", "el => el.onclick === null && !el.querySelector('[role=button]')")
    page.click("[data-testid=token-probs] .tp >> nth=1")
    page.wait_for_selector("[data-testid=alternatives] button.alt")
    assert not page.errors


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_row_labels_and_step_table_text_is_at_least_11_px(browser, server, rnn_server, arch):
    url = server if arch == "transformer" else rnn_server
    page = translated(open_page(browser, url, width=360, lang="ko"), url, "?text=forty+five+thousand&q=2")
    page.wait_for_selector("#step-table")
    sizes = page.eval_on_selector_all("#heatmap th.query *, #step-table *", "es => es.filter(e => "
                                      "[...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))"
                                      ".map(e => [e.textContent.trim(), parseFloat(getComputedStyle(e).fontSize)])")
    small = [(text, size) for text, size in sizes if size < 11]  # "→ man" and "√dₖ"'s k were 10 px
    assert sizes and not small, small[:5]
    assert not page.errors
