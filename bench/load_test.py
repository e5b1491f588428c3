"""`aiayn serve` under load: the real server in its own process on loopback, clients on threads (httpx).

    python bench/load_test.py [--model DIR] [--concurrency 4] [--heavy-clients 8] [--requests 200]
        [--seconds 20] [--oversize 3] [--torch-threads N]

Phases, each stopped by --requests or --seconds, whichever comes first; a client answered 503 waits its
Retry-After:
1. ordinary: --concurrency clients send a short sentence (beam 4) back to back: req/s, p50/p95 latency;
2. heavy: --heavy-clients clients send the heaviest request the server takes (MAX_TEXT characters, cut
   to MAX_SOURCE_TOKENS subwords, beam MAX_BEAM) back to back, while one more client asks /api/health
   every 20 ms: health p50/p95/max, and the largest answer against its bound;
3. oversize: --oversize chunked uploads of 64 MiB without Content-Length: what the client got to send.
503 counts per phase; the server's RSS (VmRSS in /proc/PID/status) before phase 1 and after phase 3.
Without --model, a random tiny Transformer (the tests' `tiny` preset) is saved to a temporary directory.
"""

import argparse
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from aiayn.web.app import (
    MAX_BEAM,
    MAX_BODY,
    MAX_OUTPUT_TOKENS,
    MAX_RUNNING,
    MAX_SOURCE_TOKENS,
    MAX_WAITING,
    TIME_LIMIT_S,
    heaviest_text,
    max_response_bytes,
)

ORDINARY_TEXT = "three hundred forty five thousand twenty one"
UPLOAD, CHUNK = 64 * 2**20, 2**16


def tiny_model(root: Path) -> Path:
    """A random tiny Transformer with the number-task tokenizer, saved as tests/conftest.py does."""
    import torch

    from aiayn.checkpoint import save_checkpoint
    from aiayn.config import load_config
    from aiayn.data.synthetic import number_task
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.model import ModelConfig, build_model

    pairs = number_task(2000, 10, 10, seed=1)["train"]
    tokenizer = Tokenizer.train([s for p in pairs for s in p], vocab_size=128)
    cfg = load_config(None, [])
    cfg.model = ModelConfig.preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                   pad_id=tokenizer.pad_id, dropout=0.0)
    torch.manual_seed(0)
    save_checkpoint(root, build_model(cfg.model), cfg, tokenizer)
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def start_server(model: Path, port: int, torch_threads: int, engine: str = "native",
                 workers: int = 1, compile: bool = False) -> subprocess.Popen:
    server = subprocess.Popen([sys.executable, "-m", "aiayn", "serve", "--model", str(model), "--host", "127.0.0.1",
                               "--port", str(port), "--threads", str(torch_threads), "--engine", engine,
                               "--workers", str(workers), *(["--compile"] if compile else [])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wait_s = 300 if compile else 120  # --compile: tens of seconds before the server listens
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited: {server.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"the server did not answer /api/health within {wait_s} s")


class Phase:
    """Clients on threads share a budget of requests and a deadline; each result is (status, seconds, bytes)."""

    def __init__(self, max_requests: int, seconds: float):
        self.left, self.deadline = max_requests, time.monotonic() + seconds
        self.results: list[tuple[int, float, int]] = []
        self.lock = threading.Lock()

    def take(self) -> bool:
        with self.lock:
            if self.left <= 0 or time.monotonic() > self.deadline:
                return False
            self.left -= 1
            return True

    def client(self, url: str, payload: dict) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            while self.take():
                start = time.perf_counter()
                response = http.post("/api/translate", json=payload)
                with self.lock:
                    self.results.append((response.status_code, time.perf_counter() - start, len(response.content)))
                if response.status_code == 503 and "retry-after" in response.headers:  # as a polite client does
                    time.sleep(min(float(response.headers["retry-after"]), max(0.0, self.deadline - time.monotonic())))

    def run(self, url: str, payload: dict, n_clients: int) -> float:
        start = time.perf_counter()
        threads = [threading.Thread(target=self.client, args=(url, payload)) for _ in range(n_clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def statuses(results) -> str:
    return ", ".join(f"{status}: {n}" for status, n in sorted(Counter(r[0] for r in results).items()))


def ordinary_phase(url: str, args) -> None:
    phase = Phase(args.requests, args.seconds)
    seconds = phase.run(url, {"text": ORDINARY_TEXT, "beam": 4}, args.concurrency)
    ok = [r[1] for r in phase.results if r[0] == 200]
    print(f"ordinary: {args.concurrency} clients, {len(phase.results)} requests in {seconds:.1f} s "
          f"({statuses(phase.results)}): {len(ok) / seconds:.1f} req/s answered 200; "
          f"latency p50 {percentile(ok, 0.5) * 1000:.0f} ms, p95 {percentile(ok, 0.95) * 1000:.0f} ms")


def heavy_phase(url: str, args, text: str, bound: int) -> None:
    phase, health, stop = Phase(args.requests, args.seconds), [], threading.Event()

    def probe():
        with httpx.Client(base_url=url, timeout=30) as http:
            while not stop.is_set():
                start = time.perf_counter()
                http.get("/api/health").raise_for_status()
                health.append(time.perf_counter() - start)
                stop.wait(0.02)

    prober = threading.Thread(target=probe)
    prober.start()
    seconds = phase.run(url, {"text": text, "beam": MAX_BEAM}, args.heavy_clients)
    stop.set()
    prober.join()
    ok = [r for r in phase.results if r[0] == 200]
    print(f"heavy: {args.heavy_clients} clients, {len(phase.results)} requests in {seconds:.1f} s "
          f"({statuses(phase.results)}); text {len(text)} characters, beam {MAX_BEAM}; "
          f"latency p50 {percentile([r[1] for r in ok], 0.5):.2f} s, p95 {percentile([r[1] for r in ok], 0.95):.2f} s; "
          f"largest answer {max((r[2] for r in ok), default=0):,} bytes (bound {bound:,})")
    print(f"health while heavy: {len(health)} probes, p50 {percentile(health, 0.5) * 1000:.1f} ms, "
          f"p95 {percentile(health, 0.95) * 1000:.1f} ms, max {max(health) * 1000:.1f} ms")


def oversize_phase(url: str, n_uploads: int) -> None:
    outcomes, sent_most = [], 0
    for _ in range(n_uploads):
        sent = 0

        def body():
            nonlocal sent
            chunk = b"x" * CHUNK
            while sent < UPLOAD:
                sent += CHUNK
                yield chunk

        try:
            response = httpx.post(f"{url}/api/translate", content=body(), timeout=60,
                                  headers={"content-type": "application/json"})
            outcomes.append(str(response.status_code))
        except httpx.TransportError as err:  # answered and closed while the client was still sending
            outcomes.append(type(err).__name__)
        sent_most = max(sent_most, sent)
    print(f"oversize: {n_uploads} chunked uploads of {UPLOAD >> 20} MiB: {dict(Counter(outcomes))}; the client got "
          f"to send at most {sent_most / 2**20:.1f} MiB of one")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="checkpoint directory (default: a random tiny Transformer)")
    p.add_argument("--concurrency", type=int, default=4, help="clients of the ordinary phase (default: 4)")
    p.add_argument("--heavy-clients", type=int, default=8, help="clients of the heavy phase (default: 8)")
    p.add_argument("--requests", type=int, default=200, help="at most this many requests a phase (default: 200)")
    p.add_argument("--seconds", type=float, default=20, help="at most this long a phase (default: 20)")
    p.add_argument("--oversize", type=int, default=3, help="chunked 64 MiB uploads (default: 3)")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="the server's --threads (default: 1, serve's default; 0 = torch's own, one per core)")
    args = p.parse_args()

    from aiayn.decoding.translator import Translator

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(args.model) if args.model else tiny_model(Path(tmp) / "model")
        translator = Translator.from_pretrained(model)
        text, bound = heaviest_text(translator.tokenizer), max_response_bytes(translator)
        port = free_port()
        server = start_server(model, port, args.torch_threads)
        url = f"http://127.0.0.1:{port}"
        try:
            print(f"aiayn serve --model {args.model or 'tiny (random)'} on 127.0.0.1, pid {server.pid}, "
                  f"--threads {args.torch_threads}; limits: {MAX_RUNNING} running + {MAX_WAITING} "
                  f"waiting, {TIME_LIMIT_S:g} s, {MAX_SOURCE_TOKENS} source / {MAX_OUTPUT_TOKENS} output subwords, "
                  f"body {MAX_BODY} bytes")
            print(f"server RSS before: {rss_mb(server.pid):.0f} MB")
            ordinary_phase(url, args)
            heavy_phase(url, args, text, bound)
            oversize_phase(url, args.oversize)
            print(f"server RSS after: {rss_mb(server.pid):.0f} MB")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
