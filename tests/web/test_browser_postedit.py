"""Post-editing in a real browser (Chromium through Playwright, as tests/web/test_browser.py): a token's alternatives
are the server's numbers; a pick re-decodes the rest, and the page then shows what `aiayn translate
--target-prefix` writes, with the library's maps; at phone width by tapping, in Korean."""

import numpy as np
import pytest

from aiayn.inspect.maps.capture import maps_of
from tests.web import test_browser as shared
from tests.web.test_browser import ARTIFACTS

pytestmark = pytest.mark.slow
browser, server = shared.browser, shared.server  # the shared fixtures
SENTENCE = "forty five thousand six hundred"


def cli_translation(model_dir, prefix, tmp_path) -> str:
    from aiayn.cli import main

    (tmp_path / "in.txt").write_text(SENTENCE + "\n")
    (tmp_path / "prefix.txt").write_text(prefix + "\n")
    assert main(["translate", "--model", str(model_dir), "--input", str(tmp_path / "in.txt"),
                 "--target-prefix", str(tmp_path / "prefix.txt"), "--output", str(tmp_path / "out.txt")]) == 0
    return (tmp_path / "out.txt").read_text().rstrip("\n")


def pick(page, tap: bool):
    """Opens each token's alternatives until one can be picked; picks it. -> its text prefix."""
    act = page.tap if tap else page.click
    for t in range(page.locator("#token-probs .tp[data-t]").count()):
        act(f"#token-probs .tp[data-t='{t}']")
        page.wait_for_selector("[data-testid=alternatives] button.alt")
        probs = page.eval_on_selector_all("button.alt", "bs => bs.map(b => Number(b.dataset.prob))")
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
        choices = page.locator("button.alt:not([disabled]):not(.current)")
        if choices.count():
            prefix = choices.first.get_attribute("data-prefix")
            with page.expect_response(lambda r: r.url.endswith("/api/translate")):
                (choices.first.tap if tap else choices.first.click)()
            page.wait_for_selector("[data-testid=prefix-note]:not([hidden])")
            page.wait_for_selector("#heatmap td.cell")
            return prefix
    raise AssertionError("no token had a pickable alternative")


@pytest.mark.parametrize("width, tap, lang", [(1440, False, "en"), (360, True, "ko")])
def test_a_pick_shows_the_cli_translation_with_that_prefix(browser, server, transformer_dir, tmp_path, width, tap,
                                                           lang):
    from aiayn.decoding.translator import Translator

    page = browser.new_page(viewport={"width": width, "height": 900}, has_touch=tap)
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server)
    page.evaluate(f"localStorage.setItem('aiayn-lang', '{lang}')")
    page.goto(server)
    page.wait_for_selector("[data-testid=model-info] dd")
    page.fill("#text", SENTENCE)
    page.click("#translate")
    page.wait_for_selector("#heatmap td.cell", timeout=30000)
    prefix = pick(page, tap)
    shown = page.text_content("[data-testid=translation]")
    assert shown == cli_translation(transformer_dir, prefix, tmp_path)
    assert page.text_content("#prefix-text") == prefix
    translator = Translator.from_pretrained(transformer_dir)
    expected = maps_of(translator.translate([SENTENCE], target_prefix=[prefix], return_attention=True)[0], translator)
    assert expected.translation == shown
    page.select_option("#kind", "cross")
    page.select_option("#layer", "2")
    page.select_option("#head", "1")
    cells = page.eval_on_selector_all("#heatmap td.cell", "cs => cs.map(c => Number(c.dataset.value))")
    np.testing.assert_allclose(cells, expected.maps["cross"][1, 0].ravel(), atol=6e-4)
    if width < 600:
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        assert "번역의 시작" in page.inner_text("[data-testid=prefix-note]")
    page.screenshot(path=str(ARTIFACTS / f"web_postedit_{width}.png"), full_page=True)
    page.reload()  # the address keeps the prefix: a reload shows the same post-edited translation
    page.wait_for_selector("[data-testid=prefix-note]:not([hidden])", timeout=30000)
    assert page.text_content("[data-testid=translation]") == shown and page.text_content("#prefix-text") == prefix
    assert not errors
    page.close()
