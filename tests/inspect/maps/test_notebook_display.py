"""Jupyter displays (aiayn.inspect.maps.notebook): a Translation and captured attention maps as self-contained
HTML whose heatmap cells hold the maps' numbers, and two displays in one page with ids of their own."""

import re

import numpy as np
import pytest

from aiayn.decoding.translator import Translator
from aiayn.inspect.maps.capture import capture
from aiayn.inspect.maps.notebook import view

REMOTE = re.compile(r"""\b(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.I)
CELL = re.compile(r'<td title="[^"]*: ([0-9.]+)"')


@pytest.fixture(scope="module")
def translator(transformer_dir):
    return Translator.from_pretrained(transformer_dir)


def cells(text: str) -> np.ndarray:
    return np.array([float(v) for v in CELL.findall(text)])


def test_maps_display_holds_every_heatmap_cell_of_the_last_layer(translator):
    maps = capture(translator, "forty five")
    shown = maps._repr_html_()
    assert not REMOTE.search(shown) and "<svg" in shown and "<table" in shown
    cross = maps.maps["cross"][-1]  # (H, T, S): one heatmap per head, rows then columns
    np.testing.assert_allclose(cells(shown), cross.reshape(-1), atol=5e-4)


def test_any_kind_layer_and_head(translator):
    maps = capture(translator, "forty five", target="fünf und vierzig")
    shown = view(maps, kind="decoder_self", layer=0, head=1)._repr_html_()
    matrix = maps.maps["decoder_self"][0, 1]
    unmasked = np.tril(np.ones(matrix.shape, dtype=bool))
    np.testing.assert_allclose(cells(shown), matrix[unmasked], atol=5e-4)
    assert shown.count('class="m"') == (~unmasked).sum()
    with pytest.raises(Exception, match="head"):
        view(maps, head=99)


def test_translation_display_is_the_text_score_and_averaged_cross_attention(translator):
    result = translator.translate(["forty five"], return_attention=True)[0]
    shown = result._repr_html_()
    assert result.text in shown and f"{result.score:.3f}" in shown and not REMOTE.search(shown)
    np.testing.assert_allclose(cells(shown), result.attention["cross"][-1].mean(0).reshape(-1), atol=5e-4)
    plain = translator.translate(["forty five"])[0]._repr_html_()
    assert "<table" not in plain and "score" in plain


def test_two_displays_in_one_page_do_not_clash(translator):
    maps = capture(translator, "forty five")
    result = translator.translate(["three"], return_attention=True)[0]
    page = maps._repr_html_() + maps._repr_html_() + result._repr_html_()
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == 3 and len(set(ids)) == 3
    for scope in ids:  # every style rule and script of a display names its own element
        assert f'getElementById("{scope}")' in page or f"#{scope} " in page
    rules = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert all(rule.strip().startswith("#aiayn-") for style in rules for rule in style.split("}") if rule.strip())
