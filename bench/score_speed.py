"""Scoring speed: aiayn's teacher-forced scoring (Translator.score, native engine) against CTranslate2's
Translator.score_batch on the same weights (the model's CTranslate2 export, MODEL/ct2/fp32), scoring the
references of a Multi30k split given their sources. Each (engine, threads) runs in a process of its own
(CTranslate2 is slower in a process that has loaded torch), `--repeats` times after one warm-up; the table
gives the median sentences/s and its spread (min-max), each engine at its best thread count, and the ratio.
The two engines' log-probs are compared too (largest difference of a sentence's sum).

    python bench/score_speed.py --model MODEL --data-dir ../shared/data/multi30k [--pair de-en]
        [--split test_2016_flickr] [--batch-size 64] [--threads 1 2] [--repeats 5]

Without --model, --untrained PRESET builds an untrained model of that preset (weights do not change the
work of a teacher-forced pass) with a vocabulary trained on the split's training data, in a temporary
directory: `--untrained multi30k --vocab-size 8000`.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def load_pairs(args) -> tuple[list[str], list[str]]:
    from aiayn.data import multi30k
    from aiayn.data.corpus import read_parallel

    src, tgt = args.pair.split("-")
    pairs = read_parallel(*multi30k.pair_paths(args.split, src, tgt, args.data_dir))
    return [s for s, _ in pairs], [t for _, t in pairs]


def worker(args) -> None:
    """One engine at one thread count: JSON {"seconds": [...], "log_probs": [...]} on stdout."""
    sources, targets = load_pairs(args)
    if args.engine == "ct2":
        import ctranslate2

        from aiayn.data.tokenizer import load_dir

        tok = load_dir(args.model)
        model = ctranslate2.Translator(str(Path(args.model) / "ct2" / "fp32"), intra_threads=args.threads[0])
        src = [tok.source_id_to_piece(s + [tok.eos_id]) for s in tok.encode_source(sources)]
        tgt = [tok.id_to_piece(t) for t in tok.encode_target(targets)]

        def run():
            return [sum(r.log_probs) for r in model.score_batch(src, tgt, max_batch_size=args.batch_size,
                                                                 max_input_length=0)]
    else:
        import torch

        from aiayn.decoding.translator import Translator

        torch.set_num_threads(args.threads[0])
        translator = Translator.from_pretrained(args.model)

        def run():
            return [s.log_prob for s in translator.score(sources, targets, batch_size=args.batch_size)]
    found = run()  # warm-up
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"seconds": seconds, "log_probs": found, "n": len(sources)}))


def untrained_model(args, out: Path) -> Path:
    from aiayn.checkpoint import save_checkpoint
    from aiayn.config import load_config
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.model import ModelConfig, build_model

    src, tgt = args.pair.split("-")
    train = argparse.Namespace(**{**vars(args), "split": "train"})
    s, t = load_pairs(train)
    tok = Tokenizer.train(s + t, vocab_size=args.vocab_size)
    cfg = load_config(None, [])
    cfg.model = ModelConfig.preset(args.untrained, src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size,
                                   pad_id=tok.pad_id)
    save_checkpoint(out, build_model(cfg.model), cfg, tok)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model")
    p.add_argument("--untrained", help="no --model: an untrained model of this preset")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--pair", default="de-en")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--engine", choices=["native", "ct2"], help=argparse.SUPPRESS)  # a worker process
    args = p.parse_args()
    if args.engine:
        return worker(args)
    with tempfile.TemporaryDirectory() as tmp:
        if args.model is None:
            args.model = str(untrained_model(args, Path(tmp) / "model"))
        from aiayn.decoding.translator import Translator

        Translator.from_pretrained(args.model, engine="ct2")  # makes or refreshes MODEL/ct2/fp32
        report(args, {(engine, threads): _run(args, engine, threads) for engine in ("native", "ct2")
                      for threads in args.threads})


def _run(args, engine: str, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--model", args.model, "--data-dir", args.data_dir, "--pair", args.pair,
           "--split", args.split, "--batch-size", str(args.batch_size), "--repeats", str(args.repeats),
           "--engine", engine, "--threads", str(threads)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{engine} with {threads} thread(s) failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(args, runs: dict) -> None:
    rates = {key: [r["n"] / s for s in r["seconds"]] for key, r in runs.items()}
    best = {engine: max((k for k in rates if k[0] == engine), key=lambda k: statistics.median(rates[k]))
            for engine in ("native", "ct2")}
    print(f"{args.split} {args.pair}, {runs[best['native']]['n']} pairs, batch {args.batch_size}, "
          f"{args.repeats} repeats: sentences/s, median [min-max]")
    for key, r in rates.items():
        mark = " (best)" if key in best.values() else ""
        print(f"  {key[0]:6s} {key[1]} thread(s): {statistics.median(r):8.1f} [{min(r):.1f}-{max(r):.1f}]{mark}")
    native, ct2 = (statistics.median(rates[best[e]]) for e in ("native", "ct2"))
    diff = max(abs(a - b) for a, b in zip(runs[best["native"]]["log_probs"], runs[best["ct2"]]["log_probs"]))
    print(f"aiayn / CTranslate2: {native / ct2:.2f}x; largest log_prob difference of a sentence: {diff:.2e}")


if __name__ == "__main__":
    main()
