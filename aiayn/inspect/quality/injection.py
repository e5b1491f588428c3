"""Hallucinations (and two other pathologies) injected into a model's own clean outputs, and natural ones
found by perturbing its sources, judged by its diagnostics: what the combined score is fitted on
(aiayn.inspect.quality.calibration, on validation) and what bench/diagnostics.py measures the signals on (on
validation and test alike).

Hallucinations, the kinds of Guerreiro et al. 2023 and Lee et al. 2019:
- perturbed: the source perturbed as in Lee et al. 2019 (one rare source word put at its start) and
  translated by the search; kept when the output's chrF against the unperturbed output is below
  HALLUCINATION_CHRF (perturbed outputs that stay close are left out); a second rare word where the first
  left the output alone;
- detached: the model's own clean output of another sentence given as this one's (fully detached), kept
  where the two outputs' chrF is below HALLUCINATION_CHRF;
- half detached: the clean output's first half, then the second half of another sentence's output
  (strongly detached: half of it has nothing to do with the source);
- source cut: the clean output given for the source's first half (sources of 4 words or more): its second
  half says what the source no longer does;
- oscillation: an n-gram (1-3 words) of the clean output written three times in a row in its place.
Others (not hallucinations): copy, the source itself as the output; cut short, the clean output's first
half (an omission). All but perturbed are judged by teacher forcing (diagnostics.forced_evidence).

Natural hallucinations (NATURAL): more minimal source perturbations whose outputs the search writes itself,
kept, like perturbed, when the output's chrF against the unperturbed output is below HALLUCINATION_CHRF.
Each keeps the source's words, in order, and adds or changes little (Lee et al. 2019 insert rare tokens;
Belinkov & Bisk 2018 and Raunak et al. 2021, character noise):
- rare first: one rare word at the start (perturbed's first try);
- several rare: five rare words at the start;
- rare pieces: a made-up word of three rare subword pieces at the start;
- misspelled: in two words of 4+ letters, two neighbouring letters swapped (Belinkov & Bisk's "swap");
- punctuation: one punctuation mark written three times at the start ("!!!").
"""

import random

from aiayn.inspect.quality.diagnostics import diagnose, forced_evidence, translate_diagnosed

HALLUCINATION_CHRF = 30.0  # chrF of an output against the source's own clean output, below: hallucinated
N_RARE = 50  # the perturbing words: the source vocabulary's last N_RARE ordinary words (its rarest merges)
TRIES = 2  # perturbations tried per sentence (another rare word where the previous left the output alone)
HALLUCINATIONS = ("perturbed", "detached", "half detached", "source cut", "oscillation")
OTHERS = ("copy", "cut short")
NATURAL = ("rare first", "several rare", "rare pieces", "misspelled", "punctuation")
PUNCTUATION = ("!", "?", ".", ",", "-", ":", ";", '"')


def rare_words(translator) -> list[str]:
    """The source vocabulary's last N_RARE pieces that are whole alphabetic words (without their ▁)."""
    words = [p for p in _source_pieces(translator) if p.startswith("▁") and len(p) > 2 and p[1:].isalpha()]
    return [p[1:] for p in words[-N_RARE:]]


def rare_pieces(translator) -> list[str]:
    """The source vocabulary's last N_RARE alphabetic pieces that continue a word (no ▁)."""
    return [p for p in _source_pieces(translator) if p.isalpha() and len(p) > 2][-N_RARE:]


def _source_pieces(translator) -> list[str]:
    tok = translator.tokenizer
    return tok.source_id_to_piece(list(range(tok.src_vocab_size)))


def chrf(hyp: str, ref: str) -> float:
    from sacrebleu.metrics import CHRF

    return CHRF().sentence_score(hyp, [ref]).score


def repeated(words: list[str], rng: random.Random) -> str:
    """An n-gram (n <= 3) of `words` written three times in its place."""
    n = rng.randint(1, min(3, len(words)))
    start = rng.randint(0, len(words) - n)
    gram = words[start: start + n]
    return " ".join(words[:start] + gram * 3 + words[start + n:])


def perturbed(translator, sources: list[str], clean, thresholds) -> list[dict]:
    """Lee et al.: a rare word put at the source's start; another where the first left the output alone."""
    rare, found, left = rare_words(translator), [], list(range(len(sources)))
    for attempt in range(TRIES if rare else 0):
        changed = [f"{rare[(i + attempt * 17) % len(rare)]} {sources[i]}" for i in left]
        outputs = translator.translate(changed)  # without maps: only the hits are diagnosed, below
        hit = [chrf(r.text, clean[i].text) < HALLUCINATION_CHRF for i, r in zip(left, outputs)]
        hits = [c for c, h in zip(changed, hit) if h]
        found += [r.diagnostics for r in translate_diagnosed(translator, hits, thresholds=thresholds)] if hits else []
        left = [i for i, h in zip(left, hit) if not h]
    return found


def _inserted(words: list[str], word: str, rng: random.Random) -> list[str]:
    """`word` put between two of `words` (after the first where there is only one)."""
    k = rng.randint(1, max(len(words) - 1, 1))
    return words[:k] + [word] + words[k:]


def _misspelled(words: list[str], rng: random.Random, n: int = 2) -> list[str]:
    """In n words of 4+ letters (fewer where there are fewer), two neighbouring letters swapped; each word's
    first and last letters kept."""
    long = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
    words = list(words)
    for i in rng.sample(long, min(n, len(long))):
        w = words[i]
        j = rng.randrange(1, len(w) - 2)  # swap w[j] and w[j + 1], inside the word
        words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2:]
    return words


def perturb(kind: str, source: str, rng: random.Random, *, rare: list[str], pieces: list[str]) -> str:
    """`source` perturbed by one NATURAL kind (see the module's docstring); rare: the rare words
    (rare_words), pieces: the rare subword pieces (rare_pieces); a small vocabulary's fewer than five (or
    three) are all taken. The rare kinds need one of them at least (perturbable)."""
    words = source.split()
    changed = {
        "rare first": lambda: [rng.choice(rare)] + words,
        "several rare": lambda: rng.sample(rare, min(5, len(rare))) + words,
        "rare pieces": lambda: ["".join(rng.sample(pieces, min(3, len(pieces))))] + words,
        "misspelled": lambda: _misspelled(words, rng),
        "punctuation": lambda: [rng.choice(PUNCTUATION) * 3] + words,
    }[kind]()
    return " ".join(changed)


def perturbable(kind: str, *, rare: list[str], pieces: list[str]) -> bool:
    """Whether the vocabulary has what `kind` puts into a source (a tiny one may have no rare whole words)."""
    return bool({"rare first": rare, "several rare": rare, "rare pieces": pieces}.get(kind, True))


def natural(translator, sources: list[str], clean_texts: list[str], kind: str,
            seed: int) -> list[tuple[str, str, float]]:
    """Each source perturbed by `kind` and translated by the search (without maps): (the perturbed source, its
    output, the chrF of that output against the source's own clean output `clean_texts[i]`), one per source;
    none where the vocabulary lacks what the kind inserts (perturbable). Below HALLUCINATION_CHRF: a natural
    hallucination."""
    rng = random.Random(f"{kind} {seed}")
    rare, pieces = rare_words(translator), rare_pieces(translator)
    if not perturbable(kind, rare=rare, pieces=pieces):
        return []
    changed = [perturb(kind, s, rng, rare=rare, pieces=pieces) for s in sources]
    outputs = translator.translate(changed)
    return [(c, r.text, chrf(r.text, clean)) for c, r, clean in zip(changed, outputs, clean_texts)]


def natural_search(translator, sources: list[str], clean_texts: list[str], thresholds, seed: int,
                   close_per_kind: int) -> tuple[dict[str, list[tuple[int, dict]]], list[tuple[int, dict]]]:
    """Each source perturbed by each NATURAL kind and translated (natural) -> (per kind, its natural
    hallucinations; the first close_per_kind perturbed outputs of each kind that stayed close, chrF at or above
    HALLUCINATION_CHRF), each as (the index of its source in `sources`, its diagnostics under `thresholds`).
    Only these are translated again with maps."""
    def diagnosed(picked: list[tuple[int, str]]):
        results = translate_diagnosed(translator, [s for _, s in picked], thresholds=thresholds) if picked else []
        return [(i, r.diagnostics) for (i, _), r in zip(picked, results)]

    found, close = {}, []
    for kind in NATURAL:
        outputs = list(enumerate(natural(translator, sources, clean_texts, kind, seed)))
        found[kind] = diagnosed([(i, s) for i, (s, _, c) in outputs if c < HALLUCINATION_CHRF])
        close += diagnosed([(i, s) for i, (s, _, c) in outputs if c >= HALLUCINATION_CHRF][:close_per_kind])
    return found, close


def forced_pairs(sources: list[str], clean_texts: list[str], seed: int) -> dict[str, list[tuple[str, str]]]:
    """Per kind judged by teacher forcing (every kind but perturbed, which the search writes), its (source,
    output) pairs made from `sources` and their clean outputs `clean_texts` (the model's own, one per source;
    two or more)."""
    rng = random.Random(seed)
    n = len(sources)
    words = [t.split() for t in clean_texts]
    other = [(i + 1 + rng.randrange(n - 1)) % n for i in range(n)]  # another sentence, never this one
    kept = [i for i in range(n) if words[i]]
    oscillations = [(i, repeated(words[i], rng)) for i in kept]  # drawn after `other`, whatever the kinds asked
    return {
        "detached": [(sources[i], clean_texts[other[i]]) for i in kept if clean_texts[other[i]].strip() and
                     chrf(clean_texts[other[i]], clean_texts[i]) < HALLUCINATION_CHRF],
        "half detached": [(sources[i], " ".join(words[i][: len(words[i]) // 2] +
                                                words[other[i]][len(words[other[i]]) // 2:]))
                          for i in kept if len(words[i]) >= 4 and len(words[other[i]]) >= 4],
        "source cut": [(" ".join(sources[i].split()[: len(sources[i].split()) // 2]), clean_texts[i])
                       for i in kept if len(sources[i].split()) >= 4],
        "oscillation": [(sources[i], text) for i, text in oscillations],
        "copy": [(s, s) for s in sources if s.strip()],
        "cut short": [(sources[i], " ".join(words[i][: len(words[i]) // 2])) for i in kept if len(words[i]) >= 4],
    }


def injected(translator, sources: list[str], clean, thresholds, seed: int,
             kinds: tuple[str, ...] = HALLUCINATIONS + OTHERS) -> dict:
    """Per kind of `kinds`, the diagnostics (under `thresholds`) of its outputs injected into `sources`'
    clean Translations (`clean`, one per source, the model's own; two or more)."""
    pairs = forced_pairs(sources, [c.text for c in clean], seed)

    def made(kind):
        if kind == "perturbed":
            return perturbed(translator, sources, clean, thresholds)
        return [diagnose(forced_evidence(translator, s, o), thresholds) for s, o in pairs[kind]]

    return {kind: made(kind) for kind in kinds}
