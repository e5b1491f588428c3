"""Hallucinations (and two other pathologies) injected into a model's own clean outputs, judged by its
diagnostics: what the combined score is fitted on (aiayn.inspect.quality.calibration, on validation) and
what bench/diagnostics.py measures the signals on (on validation and test alike).

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
"""

import random

from aiayn.inspect.quality.diagnostics import diagnose, forced_evidence, translate_diagnosed

HALLUCINATION_CHRF = 30.0  # chrF of an output against the source's own clean output, below: hallucinated
N_RARE = 50  # the perturbing words: the source vocabulary's last N_RARE ordinary words (its rarest merges)
TRIES = 2  # perturbations tried per sentence (another rare word where the previous left the output alone)
HALLUCINATIONS = ("perturbed", "detached", "half detached", "source cut", "oscillation")
OTHERS = ("copy", "cut short")


def rare_words(translator) -> list[str]:
    """The source vocabulary's last N_RARE pieces that are whole alphabetic words (without their ▁)."""
    tok = translator.tokenizer
    pieces = tok.source_id_to_piece(list(range(tok.src_vocab_size)))
    words = [p for p in pieces if p.startswith("▁") and len(p) > 2 and p[1:].isalpha()]
    return [p[1:] for p in words[-N_RARE:]]


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


def injected(translator, sources: list[str], clean, thresholds, seed: int,
             kinds: tuple[str, ...] = HALLUCINATIONS + OTHERS) -> dict:
    """Per kind of `kinds`, the diagnostics (under `thresholds`) of its outputs injected into `sources`'
    clean Translations (`clean`, one per source, the model's own; two or more)."""
    rng = random.Random(seed)

    def forced(pairs):
        return [diagnose(forced_evidence(translator, s, o), thresholds) for s, o in pairs]

    n = len(sources)
    words = [c.text.split() for c in clean]
    other = [(i + 1 + rng.randrange(n - 1)) % n for i in range(n)]  # another sentence, never this one
    kept = [i for i in range(n) if words[i]]
    made = {
        "perturbed": lambda: perturbed(translator, sources, clean, thresholds),
        "detached": lambda: forced([(sources[i], clean[other[i]].text) for i in kept
                                    if clean[other[i]].text.strip() and
                                    chrf(clean[other[i]].text, clean[i].text) < HALLUCINATION_CHRF]),
        "half detached": lambda: forced([(sources[i], " ".join(words[i][: len(words[i]) // 2] +
                                                               words[other[i]][len(words[other[i]]) // 2:]))
                                         for i in kept if len(words[i]) >= 4 and len(words[other[i]]) >= 4]),
        "source cut": lambda: forced([(" ".join(sources[i].split()[: len(sources[i].split()) // 2]), clean[i].text)
                                      for i in kept if len(sources[i].split()) >= 4]),
        # the rng is drawn in the kinds' order, so each kind's outputs do not depend on which others are asked
        "oscillation": lambda: forced([(sources[i], text) for i, text in oscillations]),
        "copy": lambda: forced([(s, s) for s in sources if s.strip()]),
        "cut short": lambda: forced([(sources[i], " ".join(words[i][: len(words[i]) // 2]))
                                     for i in kept if len(words[i]) >= 4]),
    }
    oscillations = [(i, repeated(words[i], rng)) for i in kept]
    return {kind: made[kind]() for kind in kinds}
