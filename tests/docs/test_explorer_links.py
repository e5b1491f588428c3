"""The learning pages' "see it in the explorer" links (docs/explorer_links.py, the mkdocs hook that checks them
and points them at the static explorer `make docs` builds): every learning page has one, in both languages
the same views, each parameter one the explorer's page reads from its address, and each link lands on the
explorer of the page's language."""

import importlib.util
import posixpath
import re
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.paths import REPO

LEARN = REPO / "docs" / "learn"
STATIC = REPO / "aiayn" / "web" / "static"
LINK = re.compile(r"\]\((explorer:[^)\s]+)\)")


def hook():
    spec = importlib.util.spec_from_file_location("explorer_links", REPO / "docs" / "explorer_links.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def links(page) -> list[str]:
    return LINK.findall(page.read_text(encoding="utf-8"))


def english_pages():
    return sorted(p for p in LEARN.glob("*.md") if not p.name.endswith(".ko.md"))


def test_every_learning_page_links_into_the_explorer_with_the_same_views_in_korean():
    pages = english_pages()
    assert len(pages) >= 13
    for page in pages:
        korean = page.with_name(page.stem + ".ko.md")
        assert links(page), f"{page.name}: no [...](explorer:?...) link"
        assert links(korean) == links(page), f"{korean.name}: not the views of {page.name}"


def test_the_hook_takes_only_parameters_the_page_reads():
    """url.js's readUrl (every name it reads) and static_mode.js's model=; lang= is the hook's to set."""
    url_js = (STATIC / "url.js").read_text(encoding="utf-8")
    read_url = url_js[url_js.index("export function readUrl"):url_js.index("export function writeUrl")]
    read = set(re.findall(r'(?:get|int|index)\("(\w+)"', read_url))
    read |= set(re.findall(r'\.get\("(model)"\)', (STATIC / "static_mode.js").read_text(encoding="utf-8")))
    assert "model" in read and "lang" in read
    assert set(hook().PARAMS) <= read - {"lang"}, set(hook().PARAMS) - read


def test_the_hooks_models_and_panels_are_the_sites():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    line = next(x for x in makefile.splitlines() if x.startswith("EXPLORER_MODELS"))
    assert tuple(re.findall(r"--model (\w+)=", line)) == hook().MODELS
    page = (STATIC / "index.html").read_text(encoding="utf-8")
    assert all(f'id="{panel}"' in page for panel in hook().PANELS)


@pytest.mark.parametrize("page_url, lang", [("learn/03-self-attention/", "en"), ("ko/learn/03-self-attention/", "ko"),
                                            ("learn/", "en"), ("ko/learn/07-cross-attention.html", "ko")])
def test_every_link_opens_the_explorer_of_the_pages_language(page_url, lang):
    explorer = "ko/explorer" if lang == "ko" else "explorer"
    h = hook()
    for page in LEARN.glob("*.md"):
        for link in links(page):
            href = h.explorer_href(link, page_url)
            parts = urlsplit(href)
            folder = page_url if page_url.endswith("/") else posixpath.dirname(page_url) + "/"
            assert posixpath.normpath(posixpath.join(folder, parts.path)) == explorer, (page.name, href)
            asked = parse_qsl(urlsplit(link).query)
            assert parse_qsl(parts.query) == [*asked, ("lang", lang)], (page.name, href)
            assert parts.fragment == urlsplit(link).fragment


@pytest.mark.parametrize("link, named", [
    ("explorer:?model=demo&text=a&row=3", "row="), ("explorer:?model=demo&kind=self", "kind="),
    ("explorer:?model=other", "model="), ("explorer:?text=a", "model="), ("explorer:?model=demo&layer=0", "layer="),
    ("explorer:?model=demo#step-panel", "#step-panel"), ("explorer:model=demo", "explorer:?"),
])
def test_a_link_the_page_would_not_read_stops_the_build_naming_what(link, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        hook().explorer_href(link, "learn/")
