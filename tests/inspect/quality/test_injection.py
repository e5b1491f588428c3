"""The natural perturbations change the source as their kinds say and nothing else: the inserted kinds keep
every source word, in order, after what they put at the start; misspelled swaps two neighbouring inner
letters in two words; the same seed gives the same perturbation."""

import random

import pytest

from aiayn.inspect.quality.injection import NATURAL, PUNCTUATION, natural_search, perturb, perturbable

SOURCE = "Ein Mann schläft in einem grünen Raum auf einem Sofa."
RARE = ["dumpster", "raincoat", "sparring", "sniffing", "grabbing", "circular"]
PIECES = ["ücher", "objekt", "ternoon", "umbling"]


def _perturbed(kind, seed=0):
    return perturb(kind, SOURCE, random.Random(seed), rare=RARE, pieces=PIECES).split()


@pytest.mark.parametrize("kind,added", [("rare first", 1), ("several rare", 5), ("rare pieces", 1),
                                        ("punctuation", 1)])
def test_inserted_kinds_put_their_words_first_and_keep_the_source(kind, added):
    words = _perturbed(kind)
    assert words[added:] == SOURCE.split()
    head = words[:added]
    if kind in ("rare first", "several rare"):
        assert set(head) <= set(RARE) and len(set(head)) == added
    elif kind == "rare pieces":
        rest = head[0]
        while rest:  # the made-up word is three of the pieces, end to end
            rest = rest[len(next(p for p in PIECES if rest.startswith(p))):]
    else:
        assert head[0] in {p * 3 for p in PUNCTUATION}


def test_misspelled_swaps_two_inner_letters_in_two_words():
    words, source = _perturbed("misspelled"), SOURCE.split()
    changed = [(a, b) for a, b in zip(source, words) if a != b]
    assert len(words) == len(source) and len(changed) == 2
    for original, swapped in changed:
        diff = [i for i, (x, y) in enumerate(zip(original, swapped)) if x != y]
        assert len(diff) == 2 and diff[1] == diff[0] + 1 and 0 < diff[0] and diff[1] < len(original) - 1
        assert swapped[diff[0]] == original[diff[1]] and swapped[diff[1]] == original[diff[0]]


@pytest.mark.parametrize("kind", NATURAL)
def test_the_same_seed_gives_the_same_perturbation(kind):
    assert _perturbed(kind, 3) == _perturbed(kind, 3)
    assert _perturbed(kind) != SOURCE.split()


def test_a_small_vocabulary_gives_what_it_has():
    """Fewer rare words or pieces than a kind inserts: all of them, once each; none: the kind is skipped."""
    words = perturb("several rare", SOURCE, random.Random(0), rare=RARE[:2], pieces=PIECES).split()
    assert sorted(words[:2]) == sorted(RARE[:2]) and words[2:] == SOURCE.split()
    made_up = perturb("rare pieces", SOURCE, random.Random(0), rare=RARE, pieces=PIECES[:1]).split()[0]
    assert made_up == PIECES[0]
    assert not perturbable("rare first", rare=[], pieces=PIECES)
    assert not perturbable("rare pieces", rare=RARE, pieces=[])
    assert perturbable("misspelled", rare=[], pieces=[]) and perturbable("punctuation", rare=[], pieces=[])


def test_natural_search_runs_on_a_tiny_vocabulary(transformer_dir, monkeypatch):
    """A tiny vocabulary (as the number task's: two rare whole words, no rare pieces): every kind runs or is
    skipped, and every output it keeps is diagnosed."""
    from aiayn.decoding.translator import Translator
    from aiayn.inspect.quality import injection
    from aiayn.inspect.quality.thresholds import DEFAULT_THRESHOLDS

    translator = Translator.from_pretrained(transformer_dir)
    monkeypatch.setattr(injection, "rare_words", lambda translator: ["forty", "seven"])
    monkeypatch.setattr(injection, "rare_pieces", lambda translator: [])
    sources = ["forty five", "seven", "three hundred twelve"]
    clean = [r.text for r in translator.translate(sources)]
    found, close = natural_search(translator, sources, clean, DEFAULT_THRESHOLDS, 0, 2)
    assert set(found) == set(NATURAL)
    kept = close + [x for k in found for x in found[k]]
    assert all("signals" in d and 0 <= i < len(sources) for i, d in kept)
    assert len(close) <= 2 * len(NATURAL)
