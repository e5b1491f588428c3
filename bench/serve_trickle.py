"""`aiayn serve` against slow clients: N connections that trickle one header byte every few seconds and
never finish their request, while one more client asks /api/health on a new connection every 50 ms.

    python bench/serve_trickle.py [--model DIR] [--connections 1000] [--ulimit 1024] [--every 5]
        [--seconds 30] [--spread 100] [--no-peer]

The server runs in its own process with its open-file limit (RLIMIT_NOFILE) set to --ulimit; its log
(stdout and stderr) goes to a file whose lines are counted. Phases: idle (no trickle), then the trickle
from one client address, then from --spread addresses (127.0.0.10 and up: loopback, so each is a client of
its own; the health client is 127.0.0.2). A trickling connection the server closes opens again at its next
byte, as an attacker's would. Per phase: /api/health latency median / p99 / max over the answered probes,
probes not answered 200 within 2 s, the server's open descriptors at the end, the trickling connections
the server closed, and the log lines besides the access log's. The peer (without --no-peer): the same app
under plain uvicorn.run, without aiayn's connection guard, in the same run.
Without --model, a random tiny Transformer (the tests' `tiny` preset) is saved to a temporary directory.
"""

import argparse
import heapq
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from load_test import free_port, percentile, tiny_model

PEER = ("import sys, uvicorn; from aiayn.decoding.translator import Translator; from aiayn.web.app import create_app; "
        "uvicorn.run(create_app(Translator.from_pretrained(sys.argv[1])), host='127.0.0.1', port=int(sys.argv[2]))")


def start(model: Path, port: int, ulimit: int, log_path: Path, guarded: bool) -> subprocess.Popen:
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (ulimit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    command = ([sys.executable, "-m", "aiayn", "serve", "--model", str(model), "--port", str(port)] if guarded
               else [sys.executable, "-c", PEER, str(model), str(port)])
    with open(log_path, "wb") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, preexec_fn=limit)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited: {log_path.read_text()[-2000:]}")
        if probe(port)[0] == 200:
            return server
        time.sleep(0.2)
    server.kill()
    raise RuntimeError("the server did not answer /api/health within 120 s")


def probe(port: int, timeout: float = 2.0) -> tuple[int, float]:
    """GET /api/health on a new connection from 127.0.0.2 -> (status, or 0 when none came; seconds)."""
    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=("127.0.0.2", 0)) as sock:
            sock.sendall(b"GET /api/health HTTP/1.1\r\nhost: bench\r\nconnection: close\r\n\r\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else 0
    except OSError:
        status = 0
    return status, time.perf_counter() - start


class Trickle(threading.Thread):
    """`n` connections from `addresses` client addresses, each sending one header byte every `every_s`
    (staggered), reopened at their next byte when the server closes them."""

    def __init__(self, port: int, n: int, addresses: int, every_s: float):
        super().__init__(daemon=True)
        self.port, self.n, self.every_s = port, n, every_s
        self.sources = [f"127.0.0.{10 + i % addresses}" for i in range(n)]
        self.stop, self.closed_by_server, self.open = threading.Event(), 0, 0

    def _open(self, i: int, selector) -> socket.socket | None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=1, source_address=(self.sources[i], 0))
            sock.sendall(b"GET /api/health HTTP/1.1\r\nx-pad: ")
        except OSError:
            return None
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, i)
        return sock

    def run(self) -> None:
        selector, socks = selectors.DefaultSelector(), [None] * self.n
        now = time.monotonic()
        due = [(now + i * self.every_s / self.n, i) for i in range(self.n)]  # a heap: the next byte of each
        while not self.stop.is_set():
            while due and due[0][0] <= time.monotonic():
                at, i = heapq.heappop(due)
                if socks[i] is None:
                    socks[i] = self._open(i, selector)
                else:
                    try:
                        socks[i].send(b"a")
                    except OSError:
                        pass  # the server closed it: seen by the selector
                heapq.heappush(due, (at + self.every_s, i))
            for key, _ in selector.select(timeout=0.02):  # readable: an answer (408, 503) or the close
                i = key.data
                selector.unregister(socks[i])
                socks[i].close()
                socks[i], self.closed_by_server = None, self.closed_by_server + 1
            self.open = sum(s is not None for s in socks)
        for sock in socks:
            if sock is not None:
                sock.close()


def phase(server: subprocess.Popen, port: int, log_path: Path, args, addresses: int | None) -> dict:
    """Probe /api/health every 50 ms for --seconds, with the trickle from `addresses` (None: no trickle)."""
    trickle = None
    if addresses is not None:
        trickle = Trickle(port, args.connections, addresses, args.every)
        trickle.start()
        time.sleep(args.every + 1)  # every connection opened once
    lines_before = len(log_path.read_bytes().splitlines())
    results, end = [], time.monotonic() + args.seconds
    while time.monotonic() < end:
        results.append(probe(port))
        time.sleep(0.05)
    log = log_path.read_bytes().splitlines()[lines_before:]
    row = {"answered": [s for status, s in results if status == 200], "probes": len(results),
           "fds": len(os.listdir(f"/proc/{server.pid}/fd")),
           "open": trickle.open if trickle else 0, "closed": trickle.closed_by_server if trickle else 0,
           "log_lines": sum(b'"GET /api/health' not in line for line in log), "log_mb": sum(map(len, log)) / 1e6}
    if trickle:
        trickle.stop.set()
        trickle.join()
        time.sleep(1)
    return row


def report(name: str, label: str, row: dict) -> None:
    ms = [s * 1000 for s in row["answered"]]
    failed = row["probes"] - len(ms)
    print(f"| {name} | {label} | {percentile(ms, 0.5):.1f} | {percentile(ms, 0.99):.1f} | "
          f"{max(ms, default=float('nan')):.1f} | {failed}/{row['probes']} | {row['fds']} | {row['open']} | "
          f"{row['closed']} | {row['log_lines']} ({row['log_mb']:.1f} MB) |", flush=True)


def run_server(name: str, guarded: bool, model: Path, args, work: Path) -> None:
    port, log_path = free_port(), work / f"{name}.log"
    server = start(model, port, args.ulimit, log_path, guarded)
    try:
        for label, addresses in (("idle", None), ("1 address", 1), (f"{args.spread} addresses", args.spread)):
            report(name, label, phase(server, port, log_path, args, addresses))
    finally:
        server.terminate()
        server.wait(timeout=30)
    lines = [line for line in log_path.read_text(errors="replace").splitlines() if '"GET /api/health' not in line]
    print(f"  {name}: {len(lines)} log lines besides the access log, the first 8:", *lines[:8], sep="\n    ")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=None, help="model directory (default: a random tiny Transformer)")
    p.add_argument("--connections", type=int, default=1000, help="trickling connections (default: 1000)")
    p.add_argument("--ulimit", type=int, default=1024, help="the server's open-file limit (default: 1024)")
    p.add_argument("--every", type=float, default=5.0, help="seconds between a connection's bytes (default: 5)")
    p.add_argument("--seconds", type=float, default=30.0, help="probing time per phase (default: 30)")
    p.add_argument("--spread", type=int, default=100, help="client addresses of the last phase (default: 100)")
    p.add_argument("--no-peer", action="store_true", help="skip the unguarded uvicorn.run peer")
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # this process holds the connections
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * args.connections + 256)), hard))
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = args.model or tiny_model(work / "model")
        print(f"{args.connections} connections, one byte every {args.every:g} s each; server ulimit -n {args.ulimit}; "
              f"/api/health every 50 ms for {args.seconds:g} s per phase, 2 s timeout")
        print("| server | trickle from | health p50 ms | p99 ms | max ms | not answered | server fds | "
              "trickling open | closed by server | log lines (size) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        run_server("aiayn serve", True, model, args, work)
        if not args.no_peer:
            run_server("uvicorn.run (peer)", False, model, args, work)


if __name__ == "__main__":
    main()
