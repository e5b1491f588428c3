"""docs/design.md stays true: every file its recipes name exists (a new file's folder, for the ones written
with a <placeholder>; a match, for a glob), each recipe lists no more files than its goal and as many as its
heading says, and the Korean page lists the same files in the same order."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
DESIGN_KO = ROOT / "docs" / "design.ko.md"

# the most files each addition may take (an architecture: its module and the one registration in build.py)
GOALS = {"engine": 2, "signal": 3, "command": 2, "panel": 5, "endpoint": 3, "architecture": 2}
ANCHOR = re.compile(r'^### <a id="recipe-([a-z]+)"></a>.*$', re.MULTILINE)
STEP = re.compile(r"^\d+\. `([^`]+)`", re.MULTILINE)
PATH = re.compile(r"`((?:aiayn|tests|docs|bench)/[^`\s]*\.(?:py|js|html|css|md))`")


def recipes(page: Path) -> dict[str, str]:
    """recipe name -> its section's text (up to the next heading)."""
    text = page.read_text(encoding="utf-8")
    found = list(ANCHOR.finditer(text))
    sections = {}
    for n, match in enumerate(found):
        end = found[n + 1].start() if n + 1 < len(found) else len(text)
        rest = text[match.end():end]
        sections[match.group(1)] = match.group(0) + re.split(r"^#{1,3} ", rest, flags=re.MULTILINE)[0]
    return sections


def test_every_addition_has_a_recipe():
    assert set(recipes(DESIGN)) == set(GOALS)


@pytest.mark.parametrize("name", sorted(GOALS))
def test_recipe_stays_within_its_goal_and_says_its_count(name):
    section = recipes(DESIGN)[name]
    files = STEP.findall(section)
    assert 1 <= len(files) <= GOALS[name], f"{name}: {files}"
    assert len(set(files)) == len(files), f"{name} names a file twice: {files}"
    assert f"({len(files)} files)" in section.splitlines()[0], f"{name}: its heading should say {len(files)} files"
    if name == "architecture":
        assert all(f.startswith("aiayn/model/") for f in files), files


@pytest.mark.parametrize("name", sorted(GOALS))
def test_every_named_file_exists(name):
    for path in PATH.findall(recipes(DESIGN)[name]):
        if "<" in path:  # a file the recipe creates: its folder is there
            assert (ROOT / path).parent.is_dir(), path
        elif "*" in path:  # a family of files: at least one
            assert list(ROOT.glob(path)), f"docs/design.md ({name}): nothing matches {path}"
        else:
            assert (ROOT / path).is_file(), f"docs/design.md ({name}) names {path}, which does not exist"


def test_korean_page_names_the_same_files():
    english, korean = recipes(DESIGN), recipes(DESIGN_KO)
    assert list(english) == list(korean)
    for name in english:
        assert STEP.findall(korean[name]) == STEP.findall(english[name]), name
        assert f"(파일 {len(STEP.findall(english[name]))}개)" in korean[name].splitlines()[0], name
