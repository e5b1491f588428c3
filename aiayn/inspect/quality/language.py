"""Whether a sentence looks written in the model's target language rather than its source language: a
count of each language's most frequent short words (and the number words of the built-in task). A hint
for the page's warning, not a language identifier."""

import re

WORDS = {
    "en": "the a an and of in on is are to with for at by his her it this that man woman two one three four five "
          "six seven eight nine ten twenty thirty forty fifty sixty seventy eighty ninety hundred thousand",
    "de": "der die das ein eine einer einem einen und ist sind mit im in auf von zu dem den des sich zwei drei "
          "vier fünf sechs sieben acht neun zehn zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig "
          "neunzig hundert tausend mann frau",
    "fr": "le la les un une des et est sont avec dans sur de du en au aux homme femme deux trois quatre cinq "
          "six sept huit neuf dix vingt trente cent mille",
    "cs": "a je jsou na v ve s se z do muž žena dva dvě tři čtyři pět šest sedm osm devět deset sto tisíc",
}
MIN_HITS = 2  # words of the target language before the page warns


def _hits(words: list[str], lang: str) -> int:
    vocabulary = set(WORDS.get(lang, "").split())
    return sum(w in vocabulary for w in words)


def looks_like(text: str, src_lang: str | None, tgt_lang: str | None) -> str:
    """tgt_lang when `text` has more of its words than of src_lang's (at least MIN_HITS), else ""."""
    if not src_lang or not tgt_lang or tgt_lang not in WORDS:
        return ""
    words = re.findall(r"\w+", text.lower())
    target = _hits(words, tgt_lang)
    return tgt_lang if target >= MIN_HITS and target > _hits(words, src_lang) else ""
