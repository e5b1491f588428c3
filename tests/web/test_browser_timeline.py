"""The timeline slider in a real browser (Chromium through Playwright, as tests/web/test_browser.py): a model
directory of a run with train.attention_timeline shows its stored maps, cell for cell, at every step."""

import numpy as np
import pytest

from tests.training.test_timeline import train
from tests.web import test_browser as shared
from tests.web.test_browser import ARTIFACTS, serve

pytestmark = pytest.mark.slow
browser = shared.browser  # the shared fixtures


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("timeline-run") / "run"
    assert train(out) == 0
    return out


@pytest.fixture(scope="module")
def server(run):
    yield from serve(run / "checkpoints" / "step_00000012")  # inside the run: its timeline/ is found


def test_the_slider_shows_the_stored_maps(browser, server, run):
    page = browser.new_page(viewport={"width": 390, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server)
    slider = page.wait_for_selector("[data-testid=timeline]")
    assert slider.is_visible() and slider.get_attribute("max") == "5"  # steps 2, 4, ..., 12
    for position, step in [(0, 2), (3, 8), (5, 12)]:
        page.eval_on_selector("[data-testid=timeline]",
                              "(s, v) => { s.value = v; s.dispatchEvent(new Event('input')); }", str(position))
        for sentence, kind, layer, head in [(0, "cross", 1, 1), (1, "encoder_self", 0, 0)]:
            page.select_option("#tl-sentence", str(sentence))
            page.select_option("#tl-kind", kind)
            page.select_option("#tl-layer", str(layer + 1))  # 1-based, as the page shows them
            page.select_option("#tl-head", str(head + 1))
            want = f"[data-step='{step}'][data-sentence='{sentence}'][data-kind='{kind}'][data-layer='{layer}']" \
                   f"[data-head='{head}'] td.cell"
            page.wait_for_selector(f"#tl-map{want}", state="attached")
            cells = page.eval_on_selector_all("#tl-map td.cell", "cs => cs.map(c => Number(c.dataset.value))")
            with np.load(run / "timeline" / f"step_{step:08d}.npz") as snap:
                stored = snap[f"{kind}_{sentence}"][layer, head]
            np.testing.assert_array_equal(np.float32(cells), stored.ravel())
    assert "12" in page.inner_text("#tl-step")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(ARTIFACTS / "web_timeline.png"), full_page=True)
    assert not errors
    page.close()
