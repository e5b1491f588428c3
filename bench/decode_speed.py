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
Same beam, same length limit a * |src| + b, <pad> and <s> never output. Every layout runs in each compute
type asked for (--compute-types for aiayn's native engine: float32, bfloat16, int8; --ct2-compute-types for
CTranslate2's: float32, int8, int8_float32), each in its own processes; each row gives the peak RSS of its
processes (the largest, MB = 2**20 bytes; a worker pool's workers counted apart).

Paper-base size (--paper-base DIR): the model of bench/paper_base.py (d_model 512, 6+6 layers, 16k
vocabulary, untrained), made at DIR once; both engines decode exactly --steps steps a sentence (min length =
max length), and each row also gives its share of the machine's peak: the products' FLOPs per second over
one large product's rate in the same dtype and threads, times the processes or workers side by side
(bench/paper_base.py).
--latency N: instead of throughput, one 20-word sentence at batch 1, N times; p50 and p95 in ms.
The search: by default aiayn's own (GNMT's length penalty; a sentence goes on while a live hypothesis could
still win), which takes more steps than CTranslate2's (length^alpha; a sentence ends at K finished
hypotheses). With --same-search aiayn runs CTranslate2's search (length_penalty_form hf, early_stopping), the
same work on both sides. Either way the table says on how many sentences the two engines' outputs are equal.

    python bench/decode_speed.py --model runs/multi30k_de_en --pair de-en --data-dir ../shared/data/multi30k \
        [--split test_2016_flickr] [--limit 400] [--beam 4] [--batch-sizes 64 1] [--token-budgets 1500]
        [--repeats 3] [--no-ct2] [--layouts NAME ...] [--same-search] [--compute-types float32 bfloat16 int8]
        [--ct2-compute-types float32 int8 int8_float32]
    python bench/decode_speed.py --paper-base runs/paper-base --data-dir ../shared/data/multi30k \
        --limit 64 --batch-sizes 16 1 [--steps 32] [--latency 50]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paper_base  # noqa: E402  (bench/paper_base.py, beside this file)

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
def add_source_args(p: argparse.ArgumentParser, model_required: bool = True) -> None:
    """The model and the sentences, as load_sources reads them (bench/search_work.py takes the same)."""
    p.add_argument("--model", required=model_required)
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
    translator = Translator.from_pretrained(args.model, workers=args.workers, compile=args.compile,
                                            compute_type=args.compute_type)  # started, loaded
    search = dict(length_penalty_form="hf", early_stopping=True) if args.same_search else {}
    if args.steps:  # exactly args.steps steps a sentence, </s> the last
        search.update(min_length=args.steps - 1, max_output_len=args.steps)
    translator.translate(sources[:8], beam=args.beam, **search)  # warm-up
    if args.latency:
        return latency_runs(lambda: translator.translate([LATENCY_SENTENCE], beam=args.beam, **search), args)
    wait_for_start(args)
    start = time.perf_counter()
    results = translator.translate(sources, beam=args.beam, batch_size=args.batch_size,
                                   max_tokens=args.max_tokens or None, **search)
    seconds = time.perf_counter() - start
    translator.close()
    return {"start": start, "seconds": seconds, "sentences": len(sources),
            "tokens": sum(len(r.tokens) + 1 for r in results),  # + </s>
            "outputs": [r.tokens for r in results], "rss_mb": peak_rss_mb()}


# A 20-word sentence of the German side's kind (not from Multi30k: the latency is of any sentence this long)
LATENCY_SENTENCE = ("Ein älterer Mann mit einem roten Hut sitzt am Abend auf einer Bank im Park und liest "
                    "seiner Enkelin eine lange Geschichte vor.")


def latency_runs(translate_one, args) -> dict:
    """translate_one() args.latency times -> the times in seconds (and the peak RSS)."""
    times = []
    for _ in range(args.latency):
        start = time.perf_counter()
        translate_one()
        times.append(time.perf_counter() - start)
    return {"latencies": times, "rss_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
    """The peak resident set of this process and, apart, of its largest child (a worker pool's): the larger."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, child) / 1024


def ct2_worker(args) -> dict:
    """Reads the exported model and pieces the parent prepared (no torch in this process)."""
    import ctranslate2

    job = json.loads(open(args.ct2_job, encoding="utf-8").read())
    pieces = shard(job["pieces"], args)
    translator = ctranslate2.Translator(job["model"], device="cpu", intra_threads=args.intra,
                                        inter_threads=args.inter, compute_type=args.compute_type)
    options = dict(beam_size=args.beam, length_penalty=job["alpha"], suppress_sequences=[["<pad>"], ["<s>"]],
                   max_decoding_length=job["limit"])
    if args.steps:  # args.steps tokens, args.steps steps, as aiayn
        options.update(min_decoding_length=args.steps, max_decoding_length=args.steps)
    translator.translate_batch(pieces[:8], **options)  # warm-up
    if args.latency:
        return latency_runs(lambda: translator.translate_batch([job["latency_pieces"]], **options), args)
    wait_for_start(args)
    start = time.perf_counter()
    batching = {"max_batch_size": args.max_tokens, "batch_type": "tokens"} if args.max_tokens else \
        {"max_batch_size": args.batch_size}
    results = translator.translate_batch(pieces, **batching, **options)
    return {"start": start, "seconds": time.perf_counter() - start, "sentences": len(pieces),
            "tokens": sum(len(r.hypotheses[0]) + 1 for r in results), "outputs": [r.hypotheses[0] for r in results],
            "rss_mb": peak_rss_mb()}


def export_job(args, path: str) -> None:
    """The CTranslate2 model and the source pieces (with </s>), made once, in a process that may load torch."""
    from aiayn.decoding.batches import encode_sources
    from aiayn.decoding.translator import Translator
    from aiayn.interop.ctranslate2 import to_ctranslate2

    translator = Translator.from_pretrained(args.model)
    tok, cfg = translator.tokenizer, translator.decode_cfg
    pieces = [tok.source_id_to_piece(s) for s in encode_sources(tok, load_sources(args) + [LATENCY_SENTENCE])]
    model = to_ctranslate2(translator.model_dir, tempfile.mkdtemp(prefix="aiayn-ct2-") + "/model")
    limit = int(max(map(len, pieces)) * cfg.max_len_a + cfg.max_len_b)
    job = {"model": str(model), "pieces": pieces[:-1], "latency_pieces": pieces[-1], "alpha": cfg.length_penalty,
           "limit": limit, "source_lengths": [len(p) for p in pieces[:-1]]}
    open(path, "w", encoding="utf-8").write(json.dumps(job))


# ---- the parent: layouts x compute types x batch sizes x repeats -------------------------------------
def worker_command(args, name: str, compute_type: str, batch: tuple[int, int], job: str) -> list[str]:
    batch_size, max_tokens = batch
    engine, settings = LAYOUTS[name]
    base = [sys.executable, __file__, "--worker", engine, "--model", args.model, "--pair", args.pair,
            "--split", args.split, "--limit", str(args.limit), "--beam", str(args.beam),
            "--batch-size", str(batch_size), "--max-tokens", str(max_tokens), "--shards", str(settings["procs"]),
            "--ct2-job", job, "--compute-type", compute_type, "--steps", str(args.steps),
            "--latency", str(args.latency)]
    if args.data_dir:
        base += ["--data-dir", args.data_dir]
    if engine == "aiayn":
        base += ["--threads", str(settings["threads"]), "--workers", str(settings.get("workers", 1))]
        base += ["--compile"] if settings.get("compile") else []
        base += ["--same-search"] if args.same_search else []
    else:
        base += ["--intra", str(settings["intra"]), "--inter", str(settings["inter"])]
    return base


def run_layout(args, name: str, compute_type: str, batch: tuple[int, int], job: str) -> dict:
    """batch: (sentences, source tokens) per batch, 0 tokens = no token budget."""
    procs = LAYOUTS[name][1]["procs"]
    barrier = Path(tempfile.mkdtemp(prefix="aiayn-bench-"))
    base = worker_command(args, name, compute_type, batch, job) + ["--barrier", str(barrier)]
    workers = [subprocess.Popen(base + ["--shard", str(i)], stdout=subprocess.PIPE, text=True) for i in range(procs)]
    while len(list(barrier.glob("ready-*"))) < procs and all(w.poll() is None for w in workers):
        time.sleep(0.01)
    (barrier / "go").touch()
    parts = [json.loads(w.communicate()[0].strip().splitlines()[-1]) for w in workers]
    shutil.rmtree(barrier, ignore_errors=True)
    rss = max(p["rss_mb"] for p in parts)
    if args.latency:
        return {"latencies": [t for p in parts for t in p["latencies"]], "rss_mb": rss}
    # processes run side by side: wall time from the first start to the last end (same clock: perf_counter
    # is CLOCK_MONOTONIC on Linux, shared by processes)
    seconds = max(p["start"] + p["seconds"] for p in parts) - min(p["start"] for p in parts)
    outputs = [None] * sum(p["sentences"] for p in parts)
    for i, p in enumerate(parts):  # worker i translated sentences i, i + procs, ...
        outputs[i::procs] = p["outputs"]
    return {"sent_s": sum(p["sentences"] for p in parts) / seconds, "tok_s": sum(p["tokens"] for p in parts) / seconds,
            "outputs": outputs, "seconds": seconds, "rss_mb": rss}


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} [{min(values):.1f}-{max(values):.1f}]"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


PEAK_DTYPE = {"float32": "float32", "bfloat16": "bfloat16", "int8": "int8", "int8_float32": "int8"}


def layout_threads(name: str) -> tuple[int, int]:
    """(side by side, threads each): a layout's processes, workers or inter_threads, and the threads of each.
    Its peak is that many products of that many threads (one-thread products side by side ran faster than
    one two-thread product)."""
    settings = LAYOUTS[name][1]
    apart = settings["procs"] * max(settings.get("workers", 1), settings.get("inter", 1))
    return apart, settings.get("threads", settings.get("intra", 1))


def peak_share(args, job: str, name: str, compute_type: str, seconds: list[float], peaks: dict) -> str:
    """The layout's products' FLOP/s over the machine's peak rate in its dtype and threads (paper-base only:
    there the steps are fixed, so the FLOPs are known)."""
    if not args.steps:
        return ""
    source_lengths = json.loads(Path(job).read_text())["source_lengths"]
    flops = paper_base.matmul_flops(args.model, source_lengths, args.steps, args.beam)
    apart, threads = layout_threads(name)
    key = (PEAK_DTYPE[compute_type], threads)
    if key not in peaks:
        peaks[key] = paper_base.peak_rate(*key)
    rate = flops / statistics.median(seconds)
    return f"   {rate / 1e9:6.1f} GFLOP/s = {100 * rate / (apart * peaks[key]):4.1f}% of peak"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_source_args(p, model_required=False)  # or --paper-base
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 1])
    p.add_argument("--token-budgets", type=int, nargs="*", default=[],
                   help="also batches of at most this many source tokens, padding included (fairseq's --max-tokens, "
                        "CTranslate2's batch_type tokens), at most 1024 sentences")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-ct2", action="store_true")
    p.add_argument("--layouts", nargs="+", choices=list(LAYOUTS), help="default: all")
    p.add_argument("--compute-types", nargs="+", default=["float32"], choices=["float32", "bfloat16", "int8"],
                   help="aiayn's native compute types, each layout in each (default: float32)")
    p.add_argument("--ct2-compute-types", nargs="+", default=["float32", "int8"],
                   help="CTranslate2's compute types, each layout in each (default: float32 int8)")
    p.add_argument("--same-search", action="store_true", help="aiayn runs CTranslate2's search: the length penalty "
                   "|Y|^alpha, a sentence done at K finished hypotheses (default: aiayn's own search)")
    p.add_argument("--paper-base", metavar="DIR", help="the paper-base model of bench/paper_base.py, made at DIR "
                   "when missing, instead of --model; decoding --steps steps a sentence")
    p.add_argument("--steps", type=int, default=0, help="exactly this many decoding steps a sentence, </s> the last "
                   "(default: 32 with --paper-base, else the engines' own stopping)")
    p.add_argument("--latency", type=int, default=0, help="instead of throughput: one 20-word sentence at batch 1, "
                   "this many times; p50 and p95")
    # worker options
    p.add_argument("--worker", choices=["aiayn", "ct2"], help=argparse.SUPPRESS)
    p.add_argument("--batch-size", type=int, default=64, help=argparse.SUPPRESS)
    p.add_argument("--max-tokens", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--compute-type", default="float32", help=argparse.SUPPRESS)
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
    if args.paper_base:
        args.model = str(paper_base.make_model(Path(args.paper_base), args.data_dir))
        args.steps = args.steps or 32
    if not args.model:
        p.error("give --model or --paper-base")
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


def rows(args, layouts: list[str]) -> list[tuple[str, str]]:
    """(layout, compute type) pairs: each layout in each compute type of its engine."""
    types = {"aiayn": args.compute_types, "ct2": args.ct2_compute_types}
    return [(name, ct) for name in layouts for ct in types[LAYOUTS[name][0]]]


def compare(args, layouts: list[str], job: str) -> None:
    """Every layout at every batch size, then aiayn's best against CTranslate2's."""
    common = ["--model", args.model, "--pair", args.pair, "--split", args.split, "--limit", str(args.limit)]
    subprocess.run([sys.executable, __file__, "--export-job", job, *common,  # the export loads torch: apart
                    *(["--data-dir", args.data_dir] if args.data_dir else [])], check=True)
    search = "CTranslate2's search on both sides" if args.same_search else \
        "aiayn's own search (GNMT penalty, no early stop)"
    steps = f"; {args.steps} decoding steps a sentence" if args.steps else ""
    print(f"{args.model}: {args.limit or 'all'} sentences of {args.split} ({args.pair}), beam {args.beam}, "
          f"{args.repeats} repeats; median [min-max]; {search}{steps}", flush=True)
    if args.latency:
        return compare_latency(args, layouts, job)
    best, outputs, peaks = {}, {}, {}
    batches = [(n, 0) for n in args.batch_sizes] + [(1024, n) for n in args.token_budgets]
    for batch in batches:
        label = f"batch {batch[0]:3d}" if not batch[1] else f"{batch[1]} tok"
        for name, ct in rows(args, layouts):
            engine = LAYOUTS[name][0]
            runs = [run_layout(args, name, ct, batch, job) for _ in range(args.repeats)]
            first = outputs.setdefault((engine, label), runs[0]["outputs"])  # the engine's first layout's outputs
            sent, tok = [r["sent_s"] for r in runs], [r["tok_s"] for r in runs]
            same = sum(x == y for x, y in zip(first, runs[0]["outputs"], strict=True))  # e.g. compiled vs eager
            share = peak_share(args, job, name, ct, [r["seconds"] for r in runs], peaks)
            print(f"{label:9s}  {name:26s} {ct:12s} sentences/s {summary(sent)}   target tokens/s {summary(tok)}"
                  f"   peak RSS {max(r['rss_mb'] for r in runs):6.0f} MB{share}"
                  + (f"   outputs as the first {engine} row's: {same}/{len(first)}" if same < len(first) else ""),
                  flush=True)
            if statistics.median(sent) > best.get((engine, label), (0, ""))[0]:
                best[engine, label] = (statistics.median(sent), f"{name}, {ct}")
    for label in dict.fromkeys(label for _, label in best):
        if ("aiayn", label) in best and ("ct2", label) in best:
            (a, a_name), (c, c_name) = best["aiayn", label], best["ct2", label]
            print(f"{label}: aiayn's best ({a_name}) / CTranslate2's best ({c_name}) = {a / c:.2f}x")


def compare_latency(args, layouts: list[str], job: str) -> None:
    """One sentence at a time, args.latency times per layout (one process each): p50, p95 in ms."""
    best = {}
    for name, ct in rows(args, layouts):
        if LAYOUTS[name][1]["procs"] > 1:
            continue  # one sentence: one process
        run = run_layout(args, name, ct, (1, 0), job)
        times = [1000 * t for t in run["latencies"]]
        p50, p95 = percentile(times, 0.5), percentile(times, 0.95)
        print(f"latency  {name:26s} {ct:12s} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   (n={len(times)}, "
              f"peak RSS {run['rss_mb']:.0f} MB)", flush=True)
        engine = LAYOUTS[name][0]
        if p50 < best.get(engine, (float("inf"), ""))[0]:
            best[engine] = (p50, f"{name}, {ct}")
    if "aiayn" in best and "ct2" in best:
        print(f"latency p50: CTranslate2's best ({best['ct2'][1]}) / aiayn's best ({best['aiayn'][1]}) = "
              f"{best['ct2'][0] / best['aiayn'][0]:.2f}x (above 1: aiayn is faster)")


if __name__ == "__main__":
    main()
