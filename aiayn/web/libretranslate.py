"""LibreTranslate's API over the served model (routes: aiayn.web.routes.libretranslate), so that the clients
written for LibreTranslate translate through `aiayn serve` unchanged.

What LibreTranslate does, and so this module: a request's values are a JSON object's fields, or else the
query's and the form's (urlencoded or multipart), the query's first; a refusal is 400 {"error": "..."} in
LibreTranslate's words ("Invalid request: missing q parameter", "xx is not supported"). The model is one
language pair, the languages of its run (data.src_lang, data.tgt_lang) or those import-hf recorded in
its info.json: /languages lists both, the source with the target as its one target; "auto" as the source
is the model's source language.

Where this server differs, and why:
- a text is translated line by line (html: each text between tags, the markup kept as written): the
  models translate sentences, and a paragraph read as one sentence comes out short or looping. A line is
  at most MAX_TEXT characters, a request at most MAX_BATCH_TEXTS lines to translate;
- alternatives come from the beam's n-best (at most MAX_BEAM - 1), for a text of one line;
- detection ranks the model's two languages only, by counts of their common words
  (aiayn.inspect.quality.language.WORDS): a hint, not a language identifier;
- api_key is accepted and ignored: this server has no keys."""

import json
import re
from dataclasses import dataclass
from html import escape
from html.parser import HTMLParser
from urllib.parse import parse_qsl

from fastapi import Request

from aiayn.errors import AiaynError
from aiayn.inspect.quality.language import WORDS
from aiayn.web.limits import MAX_BATCH_TEXTS, MAX_BEAM, MAX_TEXT

NAMES = {"ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish", "fi": "Finnish",
         "fr": "French", "it": "Italian", "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "pl": "Polish",
         "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian",
         "zh": "Chinese"}  # LibreTranslate's English names; another code is its own name
RAW_TAGS = ("script", "style")  # html elements whose text is code, not words: kept as written
MAX_ALTERNATIVES = MAX_BEAM - 1  # the best and its alternatives fill at most the largest beam
UNNAMED = ("this model does not name its languages, so the LibreTranslate API cannot match them: re-import it "
           "naming them (aiayn import-hf DIR --out MODEL --src-lang de --tgt-lang en), give a trained model "
           "data.src_lang and data.tgt_lang in its config.yaml, or use POST /api/translate")


class Refused(AiaynError):
    """A request LibreTranslate would refuse: 400 with its words."""


def missing(name: str) -> Refused:
    return Refused(f"Invalid request: missing {name} parameter")


def is_json(content_type: str) -> bool:
    """Whether a Content-Type is JSON's, as LibreTranslate (Flask) tells it."""
    mimetype = content_type.split(";")[0].strip().lower()
    return mimetype == "application/json" or (mimetype.startswith("application/") and mimetype.endswith("+json"))


async def request_values(request: Request) -> dict:
    """The values of a LibreTranslate request: a JSON body's fields, else the query's, then the form's."""
    content_type = request.headers.get("content-type", "")
    if is_json(content_type):
        try:
            values = json.loads(await request.body())
        except (ValueError, RecursionError) as err:  # UnicodeDecodeError is a ValueError
            raise Refused(f"Invalid JSON format: {type(err).__name__} ({err}); send one JSON object such as "
                          f"{{\"q\": \"...\", \"source\": \"en\", \"target\": \"de\"}}") from None
        if not isinstance(values, dict):
            raise Refused("Invalid JSON format: the body is JSON but not an object; send {\"q\": ..., \"source\": "
                          "..., \"target\": ...}")
        return values
    values = dict(request.query_params)
    for name, value in await _form(request, content_type.split(";")[0].strip().lower()):
        values.setdefault(name, value)
    return values


async def _form(request: Request, mimetype: str) -> list[tuple[str, str]]:
    """A form body's (name, value) pairs: urlencoded (what most clients send) read here, multipart by
    python-multipart (through Starlette); a file part is no value of this API."""
    if mimetype == "application/x-www-form-urlencoded":
        return parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True)
    if mimetype == "multipart/form-data":
        return [(name, value) for name, value in (await request.form()).multi_items() if isinstance(value, str)]
    return []


def language_list(langs: tuple[str | None, str | None]) -> list[dict]:
    """GET /languages: the model's pair, as LibreTranslate lists languages ([] when the model names none)."""
    src, tgt = langs
    if not src or not tgt:
        return []
    return [{"code": src, "name": NAMES.get(src, src), "targets": [tgt]},
            {"code": tgt, "name": NAMES.get(tgt, tgt), "targets": []}]


def detections(text: str, langs: tuple[str, str]) -> list[dict]:
    """The model's two languages, the likelier first, each with a confidence of 0-100: the share of their
    common words in `text` that are its, add-one smoothed (a text with none of them: 50 each, the source
    first)."""
    words = re.findall(r"\w+", text.lower())
    vocabularies = [set(WORDS.get(lang, "").split()) for lang in langs]
    hits = [sum(w in vocabulary for w in words) for vocabulary in vocabularies]
    found = [{"confidence": round(100 * (n + 1) / (sum(hits) + 2), 1), "language": lang}
             for lang, n in zip(langs, hits)]
    return sorted(found, key=lambda d: -d["confidence"])  # stable: the source first on a tie


def source_detected(text: str, langs: tuple[str, str]) -> dict:
    """"auto": the model's source language (its only one), with the confidence `detections` gives it."""
    return next(d for d in detections(text, langs) if d["language"] == langs[0])


def named_pair(langs: tuple[str | None, str | None]) -> tuple[str, str]:
    if not langs[0] or not langs[1]:
        raise Refused(UNNAMED)
    return langs


def _text_of(value, where: str) -> str:
    if isinstance(value, str):
        return value
    raise Refused(f"Invalid request: {where} must be a text, not {type(value).__name__}")


def detect_text(values: dict) -> str:
    """POST /detect's q (a list of texts is read as one) -> the text to detect."""
    q = values.get("q")
    if not q:
        raise missing("q")
    texts = q if isinstance(q, list) else [q]
    return "\n".join(_text_of(t, f"q[{i}]" if isinstance(q, list) else "q") for i, t in enumerate(texts))


@dataclass(frozen=True, kw_only=True)
class Job:
    """A checked POST /translate. parts: per text of q, its pieces in order as (text, translated?), the
    translated ones its segments; one: q was one text (the answer's fields are single, not lists); html: the
    translations are written as HTML text; alternatives: how many per text; detected: per text, for "auto"."""

    parts: list[list[tuple[str, bool]]]
    one: bool
    html: bool
    alternatives: int
    detected: list[dict] | None  # source "auto": the model's source language, per text

    @property
    def segments(self) -> list[str]:
        return [text for parts in self.parts for text, translated in parts if translated]

    def where(self, i: int) -> str:
        """`q[k]: ` of the text whose segment i is (nothing for one text)."""
        owners = [k for k, parts in enumerate(self.parts) for _, translated in parts if translated]
        return "" if self.one else f"q[{owners[i]}]: "


def _alternatives(value) -> int:
    try:
        n = max(0, int(value))
    except (TypeError, ValueError):
        raise Refused("Invalid request: alternatives parameter is not a number") from None
    if n > MAX_ALTERNATIVES:
        raise Refused(f"Invalid request: alternatives parameter must be <= {MAX_ALTERNATIVES}")
    return n


def _checked_pair(source: str, target: str, langs: tuple[str, str]) -> None:
    for code in (source, target):
        if code not in langs:
            raise Refused(f"{code} is not supported")
    if (source, target) != langs:
        raise Refused(f"{NAMES.get(target, target)} ({target}) is not available as a target language from "
                      f"{NAMES.get(source, source)} ({source})")


def translate_job(values: dict, langs: tuple[str | None, str | None], from_json: bool) -> Job:
    """POST /translate's values, checked in LibreTranslate's order -> the job; Refused with its words."""
    q, source, target = values.get("q"), values.get("source"), values.get("target")
    for name, value in (("q", q), ("source", source), ("target", target)):
        if not value:
            raise missing(name)
    alternatives = _alternatives(values.get("alternatives", 0))
    texts = q if isinstance(q, list) else [q]
    texts = [_text_of(t, f"q[{i}]" if isinstance(q, list) else "q") for i, t in enumerate(texts)]
    if not from_json:  # a form's line ends are CR LF
        texts = ["\n".join(t.splitlines()) for t in texts]
    src, tgt = named_pair(langs)
    source, target = _text_of(source, "source").lower(), _text_of(target, "target").lower()
    _checked_pair(src if source == "auto" else source, target, (src, tgt))
    text_format = values.get("format") or "text"
    if text_format not in ("text", "html"):
        raise Refused(f"{text_format} format is not supported")
    parts = [html_parts(t) if text_format == "html" else text_parts(t) for t in texts]
    detected = [source_detected(t, (src, tgt)) for t in texts] if source == "auto" else None
    job = Job(parts=parts, one=not isinstance(q, list), html=text_format == "html", alternatives=alternatives,
              detected=detected)
    _check_sizes(job.segments)
    return job


def _check_sizes(segments: list[str]) -> None:
    if len(segments) > MAX_BATCH_TEXTS:
        raise Refused(f"Invalid request: request ({len(segments)}) exceeds text limit ({MAX_BATCH_TEXTS}): this "
                      f"server translates at most {MAX_BATCH_TEXTS} lines (html: texts between tags) per request")
    for text in segments:
        if len(text) > MAX_TEXT:
            raise Refused(f"Invalid request: request ({len(text)}) exceeds text limit ({MAX_TEXT}): this server "
                          f"translates lines (html: texts between tags) of at most {MAX_TEXT} characters")


def _around(text: str) -> list[tuple[str, bool]]:
    """A stretch of text -> its leading white space (kept), its words (translated), its trailing white space."""
    lead, core, trail = re.fullmatch(r"(\s*)(.*?)(\s*)", text, re.S).groups()
    return [(piece, translated) for piece, translated in ((lead, False), (core, True), (trail, False)) if piece]


def text_parts(text: str) -> list[tuple[str, bool]]:
    """Plain text -> its lines' words (translated) and the white space and line ends around them (kept)."""
    return [part for line in re.split(r"(\n)", text) for part in _around(line)]


class _HtmlParts(HTMLParser):
    """Markup kept as written (end tags as </name>), text between tags unescaped and split by _around."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[tuple[str, bool]] = []
        self.raw: str | None = None  # inside <script> or <style>

    def handle_starttag(self, tag, attrs):
        self.parts.append((self.get_starttag_text(), False))
        self.raw = tag if tag in RAW_TAGS else self.raw

    def handle_startendtag(self, tag, attrs):
        self.parts.append((self.get_starttag_text(), False))

    def handle_endtag(self, tag):
        self.parts.append((f"</{tag}>", False))
        self.raw = None if tag == self.raw else self.raw

    def handle_data(self, data):
        if self.raw:
            self.parts.append((data, False))
        else:  # white space needs no escaping; the words are escaped once translated
            self.parts += _around(data)

    def handle_comment(self, data):
        self.parts.append((f"<!--{data}-->", False))

    def handle_decl(self, decl):
        self.parts.append((f"<!{decl}>", False))

    def handle_pi(self, data):
        self.parts.append((f"<?{data}>", False))

    def unknown_decl(self, data):
        self.parts.append((f"<![{data}]>", False))


def html_parts(text: str) -> list[tuple[str, bool]]:
    parser = _HtmlParts()
    parser.feed(text)
    parser.close()
    return parser.parts


def answer_json(job: Job, results: list) -> dict:
    """The job's translations (one result per segment, in order) -> LibreTranslate's answer."""
    found = iter(results)
    texts, alternatives = [], []
    for parts in job.parts:
        mine = [next(found) if translated else None for _, translated in parts]
        texts.append("".join((escape(r.text, quote=False) if job.html else r.text) if r else text
                             for (text, _), r in zip(parts, mine)))
        translated = [r for r in mine if r]
        one_line = len(translated) == 1 and not job.html  # alternatives of a whole text only
        others = [t for t, _ in translated[0].n_best[1:] if t != translated[0].text] if one_line else []
        alternatives.append(list(dict.fromkeys(others)))
    answer = {"translatedText": texts[0] if job.one else texts}
    if job.detected is not None:
        answer["detectedLanguage"] = job.detected[0] if job.one else job.detected
    if job.alternatives:
        answer["alternatives"] = alternatives[0] if job.one else alternatives
    return answer
