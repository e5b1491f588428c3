"""Does the model resolve "it"? On held-out sentences of the coreference task (aiayn/data/coreference.py):
the test split (training's constructions, noun pairs never seen in training), then constructions never seen
in training (the held_out split):

  pronoun accuracy X                the German pronoun after "weil" in the model's output is the referent's
  it->referent share Y              the best head of any kind: how often its largest weight is on the referent
  encoder it->referent share Z      the best encoder self-attention head from "it" (the posts' picture)
  held-out constructions: pronoun accuracy X2, encoder it->referent share Z2
                                    the same two on the held-out constructions (Z2: their best encoder head)

Heads are read teacher-forced on the reference, at word level (subword pieces merged): encoder self-attention
from "it" and cross-attention from the step that writes the pronoun hit when their largest weight is on the
referent's English noun; decoder self-attention from that step hits on the referent's German article or noun
(a key the step cannot see, as when the pronoun comes first, is a miss). Then a table of every head's share
on each set; the share of whole translations equal to the reference; the pronoun accuracy and exact share of
each held-out construction; and the pronoun accuracy on English of the task's words in patterns the generator
never makes (beyond_generator).

    python bench/coreference.py --model DIR [--n 500]
"""

import argparse
import random
import sys

import numpy as np

KINDS = ("encoder_self", "cross", "decoder_self")


def word_index(words: list[str], word: str) -> int:
    """Index of the first word equal to `word`, ignoring case and trailing punctuation; -1 when absent."""
    word = word.lower()
    return next((i for i, w in enumerate(words) if w.rstrip(".,").lower() == word), -1)


def pronoun_of(text: str) -> str:
    """The word after "weil" (the subordinate clause's subject), lowercased; "" when there is none."""
    words = [w.rstrip(".,").lower() for w in text.split()]
    return words[words.index("weil") + 1] if "weil" in words[:-1] else ""


def pronoun_accuracy(outputs: list[str], pronouns: list[str]) -> float:
    return float(np.mean([pronoun_of(out) == want for out, want in zip(outputs, pronouns)]))


def argmax_hits(rows: list[np.ndarray], targets: list[set[int]]) -> np.ndarray:
    """rows: per sentence (L, H, K) attention weights of one query; targets: per sentence the key indices that
    count as the referent. Returns (L, H): the fraction of sentences whose largest weight is on a target."""
    hits = [np.isin(row.argmax(-1), sorted(target)) for row, target in zip(rows, targets)]
    return np.mean(hits, axis=0)


def best_head(shares: np.ndarray) -> tuple[int, int, float]:
    """(layer, head, share) of the head with the largest share (0-based)."""
    layer, head = np.unravel_index(int(shares.argmax()), shares.shape)
    return int(layer), int(head), float(shares[layer, head])


def sentence_rows(maps, item) -> dict:
    """Per kind: (row (L, H, K), target key indices) for one sentence's word-level maps."""
    src, tgt, tgt_in = maps.source_tokens, maps.target_tokens, maps.target_input_tokens
    it, referent = word_index(src, "it"), word_index(src, item.referent_en)
    step = word_index(tgt, "weil") + 1  # the decoder step whose output is the pronoun
    noun = word_index(tgt_in, item.referent_de)
    assert min(it, referent, step - 1, noun) >= 0, (src, tgt, item)
    return {"encoder_self": (maps.maps["encoder_self"][:, :, it], {referent}),
            "cross": (maps.maps["cross"][:, :, step], {referent}),
            "decoder_self": (maps.maps["decoder_self"][:, :, step], {noun - 1, noun})}


def head_shares(all_rows: list[dict]) -> dict[str, np.ndarray]:
    return {kind: argmax_hits([r[kind][0] for r in all_rows], [r[kind][1] for r in all_rows]) for kind in KINDS}


def summary(accuracy: float, shares: dict[str, np.ndarray]) -> list[str]:
    """The three result lines."""
    best_any = max(best_head(s)[2] for s in shares.values())
    return [f"pronoun accuracy {accuracy:.3f}", f"it->referent share {best_any:.3f}",
            f"encoder it->referent share {best_head(shares['encoder_self'])[2]:.3f}"]


def held_out_line(accuracy: float, shares: dict[str, np.ndarray]) -> str:
    return (f"held-out constructions: pronoun accuracy {accuracy:.3f}, encoder it->referent share "
            f"{best_head(shares['encoder_self'])[2]:.3f}")


def exact_share(outputs: list[str], items) -> float:
    """How many translations equal the reference, whole."""
    return float(np.mean([out == item.de for out, item in zip(outputs, items)]))


def per_construction(outputs: list[str], items) -> list[str]:
    """Pronoun accuracy and exact share of each construction, worst pronoun accuracy first."""
    hits = {}
    for out, item in zip(outputs, items):
        hits.setdefault(item.construction.name, []).append((pronoun_of(out) == item.pronoun, out == item.de))
    ranked = sorted(hits.items(), key=lambda kv: (np.mean([h[0] for h in kv[1]]), kv[0]))
    return [f"{np.mean([h[0] for h in hits_]):.3f}  {np.mean([h[1] for h in hits_]):.3f}  ({len(hits_):>3})  {name}"
            for name, hits_ in ranked]


def beyond_generator(n: int, seed: int) -> dict[str, list[tuple[str, str]]]:
    """English of the task's words in patterns the generator never makes, n sentences each: {pattern: [(English,
    the German pronoun "it" needs)]}; the adjective decides the referent as in the task."""
    from aiayn.data import coreference as task

    rng = random.Random(seed)
    sets = {"relative clauses on both nouns": [], "the because-clause between subject and verb": [],
            "\"did not\" where training says \"didn't\"": []}
    pairs = [(a, p) for a in task.AGENTS for p in task.PLACES if a[2] != p[2]]
    verbs = [t for t in task.TEMPLATES if "didn't" in t.en]
    for _ in range(n):
        (agent, place), adjective = rng.choice(pairs), rng.choice(task.AGENT_ADJECTIVES + task.PLACE_ADJECTIVES)
        template, degree = rng.choice(task.TEMPLATES), rng.choice(list(task.DEGREES))
        pronoun = task.PRONOUN[agent[2] if adjective in task.AGENT_ADJECTIVES else place[2]]
        because = f"because it was {degree} {adjective[0]}"
        (person, other), verb, place_verb = rng.sample(task.PEOPLE, 2), rng.choice(task.AGENT_CLAUSE_VERBS), \
            rng.choice(task.PLACE_CLAUSE_VERBS)
        predicate = template.en.format(place=f"{place[0]} that the {other[0]} {place_verb[0]}")
        both = f"The {agent[0]} that the {person[0]} {verb[0]} {predicate} {because}."
        middle = f"The {agent[0]}, {because}, {template.en.format(place=place[0])}."
        spelled = rng.choice(verbs).en.replace("didn't", "did not").format(place=place[0])
        for name, english in zip(sets, (both, middle, f"The {agent[0]} {spelled} {because}.")):
            sets[name].append((english, pronoun))
    return sets


def table(shares: dict[str, np.ndarray]) -> list[str]:
    lines = ["kind          layer  " + "  ".join(f"head{h + 1}" for h in range(shares["cross"].shape[1]))]
    for kind in KINDS:
        for layer, row in enumerate(shares[kind]):
            lines.append(f"{kind:<13} {layer + 1:>5}  " + "  ".join(f"{v:5.3f}" for v in row))
    return lines


def _held_out(model_dir, n: int) -> dict:
    """The model's test and held_out splits, n sentences each."""
    from aiayn.checkpoint import load_config_file
    from aiayn.data.coreference import coreference_items

    data = load_config_file(model_dir).data
    if data.dataset != "coreference":
        print(f"{model_dir} was trained on data.dataset={data.dataset}, not coreference; give --model a "
              f"coreference model (configs/coreference.yaml)", file=sys.stderr)
        sys.exit(2)
    return coreference_items(data.synthetic_train, data.synthetic_valid, n, data.synthetic_seed,
                             data.coreference_order)


def _score(translator, items, overrides: dict) -> tuple[list[str], dict[str, np.ndarray]]:
    """(the model's translations, per kind (L, H) shares) of one set."""
    from aiayn.inspect.maps.capture import capture

    outputs = [t.text for t in translator.translate([it.en for it in items], **overrides)]
    rows = [sentence_rows(capture(translator, it.en, target=it.de, merge_words=True), it) for it in items]
    return outputs, head_shares(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a training output or model directory")
    parser.add_argument("--n", type=int, default=500, help="sentences of each held-out set (default 500)")
    parser.add_argument("--beam", type=int, default=None, help="beam for the translations (default: the model's)")
    args = parser.parse_args(argv)

    from aiayn.decoding.translator import Translator
    from aiayn.errors import AiaynError
    from aiayn.run_dir import resolve_model_dir

    try:
        model_dir = resolve_model_dir(args.model)
        splits = _held_out(model_dir, args.n)
        translator = Translator.from_pretrained(model_dir)
    except AiaynError as err:
        print(err, file=sys.stderr)
        return 2
    overrides = {} if args.beam is None else {"beam": args.beam}
    test, held = splits["test"], splits["held_out"]
    outputs, shares = _score(translator, test, overrides)
    held_outputs, held_shares = _score(translator, held, overrides)
    print("\n".join(summary(pronoun_accuracy(outputs, [it.pronoun for it in test]), shares)))
    print(held_out_line(pronoun_accuracy(held_outputs, [it.pronoun for it in held]), held_shares))
    for name, items, kind_shares in (("test", test, shares), ("held-out construction", held, held_shares)):
        print(f"\n{len(items)} {name} sentences from {model_dir}; per head, how often the largest weight is on "
              f"the referent:")
        print("\n".join(table(kind_shares)))
    print(f"\nwhole translations equal to the reference: test {exact_share(outputs, test):.3f}, held-out "
          f"constructions {exact_share(held_outputs, held):.3f}")
    print("\nper held-out construction: pronoun accuracy, exact translations (sentences):")
    print("\n".join(per_construction(held_outputs, held)))
    print("\nEnglish outside the generator's constructions: pronoun accuracy (sentences):")
    for name, pairs in beyond_generator(args.n // 2, seed=5).items():
        texts = [t.text for t in translator.translate([english for english, _ in pairs], **overrides)]
        print(f"{pronoun_accuracy(texts, [pronoun for _, pronoun in pairs]):.3f}  ({len(pairs):>3})  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
