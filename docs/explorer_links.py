"""mkdocs hook: a page's link `[text](explorer:?PARAMS#PANEL)` opens the site's static explorer at that view.

`make docs` puts the explorer beside the pages, with no server behind it: `explorer/` for the English pages,
`ko/explorer/` for the Korean ones, each with the models `demo` and `coreference` (`aiayn export-site`). The
explorer is not a Markdown page, so mkdocs cannot check a plain link to it; this hook checks the link
instead (every parameter one the page reads from its address, with a value it takes) and writes it as a path
relative to the page, to the explorer of the page's language, with `lang=` set to that language. A link that
does not pass stops the build with one line naming the page and what to change.
"""

import html
import posixpath
import re
from urllib.parse import parse_qsl, urlencode

from mkdocs.exceptions import PluginError

MODELS = ("demo", "coreference")  # the Makefile's EXPLORER_MODELS
KINDS = ("encoder_self", "decoder_self", "cross")
PANELS = ("overview-panel", "line-panel", "search-panel", "arch-panel", "matrix-panel")
# what the page reads from its address (aiayn/web/static/url.js readUrl, and static_mode.js's model=), with a
# check of each value; lang= is the hook's to set
COUNT = re.compile(r"[1-9][0-9]*")
PARAMS = {
    "model": lambda v: v in MODELS,
    "text": bool,
    "target": bool,
    "beam": COUNT.fullmatch,
    "kind": lambda v: v in KINDS,
    "layer": lambda v: v == "mean" or COUNT.fullmatch(v),
    "head": lambda v: v == "mean" or COUNT.fullmatch(v),
    "q": COUNT.fullmatch,
    "words": lambda v: v == "1",
    "align": lambda v: v == "1",
    "prefix": bool,
    "open": lambda v: v == "pe",  # open=ffn needs the server (/api/step)
    "measure": lambda v: v in ("weights", "contributions"),
}
LINK = re.compile(r'href="(explorer:[^"]*)"')


def page_language(url: str) -> str:
    """The page's language from its address on the site: the Korean pages live under ko/."""
    return "ko" if url.startswith("ko/") else "en"


def explorer_href(link: str, page_url: str) -> str:
    """A link explorer:?PARAMS#PANEL (unescaped) on the page at page_url -> the explorer's address relative to the
    page; ValueError naming what is wrong."""
    query, _, panel = link.partition("#")
    if not query.startswith("explorer:?"):
        raise ValueError("write it as explorer:?model=demo&text=...")
    params = parse_qsl(query.removeprefix("explorer:?"), keep_blank_values=True, strict_parsing=True)
    for name, value in params:
        if name not in PARAMS:
            raise ValueError(f"{name}= is not one the explorer reads; it reads {', '.join(PARAMS)}")
        if not PARAMS[name](value):
            raise ValueError(f"{name}={value!r} is not a value the explorer takes")
    if dict(params).get("model") is None:
        raise ValueError(f"name the model: model= one of {', '.join(MODELS)}")
    if panel and panel not in PANELS:
        raise ValueError(f"#{panel} is not a panel the static explorer shows; one of {', '.join(PANELS)}")
    lang = page_language(page_url)
    folder = page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url) + "/"
    explorer = ("ko/" if lang == "ko" else "") + "explorer/"
    path = posixpath.relpath(explorer, folder or ".") + "/"
    return f"{path}?{urlencode([*params, ('lang', lang)])}" + (f"#{panel}" if panel else "")


def on_page_content(content, page, config, files):
    def replace(match):
        link = html.unescape(match.group(1))
        try:
            href = explorer_href(link, page.url)
        except ValueError as e:
            raise PluginError(f"{page.file.src_uri}: the explorer link {link!r}: {e}") from None
        return f'href="{html.escape(href)}"'

    return LINK.sub(replace, content)
