"""How much decoding work each beam-search rule does: decoder steps and rows x steps (one row = one
hypothesis extended by one token) for aiayn's own search, the hf length penalty alone, and CTranslate2's
search (hf penalty + early_stopping), at batch 64 and 1. A count, not a timing: the same on any machine.

    python bench/search_work.py --model runs/multi30k_de_en --pair de-en --data-dir ../shared/data/multi30k \
        [--split test_2016_flickr] [--limit 400] [--beam 4]
"""

import argparse

import torch
from decode_speed import add_source_args, load_sources  # the same sentences as the speed benchmark

from aiayn.decoding.translator import Translator

SEARCHES = {"aiayn's search (gnmt, no early stop)": {},
            "hf penalty, no early stop": {"length_penalty_form": "hf"},
            "CTranslate2's search (hf, early stop)": {"length_penalty_form": "hf", "early_stopping": True}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_source_args(p)
    args = p.parse_args()
    torch.set_num_threads(1)
    translator = Translator.from_pretrained(args.model)
    sources = load_sources(args)
    counts = {"steps": 0, "rows": 0}
    step = translator.model.decode_step

    def counted(tokens, state, return_attention=False):
        counts["steps"] += 1
        counts["rows"] += tokens.size(0)
        return step(tokens, state, return_attention)

    translator.model.decode_step = counted
    for name, search in SEARCHES.items():
        for batch_size in (64, 1):
            counts.update(steps=0, rows=0)
            out = translator.translate(sources, beam=args.beam, batch_size=batch_size, **search)
            print(f"{name:40s} batch {batch_size:2d}: decoder steps {counts['steps']:6d}, rows x steps "
                  f"{counts['rows']:7d}, output tokens {sum(len(r.tokens) + 1 for r in out)}", flush=True)


if __name__ == "__main__":
    main()
