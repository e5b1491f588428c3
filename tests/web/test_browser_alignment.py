"""The word-alignment overlay and the word view's step view in a real browser (Chromium through Playwright, as
tests/web/test_browser.py): the cells outlined on the cross-attention heatmap are the links `aiayn translate
--alignment` writes for the same model, sentence and beam, in the word view and the piece view, from the
server's default head and from `aiayn serve --alignment-head`; and neither adds sideways scroll."""

import json
import urllib.request

import pytest

from tests.cli_helpers import run_cli
from tests.web import test_browser as shared
from tests.web.test_browser import ARTIFACTS
from tests.web.test_browser_explorer import open_page, translated

pytestmark = pytest.mark.slow
browser, server = shared.browser, shared.server  # the shared fixtures
SENTENCE, BEAM = "seventeen x nineteen", 2  # words of 4 and 2 pieces; the untrained model's output has several words
WORDS_TEXT, WORDS_TARGET = "seventeen thousand eight hundred", "siebzehntausend achthundert"
TOGGLE = "[data-testid=alignment-toggle]"


@pytest.fixture(scope="module")
def head_server(transformer_dir):
    yield from shared.serve(transformer_dir, alignment="1:2")


def cli_alignment(model_dir, tmp_path, capsys, *head) -> tuple[str, set[str]]:
    """(translation, links) that `aiayn translate --alignment` writes for SENTENCE."""
    src, out = tmp_path / "src.txt", tmp_path / "out.txt"
    src.write_text(SENTENCE + "\n", encoding="utf-8")
    code, printed = run_cli(["translate", "--model", model_dir, "--input", src, "--output", out, "--alignment",
                             "--beam", BEAM, *head], capsys)
    assert code == 0, printed
    text, links = out.read_text(encoding="utf-8").rstrip("\n").split(" ||| ")
    return text, set(links.split())


def word_groups(url) -> tuple[list, list]:
    """The answer's piece indices of each source and output word (the page merges words with them)."""
    body = json.dumps({"text": SENTENCE, "beam": BEAM}).encode()
    request = urllib.request.Request(f"{url}/api/translate", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        words = json.load(answer)["words"]
    return words["source"][1], words["target"][1]


def outlined(page) -> list[tuple[str, int, int]]:
    """(link, row, column) of every outlined cell."""
    return [tuple(c) for c in page.eval_on_selector_all("#heatmap td[data-aligned]", "cs => cs.map(c => "
                                                        "[c.dataset.aligned, Number(c.closest('tr').dataset.q), "
                                                        "c.cellIndex - 1])")]


def check_overlay(page, url, links):
    """The outlined cells are the links: in the piece view every piece of the two words, in the word view one
    cell each."""
    src_groups, tgt_groups = word_groups(url)
    cells = outlined(page)
    assert {link for link, _, _ in cells} == links
    expected = set()
    for link in links:
        i, j = map(int, link.split("-"))
        expected |= {(link, q, k) for q in tgt_groups[j] for k in src_groups[i]}
    assert set(cells) == expected and len(cells) == len(expected)
    page.check("#words")
    assert set(outlined(page)) == {(link, int(link.split("-")[1]), int(link.split("-")[0])) for link in links}
    page.uncheck("#words")


def test_overlay_is_the_cli_alignment_of_the_default_head(browser, server, transformer_dir, tmp_path, capsys):
    text, links = cli_alignment(transformer_dir, tmp_path, capsys)
    assert len(links) >= 2, "a sentence whose output has several words"
    page = translated(open_page(browser, server), server, f"?text={SENTENCE.replace(' ', '+')}&beam={BEAM}")
    assert page.inner_text("[data-testid=translation]") == text
    assert page.is_visible(TOGGLE) and not page.is_checked(TOGGLE) and not outlined(page)
    assert not page.is_visible("[data-testid=alignment-legend]")
    page.check(TOGGLE)
    legend = page.inner_text("[data-testid=alignment-legend]")
    assert "decoder layer 2, mean over its heads" in legend and "aiayn translate --alignment" in legend
    assert "piece view" in legend
    check_overlay(page, server, links)
    assert "align=1" in page.url
    page.select_option("#kind", "encoder_self")  # the alignment belongs to the cross-attention only
    assert not page.is_visible(TOGGLE) and not outlined(page)
    assert not page.is_visible("[data-testid=alignment-legend]")
    page.select_option("#kind", "cross")
    assert page.is_checked(TOGGLE) and outlined(page)
    page.screenshot(path=str(ARTIFACTS / "web_alignment.png"), full_page=True)
    assert not page.errors


def test_overlay_follows_serve_alignment_head(browser, head_server, transformer_dir, tmp_path, capsys):
    _, links = cli_alignment(transformer_dir, tmp_path, capsys, "--alignment-head", "1:2")
    page = translated(open_page(browser, head_server), head_server,
                      f"?text={SENTENCE.replace(' ', '+')}&beam={BEAM}&align=1")
    assert page.is_checked(TOGGLE)  # restored from the address
    legend = page.inner_text("[data-testid=alignment-legend]")
    assert "decoder layer 1, head 2," in legend and "Chosen with --alignment-head 1:2." in legend
    check_overlay(page, head_server, links)
    assert not page.errors


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_overlay_and_word_step_view_fit_phones_and_desktops(browser, server, lang):
    page = translated(open_page(browser, server, lang=lang), server,
                      f"?text={WORDS_TEXT.replace(' ', '+')}&target={WORDS_TARGET.replace(' ', '+')}"
                      "&kind=cross&layer=2&head=1&words=1&align=1&q=1")
    page.wait_for_selector("#step-word-table")
    assert page.locator("#step button.piece").count() == 8  # siebzehntausend: eight pieces
    for width in (320, 360, 390, 768, 1024, 1280):
        page.set_viewport_size({"width": width, "height": 800})
        sizes = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert sizes[0] <= sizes[1], f"{lang}: {sizes[0]} px wide at {width}"
        commands = page.eval_on_selector_all("#align-legend code", "cs => cs.map(c => [c.innerText, "
                                             "c.getClientRects().length])")
        assert commands and all(lines == 1 for _, lines in commands), f"{width}: {commands}"  # a command unbroken
        if width in (360, 1280):
            page.screenshot(path=str(ARTIFACTS / f"web_word_step_{lang}_{width}.png"), full_page=True)
    assert not page.errors
