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
