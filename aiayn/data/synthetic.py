"""A built-in translation task that needs no files: English number words -> German number words.

German says the units before the tens ("twenty one" -> "ein und zwanzig"), so the alignment is
non-monotonic: a good first attention picture. Deterministic by seed; train/valid/test numbers disjoint.
"""

import functools
import random

EN_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
            "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
            "nineteen"]
EN_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
DE_UNITS = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun", "zehn",
            "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn", "achtzehn",
            "neunzehn"]
DE_TENS = ["", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig"]


def english(n: int) -> str:
    """0 <= n < 1,000,000 in English words."""
    if n < 20:
        return EN_UNITS[n]
    if n < 100:
        return EN_TENS[n // 10] + ("" if n % 10 == 0 else " " + EN_UNITS[n % 10])
    if n < 1000:
        return EN_UNITS[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + english(n % 100))
    return english(n // 1000) + " thousand" + ("" if n % 1000 == 0 else " " + english(n % 1000))


def german(n: int) -> str:
    """0 <= n < 1,000,000 in German words, split at word parts: 21 -> "ein und zwanzig"."""
    if n < 20:
        return DE_UNITS[n]
    if n < 100:
        unit = n % 10
        return DE_TENS[n // 10] if unit == 0 else ("ein" if unit == 1 else DE_UNITS[unit]) + " und " + DE_TENS[n // 10]
    if n < 1000:
        head = "ein" if n // 100 == 1 else DE_UNITS[n // 100]
        return head + " hundert" + ("" if n % 100 == 0 else " " + german(n % 100))
    head = "ein" if n // 1000 == 1 else german(n // 1000)
    return head + " tausend" + ("" if n % 1000 == 0 else " " + german(n % 1000))


def _sample_number(rng: random.Random) -> int:
    digits = rng.choice([1, 2, 2, 3, 3, 4, 5, 6])  # favour short numbers, keep long ones
    return rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10**digits)


@functools.lru_cache(maxsize=4)  # train and valid come from one generation; callers must not mutate it
def number_task(n_train: int, n_valid: int, n_test: int, seed: int = 1234):
    """Returns {"train": [(en, de)...], "valid": [...], "test": [...]}; the three sets share no number."""
    rng = random.Random(seed)
    held_out: set[int] = set()
    splits = {}
    for name, size in (("valid", n_valid), ("test", n_test)):
        numbers = []
        while len(numbers) < size:
            n = _sample_number(rng)
            if n not in held_out and n >= 100:
                held_out.add(n)
                numbers.append(n)
        splits[name] = [(english(n), german(n)) for n in numbers]
    train = []
    while len(train) < n_train:
        n = _sample_number(rng)
        if n not in held_out:
            train.append((english(n), german(n)))
    splits["train"] = train
    return {"train": splits["train"], "valid": splits["valid"], "test": splits["test"]}


# Gold word alignments of the task, built beside the words by the same recursion as english() / german():
# (english words, german words, sure links, possible links), links as (english index, german index).
# "und" has no English word of its own: it is possibly aligned to both words it joins (unit and tens).
Aligned = tuple[list[str], list[str], set[tuple[int, int]], set[tuple[int, int]]]


def _shift(part: Aligned, en_offset: int, de_offset: int) -> Aligned:
    en, de, sure, possible = part
    move = {(i + en_offset, j + de_offset) for i, j in sure}
    return en, de, move, {(i + en_offset, j + de_offset) for i, j in possible}


def _join(*parts: Aligned) -> Aligned:
    en, de, sure, possible = [], [], set(), set()
    for part in parts:
        p_en, p_de, p_sure, p_possible = _shift(part, len(en), len(de))
        en, de = en + p_en, de + p_de
        sure, possible = sure | p_sure, possible | p_possible
    return en, de, sure, possible


def _word(en: str, de: str) -> Aligned:
    return [en], [de], {(0, 0)}, set()


def _head(n: int) -> Aligned:
    """The multiplier before "hundert" / "tausend": German says "ein" for 1."""
    return _word("one", "ein") if n == 1 else aligned(n)


def aligned(n: int) -> Aligned:
    """english(n) and german(n) as words with their gold alignment (0 <= n < 1,000,000)."""
    if n < 20:
        return _word(EN_UNITS[n], DE_UNITS[n])
    if n < 100:
        tens, unit = n // 10, n % 10
        if unit == 0:
            return _word(EN_TENS[tens], DE_TENS[tens])
        de_unit = "ein" if unit == 1 else DE_UNITS[unit]
        # "twenty one" -> "ein und zwanzig": the order turns round
        return ([EN_TENS[tens], EN_UNITS[unit]], [de_unit, "und", DE_TENS[tens]], {(1, 0), (0, 2)},
                {(0, 1), (1, 1)})
    big, word, de_word = (100, "hundred", "hundert") if n < 1000 else (1000, "thousand", "tausend")
    parts = [_head(n // big), _word(word, de_word)]
    if n % big:
        parts.append(aligned(n % big))
    return _join(*parts)


def pharaoh(sure: set[tuple[int, int]], possible: set[tuple[int, int]] = frozenset()) -> str:
    """Links as Pharaoh text: "i-j" sure, "i?j" possible only (a link in both is written sure)."""
    links = [(i, j, "-") for i, j in sure] + [(i, j, "?") for i, j in possible - sure]
    return " ".join(f"{i}{mark}{j}" for i, j, mark in sorted(links))


def number_of(words: str) -> int:
    """english(n) read back: "twenty one thousand five" -> 21005 (the words of this task only)."""
    total = current = 0
    for word in words.split():
        if word in EN_UNITS:
            current += EN_UNITS.index(word)
        elif word in EN_TENS:
            current += 10 * EN_TENS.index(word)
        elif word == "hundred":
            current *= 100
        elif word == "thousand":
            total, current = total + current * 1000, 0
        else:
            raise ValueError(f"{word!r} is not a word of the built-in number task")
    return total + current


def gold_alignments(pairs) -> list[str]:
    """Pharaoh lines (English word i, German word j; "?" marks a possible link) of the task's pairs."""
    return [pharaoh(*aligned(number_of(en))[2:]) for en, _ in pairs]
