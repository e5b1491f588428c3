"""A built-in task made from the posts' example: "The animal didn't cross the street because it was too
tired" -> German, where the pronoun (er / sie / es) takes the grammatical gender of the noun "it" refers to,
and the adjective decides which noun that is (tired -> the animal, wide -> the street). A model translates
the pronoun right only by resolving "it". Valid and test sentences use noun pairs that training never saw
(and whose two nouns differ in gender, so the pronoun tells whether "it" was resolved).

German: nominative subject, the crossed thing in the case its verb or preposition governs (überqueren,
über + accusative; vor, an + dative, an dem -> am), verb-final subordinate clause ("weil er zu müde war").
order="source" keeps the English clause order; order="pronoun_first" puts the weil-clause first
("Weil er zu müde war, überquerte der Hund die Straße nicht."): the pronoun is then written before either
noun, so the decoder cannot read the genders off its own output.
"""

import functools
import random
from dataclasses import dataclass

ORDERS = ("source", "pronoun_first")
PRONOUN = {"m": "er", "f": "sie", "n": "es"}
ARTICLE = {"nom": {"m": "der", "f": "die", "n": "das"}, "acc": {"m": "den", "f": "die", "n": "das"},
           "dat": {"m": "dem", "f": "der", "n": "dem"}}

# (English, German, gender). Six of each gender per side, so the pronoun alone never gives the referent away.
AGENTS = [("dog", "Hund", "m"), ("fox", "Fuchs", "m"), ("donkey", "Esel", "m"), ("wolf", "Wolf", "m"),
          ("bear", "Bär", "m"), ("tiger", "Tiger", "m"),
          ("animal", "Tier", "n"), ("horse", "Pferd", "n"), ("sheep", "Schaf", "n"), ("pig", "Schwein", "n"),
          ("camel", "Kamel", "n"), ("rabbit", "Kaninchen", "n"),
          ("cat", "Katze", "f"), ("cow", "Kuh", "f"), ("goat", "Ziege", "f"), ("mouse", "Maus", "f"),
          ("duck", "Ente", "f"), ("tortoise", "Schildkröte", "f")]
PLACES = [("river", "Fluss", "m"), ("ditch", "Graben", "m"), ("square", "Platz", "m"), ("stream", "Bach", "m"),
          ("canal", "Kanal", "m"), ("path", "Weg", "m"),
          ("street", "Straße", "f"), ("bridge", "Brücke", "f"), ("meadow", "Wiese", "f"),
          ("highway", "Autobahn", "f"), ("road", "Landstraße", "f"), ("gorge", "Schlucht", "f"),
          ("field", "Feld", "n"), ("valley", "Tal", "n"), ("track", "Gleis", "n"), ("moor", "Moor", "n"),
          ("riverbed", "Flussbett", "n"), ("snowfield", "Schneefeld", "n")]
# adjectives that only fit the agent (the animal) or only the place (the street)
AGENT_ADJECTIVES = [("tired", "müde"), ("weak", "schwach"), ("scared", "ängstlich"), ("lazy", "faul"),
                    ("slow", "langsam"), ("sleepy", "schläfrig"), ("hungry", "hungrig")]
PLACE_ADJECTIVES = [("wide", "breit"), ("long", "lang"), ("busy", "belebt"), ("muddy", "schlammig"),
                    ("slippery", "rutschig"), ("deep", "tief"), ("steep", "steil")]


@dataclass(frozen=True)
class Template:
    """English predicate; German finite verb, then the rest of the main clause with {place} in `case`."""
    en: str
    verb: str
    rest: str
    case: str


TEMPLATES = [
    Template(en="didn't cross the {place}", verb="überquerte", rest="{place} nicht", case="acc"),
    Template(en="did not jump over the {place}", verb="sprang", rest="nicht über {place}", case="acc"),
    Template(en="didn't run across the {place}", verb="rannte", rest="nicht über {place}", case="acc"),
    Template(en="refused to cross the {place}", verb="weigerte sich", rest=", {place} zu überqueren", case="acc"),
    Template(en="stopped in front of the {place}", verb="blieb", rest="vor {place} stehen", case="dat"),
    Template(en="turned back at the {place}", verb="kehrte", rest="an {place} um", case="dat"),
    Template(en="did not want to cross the {place}", verb="wollte", rest="{place} nicht überqueren", case="acc"),
]


@dataclass(frozen=True)
class Item:
    """One sentence pair and what the pronoun refers to (for tests and bench/coreference.py)."""
    en: str
    de: str
    referent_en: str  # the English noun "it" refers to
    referent_de: str  # its German noun
    pronoun: str  # the German pronoun the translation must use
    other_en: str  # the other noun
    other_de: str


def noun_phrase(noun: str, gender: str, case: str) -> str:
    return f"{ARTICLE[case][gender]} {noun}"


def _place_phrase(template: Template, noun: str, gender: str) -> str:
    phrase = noun_phrase(noun, gender, template.case)
    rest = template.rest.format(place=phrase)
    return rest.replace("an dem ", "am ")  # German contracts an + dem


def make_item(agent, place, adjective, template: Template, order: str) -> Item:
    """agent, place: (English, German, gender); adjective: (English, German), from AGENT_ or PLACE_ADJECTIVES."""
    (a_en, a_de, a_g), (p_en, p_de, p_g), (adj_en, adj_de) = agent, place, adjective
    agent_is_referent = adjective in AGENT_ADJECTIVES
    gender = a_g if agent_is_referent else p_g
    en = f"The {a_en} {template.en.format(place=p_en)} because it was too {adj_en}."
    subject, rest = noun_phrase(a_de, a_g, "nom"), _place_phrase(template, p_de, p_g)
    because = f"weil {PRONOUN[gender]} zu {adj_de} war"
    if order == "pronoun_first":
        main = f"{template.verb} {subject} {rest}"
        de = f"{because[0].upper()}{because[1:]}, {main}."
    else:
        main = f"{subject[0].upper()}{subject[1:]} {template.verb} {rest}"
        de = f"{main}, {because}."
    de = de.replace(" ,", ",")
    ref, other = ((a_en, a_de), (p_en, p_de)) if agent_is_referent else ((p_en, p_de), (a_en, a_de))
    return Item(en=en, de=de, referent_en=ref[0], referent_de=ref[1], pronoun=PRONOUN[gender], other_en=other[0],
                other_de=other[1])


def held_out_pairs(seed: int) -> tuple[list, list]:
    """(valid pairs, test pairs) of (agent index, place index): disjoint, never in training, nouns of differing
    gender; every noun keeps training pairs. The posts' pair (animal, street) is always a test pair."""
    rng = random.Random(seed)
    candidates = [(a, p) for a in range(len(AGENTS)) for p in range(len(PLACES)) if AGENTS[a][2] != PLACES[p][2]]
    rng.shuffle(candidates)
    posts = (_index(AGENTS, "animal"), _index(PLACES, "street"))
    candidates.remove(posts)
    chosen = [posts] + candidates[:35]  # 36 of 324 pairs; each noun loses at most a few of its 18
    return chosen[18:], chosen[:18]


def _index(nouns, english: str) -> int:
    return next(i for i, noun in enumerate(nouns) if noun[0] == english)


def _sample(rng: random.Random, pairs: list, order: str) -> Item:
    a, p = rng.choice(pairs)
    adjective = rng.choice(AGENT_ADJECTIVES + PLACE_ADJECTIVES)
    return make_item(AGENTS[a], PLACES[p], adjective, rng.choice(TEMPLATES), order)


@functools.lru_cache(maxsize=4)  # train and valid come from one generation; callers must not mutate it
def coreference_items(n_train: int, n_valid: int, n_test: int, seed: int = 1234,
                      order: str = "source") -> dict[str, list[Item]]:
    """{"train", "valid", "test"} lists of Items; valid and test use held_out_pairs, train every other pair.
    Train is drawn with replacement; valid and test without (up to all their distinct sentences)."""
    if order not in ORDERS:
        raise ValueError(f"order={order!r} must be one of {', '.join(ORDERS)}")
    rng = random.Random(seed)
    valid_pairs, test_pairs = held_out_pairs(seed)
    held = set(valid_pairs) | set(test_pairs)
    train_pairs = [(a, p) for a in range(len(AGENTS)) for p in range(len(PLACES)) if (a, p) not in held]
    splits = {}
    for name, pairs, size in (("valid", valid_pairs, n_valid), ("test", test_pairs, n_test)):
        every = [make_item(AGENTS[a], PLACES[p], adj, t, order) for a, p in pairs
                 for adj in AGENT_ADJECTIVES + PLACE_ADJECTIVES for t in TEMPLATES]
        splits[name] = random.Random(seed + len(name)).sample(every, min(size, len(every)))
    splits["train"] = [_sample(rng, train_pairs, order) for _ in range(n_train)]
    return {"train": splits["train"], "valid": splits["valid"], "test": splits["test"]}


def coreference_task(n_train: int, n_valid: int, n_test: int, seed: int = 1234, order: str = "source"):
    """As number_task: {"train": [(en, de)...], "valid": [...], "test": [...]}."""
    items = coreference_items(n_train, n_valid, n_test, seed, order)
    return {name: [(item.en, item.de) for item in split] for name, split in items.items()}
