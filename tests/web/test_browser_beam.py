"""The beam search drawn on the page (beamtrace.js), in a real browser (Chromium through Playwright, as
tests/web/test_browser.py): the panel opened after a translation shows the server's trace step by step, every
step's candidates with their status, text and log-prob as the API answers them, and the finished hypotheses
ranked so that the first is the translation; why the search ended, in the words of its rule; the last step's
live candidates told that the search ended there; on a phone every number in sight without scrolling sideways;
in both languages, on a wide screen and a phone."""

import re

import pytest

from tests.web import test_browser as shared
from tests.web.test_browser import ARTIFACTS

pytestmark = pytest.mark.slow
browser, server = shared.browser, shared.server  # the shared fixtures
SENTENCE = "forty five thousand"
ENDED = {"en": "✗ search ended", "ko": "✗ 탐색 종료"}  # a live candidate on the step where the search ends
ENDS_HERE = {"en": "the search ends here", "ko": "탐색이 여기서 끝납니다"}
SCORE = {"en": "— score ", "ko": "— 점수 "}


def why_ended(trace, lang):
    """The rule that ended the search (aiayn.decoding.beam), as the panel must word it."""
    done, k = trace["steps"][-1]["done"], trace["beam"]
    n = sum(c["status"] == "finished" for s in trace["steps"] for c in s["candidates"])
    if done == "length_limit":
        return {"en": "it reached the length limit", "ko": "길이 제한에 닿았습니다"}[lang]
    if trace["early_stopping"]:
        return {"en": f"K = {k} hypothes{'i' if k == 1 else 'e'}s had finished",
                "ko": f"완성된 가설이 K = {k}개 모여 바로 멈췄습니다"}[lang]
    return {"en": f"{n} hypothes{'i' if n == 1 else 'e'}s had finished (at least K = {k})",
            "ko": f"완성된 가설이 {n}개(K = {k}개 이상) 모였고"}[lang]


def open_translated(browser, url, width, lang):
    page = browser.new_page(viewport={"width": width, "height": 800})
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(error))
    page.goto(f"{url}?text={SENTENCE.replace(' ', '+')}&lang={lang}")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    return page


def api_trace(page, text=SENTENCE):
    """The server's answer to the request the panel makes (the page's beam: the model's own)."""
    return page.evaluate("""async text => {
        const beam = Number(document.getElementById('beam').value);
        const r = await fetch('/api/translate', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                                 body: JSON.stringify({text, beam, attention: false, trace: true})});
        return r.json(); }""", text)


def shown_rows(page):
    return page.eval_on_selector_all("table.beam-table tbody tr", "rs => rs.map(r => [r.dataset.status, "
                                     "r.dataset.text, Number(r.dataset.logProb)])")


def go_to_step(page, step):
    page.eval_on_selector("#beam-range", f"e => {{ e.value = '{step}'; e.dispatchEvent(new Event('input')); }}")
    page.wait_for_selector(f"table.beam-table[data-step='{step}']")


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("width", [1280, 390])
def test_beam_panel_shows_the_servers_trace_step_by_step(browser, server, width, lang):
    page = open_translated(browser, server, width, lang)
    matrix_top = page.evaluate("document.querySelector('[data-testid=matrix]').getBoundingClientRect().top")
    assert page.evaluate("document.querySelector('[data-testid=beam-trace]').getBoundingClientRect().top") > matrix_top
    assert not page.is_visible("#beam-range")  # closed: nothing asked until it is opened
    page.click("[data-testid=beam-trace] > summary")
    page.wait_for_selector("#beam-range")
    answer = api_trace(page)
    steps = answer["trace"]["steps"]
    assert int(page.get_attribute("#beam-range", "max")) + 1 == len(steps)
    explained = page.inner_text("[data-testid=beam-trace] p.explain")
    assert why_ended(answer["trace"], lang) in explained, explained
    assert f"2K = {2 * answer['trace']['beam']}" in explained, explained
    for step in sorted({0, len(steps) // 2, len(steps) - 1}):
        go_to_step(page, step)
        expected = [[c["status"], c["text"], c["log_prob"]] for c in steps[step]["candidates"]]
        rows = shown_rows(page)
        assert [r[:2] for r in rows] == [e[:2] for e in expected]
        assert all(abs(r[2] - e[2]) < 1e-9 for r, e in zip(rows, expected))
        # the step where the search ends: nothing goes on, its live candidates are told so
        last = steps[step]["done"] is not None
        told = page.eval_on_selector_all("table.beam-table tbody td.status", "ts => ts.map(t => t.innerText)")
        assert [t == ENDED[lang] for t in told] == [last and e[0] == "pruned" for e in expected], told
        assert (ENDS_HERE[lang] in page.inner_text("table.beam-table caption")) == last
        if width < 600:  # stacked rows: each number inside the screen, none behind a sideways scroll
            assert page.eval_on_selector_all("table.beam-table td.sc, table.beam-table td.lp", """cs => cs.every(c => {
                const r = c.getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth; })""")
            assert page.eval_on_selector("[data-testid=beam-trace] .table-box",
                                         "b => b.scrollWidth <= b.clientWidth")
    best = page.get_attribute("[data-testid=beam-best]", "data-text")
    assert best == answer["translation"] == page.inner_text("[data-testid=translation]")
    finished = sum(c["status"] in ("finished", "finished_at_limit") for s in steps for c in s["candidates"])
    assert page.locator("ol.beam-finished li").count() == finished
    assert all(SCORE[lang] in item for item in page.locator("ol.beam-finished li").all_inner_texts())
    status = page.inner_text("table.beam-table tbody tr >> nth=0 >> td.status")
    assert bool(re.search(r"[가-힣]", status)) == (lang == "ko"), status
    assert page.evaluate("document.documentElement.scrollWidth <= innerWidth")
    page.screenshot(path=str(ARTIFACTS / f"web_beam_{lang}_{width}.png"), full_page=True)
    assert not page.errors


def test_beam_panel_follows_the_next_sentence_and_the_jump_link_opens_it(browser, server):
    page = open_translated(browser, server, 1280, "en")
    page.click(".jumps a[href='#beam-panel']")
    page.wait_for_selector("[data-testid=beam-best]")
    page.fill("#text", "seven hundred")
    page.click("#translate")
    page.wait_for_function("document.querySelector('[data-testid=beam-best]')?.dataset.text === "
                           "document.querySelector('[data-testid=translation]').textContent")
    answer = api_trace(page, "seven hundred")
    assert int(page.get_attribute("#beam-range", "max")) + 1 == len(answer["trace"]["steps"])
    assert page.get_attribute("[data-testid=beam-best]", "data-text") == answer["translation"]
    assert page.inner_text("[data-testid=beam-best] strong") == "← the translation"
    # the other ways a search ends "finished": one hypothesis, early stopping, an ordinal past 2nd
    why = page.evaluate("""import('/static/beamtrace.js').then(m => {
        const trace = (beam, early, n) => ({beam, early_stopping: early, steps: [{candidates:
            Array.from({length: n}, (_, i) => ({status: "finished", unmet: 0, score: -i}))}],
            ranked: Array.from({length: n}, (_, i) => [0, i])});
        return [m.whyEnded(trace(1, false, 1), "finished"), m.whyEnded(trace(4, true, 5), "finished"),
                m.whyEnded(trace(3, false, 5), "finished")]; })""")
    assert why == ["1 hypothesis had finished (at least K = 1) and no unfinished one could still beat it",
                   "K = 4 hypotheses had finished",
                   "5 hypotheses had finished (at least K = 3) and no unfinished one could still beat the 3rd best"]
    page.fill("[data-testid=target-input]", "sieben hundert")  # a target given: the first is the model's own
    page.click("#translate")
    page.wait_for_selector("[data-testid=beam-trace] p.note")
    page.wait_for_function("said => document.querySelector('[data-testid=beam-best] strong')?.textContent === said",
                           arg="← the model's translation")
    assert not page.errors
