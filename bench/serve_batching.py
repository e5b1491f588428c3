"""`aiayn serve` with dynamic batching: N single-sentence clients against the offline batch
throughput of the same engine on the same sentences.

    python bench/serve_batching.py --model MODEL --engine native --data-dir $D [--pair de-en]
        [--split test_2016_flickr] [--limit 400] [--beam 4]
        [--concurrency 1 8 32] [--requests 300] [--seconds 60] [--workers 1] [--compile]

1. offline, in a process of its own: Translator.from_pretrained(MODEL, engine=...) with 1 torch thread (the
   server's --threads 1), Translator.translate(the --limit sentences, beam, batch_size=64): sentences/s (the
   reference: it sorts all the sentences by length, so its batches have little padding); and the
   same sentences in groups of C (the highest concurrency) in their order, one call each: about the best
   a server can do with C single-sentence clients, whose batches are whatever C sentences are in flight;
2. the server: `aiayn serve --engine ENGINE --threads 1` in its own process on 127.0.0.1; after a warm-up,
   for each concurrency C, C client threads send POST /api/translate {"text": one sentence, "beam": B,
   "attention": false} back to back, the sentences taken in turn from the same list, until --requests are
   answered (or --seconds pass): req/s answered 200, p50 / p95 latency, and the client process's CPU time
   per request. The load generator shares the 2 cores with the server, so it is kept light: the standard
   library's http.client, one keep-alive connection per thread (about 0.3 ms of CPU a request, where
   httpx's client took 2-11 ms at 32 threads).
The goals: req/s at the highest concurrency >= 0.7 x offline; its p95 latency < 4 x the
p50 latency at concurrency 1.
"""

import argparse
import http.client
import json
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from load_test import free_port, percentile, start_server


def load_sources(args) -> list[str]:
    from aiayn.data import multi30k
    from aiayn.data.corpus import read_parallel

    src_lang, _, tgt_lang = args.pair.partition("-")
    pairs = read_parallel(*multi30k.pair_paths(args.split, src_lang, tgt_lang, args.data_dir))
    return [s for s, _ in pairs][: args.limit]


def offline_worker(args) -> dict:
    """In its own process: the engine's batch throughput, as `aiayn translate` would decode the file."""
    import torch

    from aiayn.decoding.translator import Translator

    torch.set_num_threads(1)
    sources = load_sources(args)
    translator = Translator.from_pretrained(args.model, engine=args.engine, workers=args.workers,
                                            compile=args.compile)
    translator.translate(sources[:8], beam=args.beam)  # warm-up
    start = time.perf_counter()
    translator.translate(sources, beam=args.beam, batch_size=64)
    sorted_64 = time.perf_counter() - start
    start, size = time.perf_counter(), args.group
    for i in range(0, len(sources), size):
        translator.translate(sources[i: i + size], beam=args.beam, batch_size=64)
    return {"sentences": len(sources), "seconds": sorted_64, "grouped_seconds": time.perf_counter() - start}


def offline(args) -> tuple[float, float]:
    """-> sentences/s (batch_size 64, all sorted by length; in groups of the highest concurrency)."""
    command = [sys.executable, __file__, "--offline-worker", "--model", args.model, "--engine", args.engine,
               "--pair", args.pair, "--data-dir", args.data_dir, "--split", args.split, "--limit", str(args.limit),
               "--beam", str(args.beam), "--group", str(max(args.concurrency)), "--workers", str(args.workers),
               *(["--compile"] if args.compile else [])]
    result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    return result["sentences"] / result["seconds"], result["sentences"] / result["grouped_seconds"]


class Phase:
    """C clients share a budget of requests and a deadline, and take the sentences in turn."""

    def __init__(self, sources: list[str], beam: int, max_requests: int, seconds: float):
        self.sources, self.beam = sources, beam
        self.sent, self.max_requests, self.deadline = 0, max_requests, time.monotonic() + seconds
        self.results: list[tuple[int, float]] = []  # (status, seconds)
        self.lock = threading.Lock()

    def take(self) -> str | None:
        with self.lock:
            if self.sent >= self.max_requests or time.monotonic() > self.deadline:
                return None
            self.sent += 1
            return self.sources[self.sent % len(self.sources)]

    def client(self, port: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"content-type": "application/json"}
        while (text := self.take()) is not None:
            body = json.dumps({"text": text, "beam": self.beam, "attention": False})
            start = time.perf_counter()
            connection.request("POST", "/api/translate", body, headers)
            response = connection.getresponse()
            response.read()
            with self.lock:
                self.results.append((response.status, time.perf_counter() - start))
            if response.status == 503 and response.getheader("retry-after"):  # as a polite client does
                time.sleep(float(response.getheader("retry-after")))
        connection.close()

    def run(self, port: int, n_clients: int) -> tuple[float, float]:
        """-> (wall seconds, the client process's CPU seconds)."""
        cpu, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        threads = [threading.Thread(target=self.client, args=(port,)) for _ in range(n_clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter() - start, (after.ru_utime + after.ru_stime) - (cpu.ru_utime + cpu.ru_stime)


def measure(port: int, sources: list[str], args, concurrency: int) -> dict:
    phase = Phase(sources, args.beam, args.requests, args.seconds)
    seconds, client_cpu = phase.run(port, concurrency)
    ok = [t for status, t in phase.results if status == 200]
    return {"concurrency": concurrency, "requests": len(phase.results), "seconds": seconds,
            "statuses": dict(Counter(status for status, _ in phase.results)), "req_s": len(ok) / seconds,
            "p50_ms": percentile(ok, 0.5) * 1000, "p95_ms": percentile(ok, 0.95) * 1000,
            "client_cpu_ms": client_cpu / max(1, len(phase.results)) * 1000}


def little_bound(rows: list[dict]) -> str:
    """Closed-loop clients: latency = clients / throughput (Little's law), so p95 at C clients stays under
    4 x the single-request latency only if the server answers about C / (4 x that latency) req/s."""
    top, single = rows[-1], rows[0]
    needed = top["concurrency"] / (4 * single["p50_ms"] / 1000)
    return f"(Little's law: p95 < 4x needs about {needed:.0f} req/s at concurrency {top['concurrency']})"


def report(args, offline_rate: float, grouped_rate: float, rows: list[dict]) -> None:
    engine = args.engine + (", --compile" if args.compile else "")
    print(f"{args.model} ({engine}), {args.limit} sentences of {args.split} ({args.pair}), beam {args.beam}; "
          f"offline, 1 thread: Translator.translate(batch_size=64) {offline_rate:.1f} sentences/s, in groups of "
          f"{max(args.concurrency)} {grouped_rate:.1f} sentences/s")
    for row in rows:
        print(f"  concurrency {row['concurrency']:>3}: {row['requests']} requests in {row['seconds']:.1f} s "
              f"({', '.join(f'{k}: {v}' for k, v in sorted(row['statuses'].items()))}): {row['req_s']:.1f} req/s; "
              f"latency p50 {row['p50_ms']:.0f} ms, p95 {row['p95_ms']:.0f} ms; "
              f"client CPU {row['client_cpu_ms']:.1f} ms/request")
    top, single = rows[-1], rows[0]
    print(f"  server at concurrency {top['concurrency']} / offline: {top['req_s'] / offline_rate:.2f}x (goal >= 0.7x), "
          f"/ offline in groups of {max(args.concurrency)}: {top['req_s'] / grouped_rate:.2f}x; "
          f"p95 at concurrency {top['concurrency']} / p50 at concurrency {single['concurrency']}: "
          f"{top['p95_ms'] / single['p50_ms']:.1f}x (goal < 4x) {little_bound(rows)}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--engine", choices=["native", "ct2"], default="native")
    p.add_argument("--pair", default="de-en")
    p.add_argument("--data-dir", required=True, help="the Multi30k directory (task 1, raw)")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--limit", type=int, default=400, help="sentences (default: 400)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    p.add_argument("--requests", type=int, default=300, help="requests a phase at most (default: 300)")
    p.add_argument("--seconds", type=float, default=60, help="a phase at most this long (default: 60)")
    p.add_argument("--workers", type=int, default=1, help="--workers of the server and of the offline run: batches "
                   "side by side (default: 1)")
    p.add_argument("--compile", action="store_true", help="the server and the offline run with --compile: the "
                   "compiled decoding step (aiayn.decoding.compiled; native engine)")
    p.add_argument("--offline-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--group", type=int, default=32, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.offline_worker:
        print(json.dumps(offline_worker(args)))
        return

    offline_rate, grouped_rate = offline(args)
    sources = load_sources(args)
    port = free_port()
    server = start_server(Path(args.model), port, torch_threads=1, engine=args.engine, workers=args.workers,
                          compile=args.compile)
    try:
        warm = Phase(sources, args.beam, 40, 30)  # first requests are slower (allocations, caches)
        warm.run(port, 4)
        rows = [measure(port, sources, args, c) for c in args.concurrency]
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(args, offline_rate, grouped_rate, rows)


if __name__ == "__main__":
    main()
