"""The learning pages' pictures: every page of docs/learn shows at least one, each Korean page its own (taken
from the Korean page of the explorer), and docs/screenshots.py's `learn` makes every one it names."""

import importlib.util
import re

from tests.paths import REPO

LEARN = REPO / "docs" / "learn"
IMG = REPO / "docs" / "img"
PICTURE = re.compile(r"!\[[^\]]+\]\(\.\./img/([^)\s]+\.png)\)")


def pictures(page) -> list[str]:
    return PICTURE.findall(page.read_text(encoding="utf-8"))


def lessons():
    return sorted(p for p in LEARN.glob("[0-9]*.md") if not p.name.endswith(".ko.md"))


def test_every_learning_page_shows_a_picture_and_its_korean_page_its_own():
    assert len(lessons()) >= 12
    for page in lessons():
        korean = page.with_name(page.stem + ".ko.md")
        english, ours = pictures(page), pictures(korean)
        assert english, f"{page.name}: no picture"
        assert ours, f"{korean.name}: no picture"
        assert not set(english) & set(ours), f"{korean.name}: the English page's pictures, not the Korean UI's"
        assert all((IMG / name).is_file() for name in english + ours), page.name


def test_the_script_makes_every_learning_picture_it_names():
    spec = importlib.util.spec_from_file_location("screenshots", REPO / "docs" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shown = {name for page in LEARN.glob("*.md") for name in pictures(page)}
    for name, *_ in module.LEARN:
        for picture in (f"learn_{name}.png", f"learn_{name}_ko.png"):
            assert picture in shown and (IMG / picture).is_file(), picture
