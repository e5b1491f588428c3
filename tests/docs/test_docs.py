"""The documentation site: every ```python block in docs/**/*.md runs (each in a fresh namespace), and the
site builds with `mkdocs build --strict` (broken links and references fail) without fetching anything.

A block is skipped when the line just above its fence is `<!-- no-test -->`."""

import os
import re
import subprocess
import sys

import pytest
import torch

from tests.paths import REPO

DOCS = REPO / "docs"
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
NO_TEST = "<!-- no-test -->"


def python_blocks():
    blocks = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            if before == NO_TEST:
                continue
            line = text.count("\n", 0, match.start()) + 2
            blocks.append(pytest.param(match.group(1), id=f"{page.relative_to(DOCS)}:{line}"))
    return blocks


def test_the_docs_have_snippets():
    assert len(python_blocks()) >= 24


@pytest.mark.parametrize("code", python_blocks())
def test_snippet_runs(code):
    grad, threads = torch.is_grad_enabled(), torch.get_num_threads()
    try:
        exec(compile(code, "<docs snippet>", "exec"), {"__name__": "__docs__"})
    finally:
        torch.set_grad_enabled(grad)
        torch.set_num_threads(threads)


REMOTE = re.compile(r"""<(?:script|link|img)\b[^>]*\b(?:src|href)=["']?(?:https?:)?//""", re.I)
ABSOLUTE_SWITCH = re.compile(r'<a href="/[^"]*" hreflang=')  # the language selector (overrides/partials)


@pytest.mark.slow
def test_site_builds_strict_and_offline(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    site = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(site)],
                         cwd=DOCS.parent, capture_output=True, text=True,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert run.returncode == 0, run.stdout + run.stderr
    pages = list(site.rglob("*.html"))
    assert (site / "ko" / "learn" / "01-seq2seq" / "index.html").exists()
    fetched = [p for p in pages if REMOTE.search(p.read_text(encoding="utf-8"))]
    assert not fetched, f"pages that load a remote script, stylesheet, font or image: {fetched[:5]}"
    # relative, as the site's other links are, so that it works served under a sub-path (404.html, served
    # at any path, is absolute throughout)
    absolute = [p for p in pages if p.name != "404.html" and ABSOLUTE_SWITCH.search(p.read_text(encoding="utf-8"))]
    assert not absolute, f"pages whose language selector links to an absolute path: {absolute[:5]}"
    home = (site / "ko" / "index.html").read_text(encoding="utf-8")
    assert '<a href="../" hreflang="en"' in home


README = DOCS.parent / "README.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_is_a_map_whose_links_resolve():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    missing = [link for link in LINK.findall(text)
               if "://" not in link and not (README.parent / link).exists()]
    assert not missing, f"README links to files that do not exist: {missing}"


@pytest.mark.slow
def test_readme_python_runs_on_the_demo_model(tmp_path, monkeypatch):
    """The README's Python block, as written, on a model that `aiayn demo --out runs/demo` made (here a
    short run of the same command)."""
    from aiayn.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--out", "runs/demo", "--set", "train.max_steps=20", "--set", "train.save_every=10",
                 "--set", "train.eval_every=10"]) == 0
    blocks = FENCE.findall(README.read_text(encoding="utf-8"))
    assert blocks
    for code in blocks:
        exec(compile(code, "<README>", "exec"), {"__name__": "__readme__"})
