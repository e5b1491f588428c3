""""Without this head" on the page (ablation.js), in a real browser (Chromium through Playwright, as
tests/web/test_browser.py): the button beside the head selector translates the sentence again without the head
in view and shows the server's two translations, the changed words marked, and the score's change; the
comparison goes when another head is chosen; on a phone every number of it in sight without scrolling sideways.
Both languages."""

import re

import pytest

from tests.web import test_browser as shared
from tests.web.test_browser import ARTIFACTS

pytestmark = pytest.mark.slow
browser, server = shared.browser, shared.server  # the shared fixtures
SENTENCE = "forty five thousand"


def without(page, head):
    """The server's answer for the sentence without `head` ({kind, layer, head} from 0), at the page's beam."""
    return page.evaluate("""async ([text, head]) => {
        const beam = Number(document.getElementById('beam').value);
        const r = await fetch('/api/translate', {method: 'POST', headers: {'Content-Type': 'application/json'},
            body: JSON.stringify({text, beam, attention: false, without_heads: [head]})});
        return r.json(); }""", [SENTENCE, head])


def words(page, testid, marked):
    """The words of one shown translation: all of them, or those outside (marked=False) / inside the marks."""
    return page.eval_on_selector(f"[data-testid={testid}]", """(td, marked) => {
        if (marked === null) return td.textContent.split(/\\s+/).filter(Boolean);
        const out = [];
        td.childNodes.forEach(n => {
            const inMark = n.nodeType === 1;
            if (inMark === marked) out.push(...n.textContent.split(/\\s+/).filter(Boolean)); });
        return out; }""", marked)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_without_this_head_shows_the_servers_two_translations_and_what_changed(browser, server, lang):
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(f"{server}?text={SENTENCE.replace(' ', '+')}&lang={lang}&kind=cross&layer=1&head=1")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    heads = [{"kind": kind, "layer": layer, "head": head} for kind in ("cross", "encoder_self", "decoder_self")
             for layer in range(2) for head in range(4)]
    answers = [(h, without(page, h)) for h in heads]
    # a head whose removal changes the words, when this untrained model has one: the marks are then tested too
    head, answer = next(((h, a) for h, a in answers if a["translation"] != a["with_every_head"]["translation"]),
                        answers[0])
    page.select_option("#kind", head["kind"])
    page.select_option("#layer", str(head["layer"] + 1))
    page.select_option("#head", str(head["head"] + 1))
    page.click("[data-testid=without-head]")
    page.wait_for_selector("[data-testid=ablation-after]")
    before, after = answer["with_every_head"]["translation"], answer["translation"]
    assert words(page, "ablation-after", None) == after.split()
    shown = page.inner_text("[data-testid=translation]")
    assert words(page, "ablation-before", None) == before.split() == shown.split()
    # the unmarked words are the two translations' common words, in order; the rest is marked
    assert words(page, "ablation-before", False) == words(page, "ablation-after", False)
    assert bool(words(page, "ablation-after", True) or words(page, "ablation-before", True)) == (before != after)
    told = page.inner_text("[data-testid=ablation]")
    delta = answer["score"] - answer["with_every_head"]["score"]
    assert f"{abs(delta):.3f}" in told and ("−" if delta < 0 else "+") in told
    assert bool(re.search(r"[가-힣]", page.inner_text("[data-testid=ablation] th"))) == (lang == "ko")
    assert bool(re.search(r"[가-힣]", page.inner_text("[data-testid=without-head]"))) == (lang == "ko")
    page.screenshot(path=str(ARTIFACTS / f"web_without_head_{lang}.png"))
    page.select_option("#head", "mean")  # no one head: no button, and the comparison of the last one goes
    assert page.is_hidden("[data-testid=ablation]") and page.is_hidden("[data-testid=without-head]")
    assert not errors


@pytest.mark.parametrize(("width", "lang"), [(390, "en"), (360, "ko")])
def test_the_head_search_offers_its_pick_without_it(browser, server, width, lang):
    page = browser.new_page(viewport={"width": width, "height": 844})
    page.goto(f"{server}?text={SENTENCE.replace(' ', '+')}&lang={lang}&kind=encoder_self")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    page.select_option("#search-query", "1")
    page.select_option("#search-key", "0")
    page.click("#search-go")
    first = page.eval_on_selector("button.rank", "b => [Number(b.dataset.layer), Number(b.dataset.head)]")
    button = page.inner_text("[data-testid=search-without-head]")
    named = {"en": f"layer {first[0] + 1} · head {first[1] + 1}", "ko": f"{first[0] + 1}층 · 헤드 {first[1] + 1}"}
    assert named[lang] in button, button
    assert button.startswith("Translate again without ") if lang == "en" else button.endswith(" 빼고 다시 번역")
    page.click("[data-testid=search-without-head]")
    page.wait_for_selector("[data-testid=ablation-after]")
    answer = without(page, {"kind": "encoder_self", "layer": first[0], "head": first[1]})
    assert words(page, "ablation-after", None) == answer["translation"].split()
    assert page.evaluate("document.querySelector('[data-testid=ablation]').getBoundingClientRect().top < innerHeight")
    # the rows stacked: the score and log P, Δ and all, inside the screen and not cut by their box
    cells = page.eval_on_selector_all("[data-testid=ablation] td.abl-score, [data-testid=ablation] td.abl-lp",
                                      """cs => cs.map(c => { const r = c.getBoundingClientRect();
                                          return [r.left, r.right, c.scrollWidth <= c.clientWidth, r.top]; })""")
    assert len(cells) == 4 and all(left >= 0 and right <= width and whole for left, right, whole, _ in cells), cells
    assert cells[0][3] == cells[1][3] and cells[2][3] == cells[3][3], cells  # score and log P on one line
    assert page.eval_on_selector("[data-testid=ablation] .table-box", "b => b.scrollWidth <= b.clientWidth")

