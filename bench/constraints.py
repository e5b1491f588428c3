"""Lexically constrained decoding on a test set: the BLEU change and the speed cost of constraints drawn from
the references.

The drawing is deterministic: the test set is translated without constraints; for each sentence the terms of
its reference that the output missed (single words of at least 4 letters, and two-word phrases of such words,
not in the output as whole words, writable by the model) are candidates, and one is drawn with a random
generator seeded by --seed and the sentence's number (a sentence whose output missed none gets none). The
constraints are written to --write FILE (the format of `aiayn translate --constraints`).

Then, in this process, translations with and without the constraints alternate --repeats times (the same
options, batches and thread count), and the table gives sentences/s of each (median [min-max]), sacreBLEU of
each (signatures), and how many constraint phrases appear in the constrained outputs.

    python bench/constraints.py --model MODEL --data-dir $D [--pair de-en] [--split test_2016_flickr]
        [--limit 1000] [--beam 4] [--batch-size 64] [--repeats 3] [--threads 2] [--write F]
"""

import argparse
import random
import re
import statistics
import time

WORD = re.compile(r"^[^\W\d_]{4,}$")


def draw_constraints(hyps: list[str], refs: list[str], writable, seed: int) -> list[list[str]]:
    """Per sentence [] or one term of the reference the hypothesis missed (1-2 words), drawn deterministically."""
    out = []
    for number, (hyp, ref) in enumerate(zip(hyps, refs)):
        have = set(hyp.split())
        words = [w.strip(".,;:!?\"'()") for w in ref.split()]
        singles = [w for w in words if WORD.match(w) and w not in have]
        pairs = [f"{a} {b}" for a, b in zip(words, words[1:]) if WORD.match(a) and WORD.match(b)
                 and (a not in have or b not in have)]
        terms = [t for t in dict.fromkeys(singles + pairs) if writable(t)]
        out.append([random.Random(seed * 100_003 + number).choice(terms)] if terms else [])
    return out


def _timed(translator, sources, options, constraints) -> tuple[float, list[str], list]:
    start = time.perf_counter()
    results = translator.translate(sources, options=options, constraints=constraints)
    return len(sources) / (time.perf_counter() - start), [r.text for r in results], results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--pair", default="de-en")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--write", help="write the drawn constraints here (one line per sentence, tab-separated)")
    args = p.parse_args()

    import torch

    from aiayn.decoding.options import DecodeOptions
    from aiayn.decoding.translator import Translator
    from aiayn.evaluation import evaluate_corpus, load_test_set

    torch.set_num_threads(args.threads)
    sources, refs = load_test_set(dataset="multi30k", pair=args.pair, split=args.split, data_dir=args.data_dir)
    sources, refs = sources[: args.limit], refs[: args.limit]
    translator = Translator.from_pretrained(args.model)
    options = translator.resolve(DecodeOptions(beam=args.beam, batch_size=args.batch_size))
    tok = translator.tokenizer
    _, plain, _ = _timed(translator, sources, options, None)  # also the warm-up
    constraints = draw_constraints(plain, refs, lambda t: tok.unk_id not in tok.encode_target([t])[0], args.seed)
    if args.write:
        with open(args.write, "w", encoding="utf-8") as f:
            f.writelines("\t".join(c) + "\n" for c in constraints)
    speeds = {"without": [], "with": []}
    for _ in range(args.repeats):
        s, plain, _ = _timed(translator, sources, options, None)
        speeds["without"].append(s)
        s, constrained, results = _timed(translator, sources, options, constraints)
        speeds["with"].append(s)
    n_terms = sum(len(c) for c in constraints)
    found = sum(term in r.text for c, r in zip(constraints, results) for term in c)
    print(f"{len(sources)} sentences, {sum(bool(c) for c in constraints)} with a constraint ({n_terms} terms, "
          f"{sum(len(t.split()) == 2 for c in constraints for t in c)} of two words); beam {options.beam}, batch "
          f"{args.batch_size}, {args.threads} threads, {args.repeats} repeats")
    print(f"constraint terms in the constrained outputs: {found}/{n_terms}; all met: "
          f"{sum(r.constraints_met for r in results)}/{len(results)}")
    for name, hyps in (("without", plain), ("with", constrained)):
        bleu = evaluate_corpus(hyps, refs, bootstrap=0)
        s = speeds[name]
        print(f"{name:8s} {statistics.median(s):7.2f} sent/s [{min(s):.2f}-{max(s):.2f}]  " +
              "  ".join(f"{x.name} {x.score:.2f}" for x in bleu))
    for x in evaluate_corpus(plain, refs, bootstrap=0):
        print(f"signature {x.name}: {x.signature}")
    print(f"speed ratio with/without: {statistics.median(speeds['with']) / statistics.median(speeds['without']):.3f}")


if __name__ == "__main__":
    main()
