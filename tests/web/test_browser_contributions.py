"""The measure switch in a real browser (Chromium through Playwright, as tests/web/test_browser.py): "weights |
contributions" turns the matrix, the thumbnails, the line view and the head search to the server's
contribution maps and back, in both languages, on a desktop and a phone; the address keeps it; the step view
shows ||f(x_j)|| beside each weight, as the server computes it."""

import json
import urllib.request

import numpy as np
import pytest

from tests.web import test_browser as shared
from tests.web.test_browser_explorer import heat, open_page, translated

pytestmark = pytest.mark.slow
browser, rnn_server, server = shared.browser, shared.rnn_server, shared.server  # the shared fixtures
QUERY = "?text=forty+five+thousand&kind=cross&layer=2&head=3"
TOGGLE = "[data-testid=measure-toggle]"


def post(url, path, body):
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.loads(answer.read())


def thumbs(page):
    return page.eval_on_selector_all("[data-testid=head-thumb] canvas", "cs => cs.map(c => c.toDataURL())")


def lines(page):
    page.hover("#heatmap th.query >> nth=1")
    return page.eval_on_selector_all("[data-testid=line-view] svg g.lines line",
                                     "ls => ls.map(l => [l.getAttribute('stroke-width'), "
                                     "l.getAttribute('stroke-opacity')])")


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("lang", ["en", "ko"])
def test_measure_switch_shows_the_servers_contributions_and_back(browser, server, lang, width):
    page = translated(open_page(browser, server, width=width, lang=lang), server, QUERY)
    weights = post(server, "/api/translate", {"text": "forty five thousand"})
    served = post(server, "/api/translate", {"text": "forty five thousand", "measure": "contributions"})
    expected = np.array(served["maps"]["cross"][1][2]).ravel()  # layer 2, head 3 (1-based in the address)
    before, before_thumbs, before_lines = heat(page), thumbs(page), lines(page)
    np.testing.assert_allclose(before, np.array(weights["maps"]["cross"][1][2]).ravel(), atol=1e-4)
    assert page.get_attribute(TOGGLE, "aria-checked") == "false"
    page.click(TOGGLE)
    page.wait_for_selector("[data-testid=measure-note]:not([hidden])")
    assert page.get_attribute(TOGGLE, "aria-checked") == "true" and "measure=contributions" in page.url
    np.testing.assert_allclose(heat(page), expected, atol=1e-4)
    assert np.abs(heat(page) - before).max() > 0.01, "the matrix must change"
    assert thumbs(page) != before_thumbs and lines(page) != before_lines
    word = {"en": "contributions", "ko": "기여도"}[lang]
    assert word in page.inner_text("#matrix-caption") and word in page.inner_text(TOGGLE)
    page.select_option("#search-query", "1")
    page.select_option("#search-key", "0")
    page.click("#search-go")
    ranked = page.eval_on_selector_all("button.rank", "bs => bs.map(b => [Number(b.dataset.layer), "
                                       "Number(b.dataset.head), Number(b.dataset.weight)])")
    for layer, head, value in ranked:  # ranked by the contribution maps' own cell (row 1, column 0)
        assert abs(value - served["maps"]["cross"][layer][head][1][0]) < 1e-4
    assert {"en": "contribution", "ko": "기여도"}[lang] in page.inner_text("#search-result")
    sizes = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert sizes[0] <= sizes[1], f"{width} px: {sizes[0]} px wide with the switch"
    shared.shot(page, f"web_contributions_{lang}_{width}")
    page.select_option("#layer", "2")
    page.select_option("#head", "3")
    page.goto(page.url)  # the address restores the measure
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    assert page.get_attribute(TOGGLE, "aria-checked") == "true"
    np.testing.assert_allclose(heat(page), expected, atol=1e-4)
    page.click(TOGGLE)
    page.wait_for_function("!document.location.search.includes('measure=')")
    np.testing.assert_allclose(heat(page), before, atol=1e-4)
    assert page.get_attribute(TOGGLE, "aria-checked") == "false" and page.is_hidden("[data-testid=measure-note]")
    assert not page.errors


def test_step_view_shows_each_keys_value_norm_beside_its_weight(browser, server):
    page = translated(open_page(browser, server), server, QUERY + "&q=2&measure=contributions")
    page.wait_for_selector("#step-table [data-testid=step-norm]")
    data = post(server, "/api/translate", {"text": "forty five thousand", "measure": "contributions"})
    step = post(server, "/api/step", {"source_ids": data["source_ids"], "target_input_ids": data["target_input_ids"],
                                      "kind": "cross", "layer": 1, "head": 2, "query": 1})
    rows = page.eval_on_selector_all("#step-table tbody tr", "rs => rs.map(r => [Number(r.dataset.norm), "
                                     "Number(r.dataset.contribution), r.querySelector('td.norm').textContent])")
    np.testing.assert_allclose([r[0] for r in rows], step["value_norms"], atol=1e-6)
    assert [r[2] for r in rows] == [f"{n:.3f}" for n in step["value_norms"]]
    # the key's contribution in the step view is the matrix's cell with the measure on contributions
    np.testing.assert_allclose([r[1] for r in rows], data["maps"]["cross"][1][2][1], atol=6e-4)
    assert "‖f(x" in page.inner_text("#step-table thead") and not page.errors


def test_an_rnn_page_has_no_switch_and_shows_its_weights(browser, rnn_server):
    page = translated(open_page(browser, rnn_server), rnn_server, "?text=forty+five+thousand&measure=contributions")
    weights = post(rnn_server, "/api/translate", {"text": "forty five thousand"})
    assert page.is_hidden(TOGGLE) and page.is_hidden("[data-testid=measure-note]")
    np.testing.assert_allclose(heat(page), np.array(weights["maps"]["cross"][0][0]).ravel(), atol=1e-4)
    assert "measure=" not in page.url and not page.errors
