"""Decoding speed, aiayn's native beam search vs CTranslate2 on the same weights, each engine at its own
best settings: every (engine, thread layout, batch size) runs in a process of its own (CTranslate2 is
slower in a process that has loaded torch), several times; the table gives the median and the spread
(min-max) of sentences/s and target tokens/s, and the ratio of aiayn's best layout to CTranslate2's best.

Layouts: aiayn with 1 and 2 torch threads; 2 processes of 1 thread each translating half of the
sentences at the same time; `Translator(workers=2)`, whose 2 worker processes of 1 thread each take the
batches of one call as they free up (aiayn.decoding.workers); the last two again with the decoding step
compiled (`Translator(compile=True)`, aiayn.decoding.compiled; compiling happens before the clock starts,
tens of seconds per process, and is not counted); CTranslate2 with intra_threads 1 and 2, and
inter_threads 2 x intra 1 (two batches at a time).
Same beam, same length limit a * |src| + b, <pad> and <s> never output.
The search: by default aiayn's own (GNMT's length penalty; a sentence goes on while a live hypothesis could
still win), which takes more steps than CTranslate2's (length^alpha; a sentence ends at K finished
hypotheses). With --same-search aiayn runs CTranslate2's search (length_penalty_form hf, early_stopping), the
same work on both sides. Either way the table says on how many sentences the two engines' outputs are equal.

    python bench/decode_speed.py --model runs/multi30k_de_en --pair de-en --data-dir ../shared/data/multi30k \
        [--split test_2016_flickr] [--limit 400] [--beam 4] [--batch-sizes 64 1] [--token-budgets 1500]
        [--repeats 3] [--no-ct2] [--layouts NAME ...] [--same-search]
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAYOUTS = {  # name -> (engine, settings)
    "aiayn 1 thread": ("aiayn", {"threads": 1, "procs": 1}),
    "aiayn 2 threads": ("aiayn", {"threads": 2, "procs": 1}),
    "aiayn 2 procs x 1 thread": ("aiayn", {"threads": 1, "procs": 2}),
    "aiayn 2 workers x 1 thread": ("aiayn", {"threads": 1, "procs": 1, "workers": 2}),
    "aiayn compiled 1 thread": ("aiayn", {"threads": 1, "procs": 1, "compile": True}),
    "aiayn compiled 2 workers": ("aiayn", {"threads": 1, "procs": 1, "workers": 2, "compile": True}),
    "ct2 intra 1": ("ct2", {"intra": 1, "inter": 1, "procs": 1}),
    "ct2 intra 2": ("ct2", {"intra": 2, "inter": 1, "procs": 1}),
    "ct2 inter 2 x intra 1": ("ct2", {"intra": 1, "inter": 2, "procs": 1}),
}


# ---- workers: one engine, one layout, in a process of their own ------------------------------------
def add_source_args(p: argparse.ArgumentParser) -> None:
    """The model and the sentences, as load_sources reads them (bench/search_work.py takes the same)."""
    p.add_argument("--model", required=True)
    p.add_argument("--pair", default="de-en")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--data-dir")
    p.add_argument("--limit", type=int, default=400, help="the first N sentences (0 = all)")
    p.add_argument("--beam", type=int, default=4)


def load_sources(args) -> list[str]:
    from aiayn.data import multi30k
    from aiayn.data.corpus import read_parallel

    src_lang, _, tgt_lang = args.pair.partition("-")
    pairs = read_parallel(*multi30k.pair_paths(args.split, src_lang, tgt_lang, args.data_dir))
    return [s for s, _ in pairs][: args.limit or None]


def shard(sources: list[str], args) -> list[str]:
    return sources[args.shard::args.shards]


def wait_for_start(args) -> None:
    """Workers of one layout start timing together: each says it is loaded and warmed up, then waits for
    the parent's go. Without it the 2-process layouts were measured from the first worker's start while the
    other was still loading (the window runs from the first start to the last end)."""
    if not args.barrier:
        return
    barrier = Path(args.barrier)
    (barrier / f"ready-{args.shard}").touch()
    while not (barrier / "go").exists():
        time.sleep(0.001)


def aiayn_worker(args) -> dict:
    import torch

    from aiayn.decoding.translator import Translator

    torch.set_num_threads(args.threads)
    sources = shard(load_sources(args), args)
    translator = Translator.from_pretrained(args.model, workers=args.workers, compile=args.compile)  # started, loaded
    translator.translate(sources[:8], beam=args.beam)  # warm-up
    wait_for_start(args)
    start = time.perf_counter()
    search = dict(length_penalty_form="hf", early_stopping=True) if args.same_search else {}
    results = translator.translate(sources, beam=args.beam, batch_size=args.batch_size,
                                   max_tokens=args.max_tokens or None, **search)
    seconds = time.perf_counter() - start
    translator.close()
    return {"start": start, "seconds": seconds, "sentences": len(sources),
            "tokens": sum(len(r.tokens) + 1 for r in results),  # + </s>
            "outputs": [r.tokens for r in results]}


def ct2_worker(args) -> dict:
    """Reads the exported model and pieces the parent prepared (no torch in this process)."""
    import ctranslate2

    job = json.loads(open(args.ct2_job, encoding="utf-8").read())
    pieces = shard(job["pieces"], args)
    translator = ctranslate2.Translator(job["model"], device="cpu", intra_threads=args.intra,
                                        inter_threads=args.inter)
    options = dict(beam_size=args.beam, length_penalty=job["alpha"], suppress_sequences=[["<pad>"], ["<s>"]])
    translator.translate_batch(pieces[:8], max_decoding_length=job["limit"], **options)  # warm-up
    wait_for_start(args)
    start = time.perf_counter()
    batching = {"max_batch_size": args.max_tokens, "batch_type": "tokens"} if args.max_tokens else \
        {"max_batch_size": args.batch_size}
    results = translator.translate_batch(pieces, max_decoding_length=job["limit"], **batching, **options)
    return {"start": start, "seconds": time.perf_counter() - start, "sentences": len(pieces),
            "tokens": sum(len(r.hypotheses[0]) + 1 for r in results), "outputs": [r.hypotheses[0] for r in results]}


def export_job(args, path: str) -> None:
    """The CTranslate2 model and the source pieces (with </s>), made once, in a process that may load torch."""
    from aiayn.decoding.batches import encode_sources
    from aiayn.decoding.translator import Translator
    from aiayn.interop.ctranslate2 import to_ctranslate2

    translator = Translator.from_pretrained(args.model)
    tok, cfg = translator.tokenizer, translator.decode_cfg
    pieces = [tok.source_id_to_piece(s) for s in encode_sources(tok, load_sources(args))]
    model = to_ctranslate2(translator.model_dir, tempfile.mkdtemp(prefix="aiayn-ct2-") + "/model")
    limit = int(max(map(len, pieces)) * cfg.max_len_a + cfg.max_len_b)
    job = {"model": str(model), "pieces": pieces, "alpha": cfg.length_penalty, "limit": limit}
    open(path, "w", encoding="utf-8").write(json.dumps(job))


# ---- the parent: layouts x batch sizes x repeats ----------------------------------------------------
def run_layout(args, name: str, batch: tuple[int, int], job: str) -> dict:
    """batch: (sentences, source tokens) per batch, 0 tokens = no token budget."""
    batch_size, max_tokens = batch
    engine, settings = LAYOUTS[name]
    procs = settings["procs"]
    base = [sys.executable, __file__, "--worker", engine, "--model", args.model, "--pair", args.pair,
            "--split", args.split, "--limit", str(args.limit), "--beam", str(args.beam),
            "--batch-size", str(batch_size), "--max-tokens", str(max_tokens), "--shards", str(procs),
            "--ct2-job", job]
    if args.data_dir:
        base += ["--data-dir", args.data_dir]
    if engine == "aiayn":
        base += ["--threads", str(settings["threads"]), "--workers", str(settings.get("workers", 1))]
        base += ["--compile"] if settings.get("compile") else []
        base += ["--same-search"] if args.same_search else []
    else:
        base += ["--intra", str(settings["intra"]), "--inter", str(settings["inter"])]
    barrier = Path(tempfile.mkdtemp(prefix="aiayn-bench-"))
    base += ["--barrier", str(barrier)]
    workers = [subprocess.Popen(base + ["--shard", str(i)], stdout=subprocess.PIPE, text=True) for i in range(procs)]
    while len(list(barrier.glob("ready-*"))) < procs and all(w.poll() is None for w in workers):
        time.sleep(0.01)
    (barrier / "go").touch()
    parts = [json.loads(w.communicate()[0].strip().splitlines()[-1]) for w in workers]
    shutil.rmtree(barrier, ignore_errors=True)
    # processes run side by side: wall time from the first start to the last end (same clock: perf_counter
    # is CLOCK_MONOTONIC on Linux, shared by processes)
    seconds = max(p["start"] + p["seconds"] for p in parts) - min(p["start"] for p in parts)
    outputs = [None] * sum(p["sentences"] for p in parts)
    for i, p in enumerate(parts):  # worker i translated sentences i, i + procs, ...
        outputs[i::procs] = p["outputs"]
    return {"sent_s": sum(p["sentences"] for p in parts) / seconds, "tok_s": sum(p["tokens"] for p in parts) / seconds,
            "outputs": outputs}


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} [{min(values):.1f}-{max(values):.1f}]"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_source_args(p)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 1])
    p.add_argument("--token-budgets", type=int, nargs="*", default=[],
                   help="also batches of at most this many source tokens, padding included (fairseq's --max-tokens, "
                        "CTranslate2's batch_type tokens), at most 1024 sentences")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-ct2", action="store_true")
    p.add_argument("--layouts", nargs="+", choices=list(LAYOUTS), help="default: all")
    p.add_argument("--same-search", action="store_true", help="aiayn runs CTranslate2's search: the length penalty "
                   "|Y|^alpha, a sentence done at K finished hypotheses (default: aiayn's own search)")
    # worker options
    p.add_argument("--worker", choices=["aiayn", "ct2"], help=argparse.SUPPRESS)
    p.add_argument("--batch-size", type=int, default=64, help=argparse.SUPPRESS)
    p.add_argument("--max-tokens", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--intra", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--inter", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--shards", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--ct2-job", default="", help=argparse.SUPPRESS)
    p.add_argument("--barrier", default="", help=argparse.SUPPRESS)
    p.add_argument("--export-job", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps((aiayn_worker if args.worker == "aiayn" else ct2_worker)(args)))
        return
    if args.export_job:
        export_job(args, args.export_job)
        return
    layouts = args.layouts or [n for n in LAYOUTS if not (args.no_ct2 and LAYOUTS[n][0] == "ct2")]
    job = tempfile.mktemp(prefix="aiayn-ct2-job-", suffix=".json")
    try:
        compare(args, layouts, job)
    finally:  # the exported model and the job: each run left them in /tmp (40 of them, seen)
        if Path(job).exists():
            try:
                shutil.rmtree(Path(json.loads(Path(job).read_text())["model"]).parent, ignore_errors=True)
            except (ValueError, KeyError):  # an export that died while writing the job: nothing to find
                pass
            Path(job).unlink()


def compare(args, layouts: list[str], job: str) -> None:
    """Every layout at every batch size, then aiayn's best against CTranslate2's."""
    if any(LAYOUTS[n][0] == "ct2" for n in layouts):  # the export loads torch: in a process of its own
        common = ["--model", args.model, "--pair", args.pair, "--split", args.split, "--limit", str(args.limit)]
        subprocess.run([sys.executable, __file__, "--export-job", job, *common,
                        *(["--data-dir", args.data_dir] if args.data_dir else [])], check=True)
    search = "CTranslate2's search on both sides" if args.same_search else \
        "aiayn's own search (GNMT penalty, no early stop)"
    print(f"{args.model}: {args.limit or 'all'} sentences of {args.split} ({args.pair}), beam {args.beam}, "
          f"{args.repeats} repeats; median [min-max]; {search}", flush=True)
    best, outputs = {}, {}
    batches = [(n, 0) for n in args.batch_sizes] + [(1024, n) for n in args.token_budgets]
    for batch in batches:
        label = f"batch {batch[0]:3d}" if not batch[1] else f"{batch[1]} tok"
        for name in layouts:
            engine = LAYOUTS[name][0]
            runs = [run_layout(args, name, batch, job) for _ in range(args.repeats)]
            first = outputs.setdefault((engine, label), runs[0]["outputs"])  # the engine's first layout's outputs
            sent, tok = [r["sent_s"] for r in runs], [r["tok_s"] for r in runs]
            same = sum(x == y for x, y in zip(first, runs[0]["outputs"], strict=True))  # e.g. compiled vs eager
            print(f"{label:9s}  {name:26s} sentences/s {summary(sent)}   target tokens/s {summary(tok)}"
                  + (f"   outputs as the first {engine} layout's: {same}/{len(first)}" if same < len(first) else ""),
                  flush=True)
            if statistics.median(sent) > best.get((engine, label), (0, ""))[0]:
                best[engine, label] = (statistics.median(sent), name)
    for label in dict.fromkeys(label for _, label in best):
        if ("aiayn", label) in best and ("ct2", label) in best:
            (a, a_name), (c, c_name) = best["aiayn", label], best["ct2", label]
            same = sum(x == y for x, y in zip(outputs["aiayn", label], outputs["ct2", label], strict=True))
            print(f"{label}: aiayn's best ({a_name}) / CTranslate2's best ({c_name}) = {a / c:.2f}x; "
                  f"outputs equal on {same} of {len(outputs['ct2', label])} sentences")


if __name__ == "__main__":
    main()
