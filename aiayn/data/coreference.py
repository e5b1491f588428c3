"""A built-in task made from the posts' example: "The animal didn't cross the street because it was too
tired" -> German, where the pronoun (er / sie / es) takes the grammatical gender of the noun "it" refers to,
and the adjective decides which noun that is (tired -> the animal, wide -> the street). A model translates
the pronoun right only by resolving "it".

Each sentence is one verb (TEMPLATES) in one construction (CONSTRUCTIONS): the because-clause after or before
the main clause, active or passive voice (the place becomes the subject: "The street was not crossed by the
animal"), an optional relative clause on the animal or the place that brings in a third noun, a person
("the dog that the farmer fed"; "it" never refers to a person), and the degree of the adjective (too, very,
so). Two splits test generalization:

- valid and test: training's constructions, on noun pairs that training never saw (their two nouns differ
  in gender, so the pronoun tells whether "it" was resolved);
- held_out: constructions that training never makes (HELD_OUT: the because-clause first in the passive
  voice, and a relative clause on the place with "so"), on any two nouns of differing gender. Each of their
  parts is trained in other combinations, so every word is known; the combination is new, and so is one
  German order: after a leading weil-clause the passive's "wurde" comes before its subject ("Weil es zu müde
  war, wurde die Straße vom Tier nicht überquert"), where training has "wurde" only after it.

German: nominative subject, the crossed thing in the case its verb or preposition governs (überqueren,
über + accusative; vor, an + dative, an dem -> am; von dem -> vom), verb-final subordinate clauses ("weil er
zu müde war"; relative "den der Bauer fütterte"), the finite verb second (before the subject after a leading
weil-clause). order="source" keeps the English clause order; order="pronoun_first" always puts the
weil-clause first ("Weil er zu müde war, überquerte der Hund die Straße nicht."): the pronoun is then written
before either noun, so the decoder cannot read the genders off its own output.
"""

import functools
import itertools
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
# the relative clauses' subjects: people, whom "it" never names; nominative only, so no weak-noun endings
PEOPLE = [("farmer", "Bauer", "m"), ("hunter", "Jäger", "m"), ("man", "Mann", "m"),
          ("woman", "Frau", "f"), ("queen", "Königin", "f"), ("teacher", "Lehrerin", "f")]
# (English, German) verbs of the relative clauses: what a person did to the animal, or to the place
AGENT_CLAUSE_VERBS = [("fed", "fütterte"), ("chased", "jagte"), ("saw", "sah"), ("found", "fand")]
PLACE_CLAUSE_VERBS = [("built", "baute"), ("knew", "kannte"), ("saw", "sah"), ("found", "fand")]
# adjectives that only fit the agent (the animal) or only the place (the street)
AGENT_ADJECTIVES = [("tired", "müde"), ("weak", "schwach"), ("scared", "ängstlich"), ("lazy", "faul"),
                    ("slow", "langsam"), ("sleepy", "schläfrig"), ("hungry", "hungrig"),
                    ("exhausted", "erschöpft"), ("sick", "krank"), ("nervous", "nervös")]
PLACE_ADJECTIVES = [("wide", "breit"), ("long", "lang"), ("busy", "belebt"), ("muddy", "schlammig"),
                    ("slippery", "rutschig"), ("deep", "tief"), ("steep", "steil"), ("icy", "vereist"),
                    ("flooded", "überflutet"), ("rocky", "felsig")]
DEGREES = {"too": "zu", "very": "sehr", "so": "so"}


@dataclass(frozen=True)
class Template:
    """A verb. Active: English predicate; German finite verb, then the rest of the main clause with {place} in
    `case`. Passive (transitive verbs only): English "was ... by the {agent}"; German "wurde" + passive_rest
    with {agent} after von."""
    en: str
    verb: str
    rest: str
    case: str
    passive_en: str = ""
    passive_rest: str = ""


TEMPLATES = [
    Template(en="didn't cross the {place}", verb="überquerte", rest="{place} nicht", case="acc",
             passive_en="was not crossed by the {agent}", passive_rest="{agent} nicht überquert"),
    Template(en="did not jump over the {place}", verb="sprang", rest="nicht über {place}", case="acc"),
    Template(en="didn't run across the {place}", verb="rannte", rest="nicht über {place}", case="acc"),
    Template(en="refused to cross the {place}", verb="weigerte sich", rest=", {place} zu überqueren", case="acc"),
    Template(en="stopped in front of the {place}", verb="blieb", rest="vor {place} stehen", case="dat"),
    Template(en="turned back at the {place}", verb="kehrte", rest="an {place} um", case="dat"),
    Template(en="did not want to cross the {place}", verb="wollte", rest="{place} nicht überqueren", case="acc"),
    Template(en="did not reach the {place}", verb="erreichte", rest="{place} nicht", case="acc",
             passive_en="was not reached by the {agent}", passive_rest="{agent} nicht erreicht"),
    Template(en="didn't enter the {place}", verb="betrat", rest="{place} nicht", case="acc",
             passive_en="was not entered by the {agent}", passive_rest="{agent} nicht betreten"),
    Template(en="avoided the {place}", verb="mied", rest="{place}", case="acc",
             passive_en="was avoided by the {agent}", passive_rest="{agent} gemieden"),
    Template(en="waited beside the {place}", verb="wartete", rest="neben {place}", case="dat"),
]


@dataclass(frozen=True)
class Construction:
    """because_first: the because-clause opens the English sentence; voice: active | passive; relative: none |
    agent | place (which noun gets a relative clause); degree: too | very | so."""
    because_first: bool = False
    voice: str = "active"
    relative: str = "none"
    degree: str = "too"

    @property
    def name(self) -> str:
        relative = "" if self.relative == "none" else f", relative clause on the {self.relative}"
        return f"{'because-first' if self.because_first else 'main-first'} {self.voice}{relative}, {self.degree}"


BASE = Construction()  # the posts' sentence
CONSTRUCTIONS = [Construction(because_first=b, voice=v, relative=r, degree=d) for b, v, r, d in
                 itertools.product((False, True), ("active", "passive"), ("none", "agent", "place"), DEGREES)]
HELD_OUT = [c for c in CONSTRUCTIONS if (c.because_first and c.voice == "passive")
            or (c.relative == "place" and c.degree == "so")]
TRAINED = [c for c in CONSTRUCTIONS if c not in HELD_OUT]


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
    construction: Construction = BASE


def noun_phrase(noun: str, gender: str, case: str) -> str:
    return f"{ARTICLE[case][gender]} {noun}"


def _contract(text: str) -> str:
    return text.replace("an dem ", "am ").replace("von dem ", "vom ")  # German contracts an, von + dem


def _clause(construction: Construction, on: str, clause) -> tuple[str, str]:
    """(English, German after the relative pronoun) of the relative clause on `on` ("agent" or "place"); empty
    when the construction has none there. clause: (person, (English, German) verb)."""
    if construction.relative != on:
        return "", ""
    (person_en, person_de, person_g), (verb_en, verb_de) = clause
    return f" that the {person_en} {verb_en}", f"{noun_phrase(person_de, person_g, 'nom')} {verb_de}"


def _with_clause(phrase: str, gender: str, german_clause: str) -> str:
    """A German noun phrase and its relative clause between commas (the relative pronoun is accusative: the
    clause's object)."""
    return f"{phrase}, {ARTICLE['acc'][gender]} {german_clause}," if german_clause else phrase


def _main_clause(agent, place, template: Template, construction: Construction, clause) -> tuple[str, str, str, str]:
    """English main clause (lowercase "the"), German (subject, finite verb, rest)."""
    (a_en, a_de, a_g), (p_en, p_de, p_g) = agent, place
    agent_en, agent_de = _clause(construction, "agent", clause)
    place_en, place_de = _clause(construction, "place", clause)
    if construction.voice == "passive":
        if not template.passive_en:
            raise ValueError(f"the verb {template.verb!r} has no passive")
        en = f"the {p_en}{place_en} {template.passive_en.format(agent=a_en + agent_en)}"
        by = _with_clause(f"von {noun_phrase(a_de, a_g, 'dat')}", a_g, agent_de)
        subject = _with_clause(noun_phrase(p_de, p_g, "nom"), p_g, place_de)
        return en, subject, "wurde", _contract(template.passive_rest.format(agent=by))
    en = f"the {a_en}{agent_en} {template.en.format(place=p_en + place_en)}"
    subject = _with_clause(noun_phrase(a_de, a_g, "nom"), a_g, agent_de)
    place_phrase = _with_clause(noun_phrase(p_de, p_g, template.case), p_g, place_de)
    return en, subject, template.verb, _contract(template.rest.format(place=place_phrase))


def _tidy(text: str) -> str:
    """Commas where a relative clause meets another comma or the end, no space before a comma."""
    text = text.replace(" ,", ",")
    while ",," in text or ",." in text:
        text = text.replace(",,", ",").replace(",.", ".")
    return text


def _capital(text: str) -> str:
    return text[0].upper() + text[1:]


def make_item(agent, place, adjective, template: Template, order: str, construction: Construction = BASE,
              clause=None) -> Item:
    """agent, place: (English, German, gender); adjective: (English, German), from AGENT_ or PLACE_ADJECTIVES;
    clause: (person from PEOPLE, verb from AGENT_ or PLACE_CLAUSE_VERBS) when the construction has a relative
    clause."""
    (a_en, a_de, a_g), (p_en, p_de, p_g), (adj_en, adj_de) = agent, place, adjective
    agent_is_referent = adjective in AGENT_ADJECTIVES
    gender = a_g if agent_is_referent else p_g
    main_en, subject, finite, rest = _main_clause(agent, place, template, construction, clause)
    because_en = f"because it was {construction.degree} {adj_en}"
    en = f"{_capital(because_en)}, {main_en}." if construction.because_first else f"{_capital(main_en)} {because_en}."
    because = f"weil {PRONOUN[gender]} {DEGREES[construction.degree]} {adj_de} war"
    if order == "pronoun_first" or construction.because_first:
        de = f"{_capital(because)}, {finite} {subject} {rest}."
    else:
        de = f"{_capital(subject)} {finite} {rest}, {because}."
    ref, other = ((a_en, a_de), (p_en, p_de)) if agent_is_referent else ((p_en, p_de), (a_en, a_de))
    return Item(en=en, de=_tidy(de), referent_en=ref[0], referent_de=ref[1], pronoun=PRONOUN[gender],
                other_en=other[0], other_de=other[1], construction=construction)


def held_out_pairs(seed: int) -> tuple[list, list]:
    """(valid pairs, test pairs) of (agent index, place index): disjoint, never in training, nouns of differing
    gender; every noun keeps training pairs. The posts' pair (animal, street) is always a test pair."""
    rng = random.Random(seed)
    candidates = _differing_pairs()
    rng.shuffle(candidates)
    posts = (_index(AGENTS, "animal"), _index(PLACES, "street"))
    candidates.remove(posts)
    chosen = [posts] + candidates[:35]  # 36 of 324 pairs; each noun loses at most a few of its 18
    return chosen[18:], chosen[:18]


def _differing_pairs() -> list:
    return [(a, p) for a in range(len(AGENTS)) for p in range(len(PLACES)) if AGENTS[a][2] != PLACES[p][2]]


def _index(nouns, english: str) -> int:
    return next(i for i, noun in enumerate(nouns) if noun[0] == english)


def _sample(rng: random.Random, pairs: list, constructions: list, order: str) -> Item:
    a, p = rng.choice(pairs)
    construction = rng.choice(constructions)
    adjective = rng.choice(AGENT_ADJECTIVES + PLACE_ADJECTIVES)
    verbs = [t for t in TEMPLATES if t.passive_en] if construction.voice == "passive" else TEMPLATES
    clause_verbs = AGENT_CLAUSE_VERBS if construction.relative == "agent" else PLACE_CLAUSE_VERBS
    clause = (rng.choice(PEOPLE), rng.choice(clause_verbs))
    return make_item(AGENTS[a], PLACES[p], adjective, rng.choice(verbs), order, construction, clause)


def _distinct(rng: random.Random, pairs: list, constructions: list, order: str, size: int) -> list[Item]:
    """Up to `size` different sentences (each split is far smaller than its sentences: 36 pairs x 20
    adjectives x 24 constructions x ... verbs and clauses)."""
    items = {}
    for _ in range(20 * size):
        if len(items) >= size:
            break
        item = _sample(rng, pairs, constructions, order)
        items.setdefault(item.en, item)
    return list(items.values())


@functools.lru_cache(maxsize=4)  # train and valid come from one generation; callers must not mutate it
def coreference_items(n_train: int, n_valid: int, n_test: int, seed: int = 1234,
                      order: str = "source") -> dict[str, list[Item]]:
    """{"train", "valid", "test", "held_out"} lists of Items (n_test of them in held_out). Train: TRAINED
    constructions on every pair but held_out_pairs, drawn with replacement; valid and test: TRAINED constructions
    on held_out_pairs; held_out: HELD_OUT constructions on any pair of differing gender; these three without
    replacement. The posts' sentence opens test."""
    if order not in ORDERS:
        raise ValueError(f"order={order!r} must be one of {', '.join(ORDERS)}")
    rng = random.Random(seed)
    valid_pairs, test_pairs = held_out_pairs(seed)
    held = set(valid_pairs) | set(test_pairs)
    train_pairs = [(a, p) for a in range(len(AGENTS)) for p in range(len(PLACES)) if (a, p) not in held]
    posts = make_item(AGENTS[_index(AGENTS, "animal")], PLACES[_index(PLACES, "street")], AGENT_ADJECTIVES[0],
                      TEMPLATES[0], order)
    test = _distinct(random.Random(seed + 4), test_pairs, TRAINED, order, n_test)
    test = ([posts] + [item for item in test if item.en != posts.en])[:n_test]
    return {"train": [_sample(rng, train_pairs, TRAINED, order) for _ in range(n_train)],
            "valid": _distinct(random.Random(seed + 5), valid_pairs, TRAINED, order, n_valid),
            "test": test,
            "held_out": _distinct(random.Random(seed + 8), _differing_pairs(), HELD_OUT, order, n_test)}


def coreference_task(n_train: int, n_valid: int, n_test: int, seed: int = 1234, order: str = "source"):
    """As number_task: {"train": [(en, de)...], "valid": [...], "test": [...], "held_out": [...]}."""
    items = coreference_items(n_train, n_valid, n_test, seed, order)
    return {name: [(item.en, item.de) for item in split] for name, split in items.items()}
