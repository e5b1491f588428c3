"""The server under load and abuse: a real uvicorn on a loopback port (TestClient models neither chunked
uploads nor concurrent requests), and the app over httpx's ASGI transport where the ASGI messages
themselves are the point. No timing assertion except the health check's, and that one is generous."""

import asyncio
import json
import logging
import socket
import sys
import threading
import time

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient

from aiayn.decoding.translator import Translation, Translator
from aiayn.web.app import (
    GIL_SWITCH_S,
    MAX_BODY,
    MAX_OUTPUT_TOKENS,
    MAX_SOURCE_TOKENS,
    MAX_TEXT,
    Limits,
    create_app,
    heaviest_text,
    max_response_bytes,
)
from tests.serving import serving

CHUNK = 65_536
HUGE = 50 * 2**20  # an upload far past MAX_BODY: only a server that reads it whole would take it all
STEP = {"source_ids": [5, 3], "target_input_ids": [2], "kind": "cross", "layer": 0, "head": 0, "query": 0}


def wait_until(condition, what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


class Gated:
    """The real translator behind a gate that the test opens: until then translate() waits, idle or
    burning CPU in Python (holding the GIL, the worst neighbour for the event loop)."""

    def __init__(self, real: Translator, burn: bool = False):
        self.real, self.burn, self.gate = real, burn, threading.Event()
        self.tokenizer, self.model, self.arch, self.model_dir = real.tokenizer, real.model, real.arch, real.model_dir
        self.parallel_batches, self.resolve, self.decode_cfg = real.parallel_batches, real.resolve, real.decode_cfg
        self.max_positions, self.backend = real.max_positions, real.backend

    def translate(self, sentences, *, options, target_prefix=None, **per_sentence):
        deadline = time.monotonic() + 60  # a failing test must not hang
        while not self.gate.is_set() and time.monotonic() < deadline:
            if self.burn:
                sum(range(10_000))
            else:
                self.gate.wait(0.1)
        return self.real.translate(sentences, options=options, target_prefix=target_prefix, **per_sentence)


def post_in_threads(url: str, payloads: list[dict]) -> tuple[list[threading.Thread], list]:
    results = [None] * len(payloads)

    def post(i):
        results[i] = httpx.post(url, json=payloads[i], timeout=60)

    threads = [threading.Thread(target=post, args=(i,)) for i in range(len(payloads))]
    for thread in threads:
        thread.start()
    return threads, results


def test_chunked_oversize_body_is_refused_while_it_arrives(translator):
    consumed = 0

    async def body():
        nonlocal consumed
        chunk = b"x" * CHUNK
        while consumed < HUGE:
            consumed += len(chunk)
            yield chunk

    async def upload():
        transport = httpx.ASGITransport(app=create_app(translator))
        async with httpx.AsyncClient(transport=transport, base_url="http://aiayn") as client:
            return await client.post("/api/translate", content=body(), headers={"content-type": "application/json"})

    response = asyncio.run(upload())
    assert response.status_code == 413 and "error" in response.json()
    assert consumed <= MAX_BODY + CHUNK, f"the app read {consumed} bytes of a body limited to {MAX_BODY}"


def test_chunked_oversize_body_over_a_socket_is_not_read(translator):
    """Count what uvicorn hands the app: not the 50 MB sent, only what it buffers before the app reads
    (it stops reading the socket past 64 KiB, and one read may add up to 64 KiB more)."""
    app, delivered = create_app(translator), []

    async def counting(scope, receive, send):
        async def counted():
            message = await receive()
            delivered.append(len(message.get("body", b"")))
            return message
        await app(scope, counted, send)

    sent = 0

    def body():
        nonlocal sent
        chunk = b"x" * CHUNK
        while sent < HUGE:
            sent += len(chunk)
            yield chunk

    with serving(counting) as url:
        try:
            response = httpx.post(f"{url}/api/translate", content=body(), headers={"content-type": "application/json"},
                                  timeout=20)
            assert response.status_code == 413
        except httpx.TransportError:  # the server answered 413 and closed while the client was still sending
            pass
        assert httpx.get(f"{url}/api/health").status_code == 200
    assert sum(delivered) <= MAX_BODY + 2 * CHUNK, f"uvicorn delivered {sum(delivered)} bytes"
    assert sent < HUGE, "the client was never stopped"


def test_declared_oversize_body_is_refused_before_reading(translator):
    with serving(create_app(translator)) as url:
        with socket.create_connection(("127.0.0.1", httpx.URL(url).port), timeout=10) as s:
            s.sendall(b"POST /api/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000000000\r\n\r\n")  # and not one byte of the body
            reply = b""
            while chunk := s.recv(4096):  # the server answers, then closes
                reply += chunk
        reply = reply.decode()
    assert reply.startswith("HTTP/1.1 413") and f"over {MAX_BODY} bytes" in reply


@pytest.mark.slow
def test_health_answers_while_heavy_requests_run(translator):
    gated = Gated(translator, burn=True)
    app = create_app(gated)
    admission = app.state.admission
    heavy = {"text": heaviest_text(translator.tokenizer), "beam": 8}
    latencies, switch_interval = [], sys.getswitchinterval()
    with serving(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        assert sys.getswitchinterval() == GIL_SWITCH_S
        threads, results = post_in_threads(f"{url}/api/translate", [heavy] * admission.capacity)
        wait_until(lambda: admission.admitted == admission.capacity, "the heavy requests to be admitted")

        def probe():
            start = time.perf_counter()
            assert client.get("/api/health").json()["status"] == "ok"
            latencies.append(time.perf_counter() - start)

        for _ in range(20):  # the first job burns CPU in Python, the others wait in the queue
            probe()
        assert admission.admitted == admission.capacity
        gated.gate.set()  # now the real heavy translations run, one after another
        while admission.admitted:
            probe()
            time.sleep(0.01)  # a probe loop without pause would compete with the model for the GIL
        for thread in threads:
            thread.join()
    assert [r.status_code for r in results] == [200] * admission.capacity
    assert max(latencies) < 1.0, f"health took {max(latencies):.3f} s while the model was busy"
    assert sys.getswitchinterval() == switch_interval  # given back when the server stops


def test_full_queue_is_refused_at_once_with_retry_after(translator):
    gated = Gated(translator)
    app = create_app(gated)
    admission = app.state.admission
    with serving(app) as url:
        threads, results = post_in_threads(f"{url}/api/translate", [{"text": "nine", "beam": 1}] * admission.capacity)
        wait_until(lambda: admission.admitted == admission.capacity, "the queue to fill")
        refused = httpx.post(f"{url}/api/translate", json={"text": "nine", "beam": 1}, timeout=5)
        step = httpx.post(f"{url}/api/step", json=STEP, timeout=5)
        gated.gate.set()
        for thread in threads:
            thread.join()
        after = httpx.post(f"{url}/api/translate", json={"text": "nine", "beam": 1}, timeout=20)
    for response in (refused, step):
        assert response.status_code == 503 and int(response.headers["retry-after"]) > 0
        assert "busy" in response.json()["error"]
    assert [r.status_code for r in results] == [200] * admission.capacity
    assert after.status_code == 200 and admission.admitted == 0


def test_budget_exceeded_is_503_without_retry_after(translator):
    app = create_app(translator, Limits(time_limit_s=1e-9))
    with serving(app) as url:
        r = httpx.post(f"{url}/api/translate", json={"text": "forty five", "beam": 2}, timeout=20)
    assert r.status_code == 503 and "retry-after" not in r.headers
    assert "time budget" in r.json()["error"] and "smaller beam" in r.json()["error"]


class Broken:
    def __init__(self, real: Translator):
        self.tokenizer, self.model, self.arch, self.model_dir = real.tokenizer, real.model, real.arch, real.model_dir
        self.parallel_batches, self.resolve, self.decode_cfg = real.parallel_batches, real.resolve, real.decode_cfg
        self.max_positions, self.backend = real.max_positions, real.backend

    def translate(self, sentences, *, options, target_prefix=None, **per_sentence):
        raise RuntimeError("secret: /srv/aiayn/internal.py line 42")


def test_unexpected_error_text_is_logged_not_sent(translator, caplog):
    app = create_app(Broken(translator))
    transport = httpx.ASGITransport(app=app)

    async def ask():
        async with httpx.AsyncClient(transport=transport, base_url="http://aiayn") as client:
            return await client.post("/api/translate", json={"text": "nine", "beam": 1})

    with caplog.at_level(logging.ERROR, logger="aiayn.web.respond"):
        r = asyncio.run(ask())
    assert r.status_code == 500 and r.json() == {"error": "internal server error (details are in the server's log)"}
    assert "secret" not in r.text and "secret" in caplog.text


@pytest.mark.parametrize("path, payload", [
    ("/api/translate", {"text": "nine", "beam": True}),
    ("/api/translate", {"text": "nine", "beam": "4"}),
    ("/api/translate", {"text": "nine", "beam": 4.0}),
    ("/api/translate", {"text": 9, "beam": 4}),
    ("/api/translate", {"text": ["nine"], "beam": 4}),
    ("/api/step", {**STEP, "layer": "0"}),
    ("/api/step", {**STEP, "head": True}),
    ("/api/step", {**STEP, "query": 0.0}),
    ("/api/step", {**STEP, "source_ids": ["5", 3]}),
    ("/api/step", {**STEP, "target_input_ids": [True]}),
    ("/api/step", {**STEP, "kind": 1}),
])
def test_loose_types_are_422(translator, path, payload):
    async def ask():
        transport = httpx.ASGITransport(app=create_app(translator))
        async with httpx.AsyncClient(transport=transport, base_url="http://aiayn") as client:
            return await client.post(path, json=payload)

    assert asyncio.run(ask()).status_code == 422


class Largest:
    """Answers with every attention map at the server's largest shape, every weight at its longest."""

    def __init__(self, real: Translator):
        self.tokenizer, self.model, self.arch, self.model_dir = real.tokenizer, real.model, real.arch, real.model_dir
        self.parallel_batches, self.resolve, self.decode_cfg = real.parallel_batches, real.resolve, real.decode_cfg
        self.max_positions, self.backend = real.max_positions, real.backend
        model = real.model
        self.L_enc, self.L_dec = len(model.encoder_layers), len(model.decoder_layers)
        self.H = model.encoder_layers[0].self_attn.n_heads

    def translate(self, sentences, *, options, target_prefix=None, **per_sentence):
        S, T = MAX_SOURCE_TOKENS, options.max_output_len
        maps = {"encoder_self": np.full((self.L_enc, self.H, S, S), 0.123),
                "decoder_self": np.full((self.L_dec, self.H, T, T), 0.123),
                "cross": np.full((self.L_dec, self.H, T, S), 0.123)}
        pieces = ["▁nine"] * (S - 1)
        return [Translation("neun " * T, -1.2345678, ["▁neun"] * T, pieces + ["</s>"], attention=maps)]


def test_largest_answer_stays_under_its_bound(translator):
    """The worst case of the tiny model (2+2 layers, 4 heads): 2,370,946 bytes (bound: 2,397,696); the
    heaviest real request (127 source subwords, beam 8, 128 steps) answered 2,184,997 bytes."""
    async def ask(t, text, beam):
        transport = httpx.ASGITransport(app=create_app(t))
        async with httpx.AsyncClient(transport=transport, base_url="http://aiayn") as client:
            return await client.post("/api/translate", json={"text": text, "beam": beam})

    bound = max_response_bytes(translator)
    largest = asyncio.run(ask(Largest(translator), "nine", 8))
    assert largest.status_code == 200 and len(largest.content) <= bound < 2_500_000
    maps = largest.json()["maps"]
    assert np.array(maps["cross"]).shape == (2, 4, MAX_OUTPUT_TOKENS, MAX_SOURCE_TOKENS)
    real = asyncio.run(ask(translator, heaviest_text(translator.tokenizer), 8))
    assert real.status_code == 200 and len(real.content) <= bound
    assert len(json.loads(real.content)["source_tokens"]) <= MAX_SOURCE_TOKENS
    too_long = asyncio.run(ask(translator, "x" * MAX_TEXT, 8))
    assert too_long.status_code == 400 and f"at most {MAX_SOURCE_TOKENS}" in too_long.json()["error"]


def test_a_lone_surrogate_is_a_422_naming_the_field(translator):
    """JSON may carry "\\ud800", which is no UTF-8 text: FastAPI's own 422 echoed it and failed to encode
    its answer (a 500 with a traceback); the app's 422 names the field without echoing the input."""
    client = TestClient(create_app(translator), raise_server_exceptions=False)
    for path, body, where in (("/api/translate", b'{"text": "\\ud800", "attention": false}', ["body", "text"]),
                              ("/api/translate_batch", b'{"texts": ["a\\ud800"]}', ["body", "texts", 0])):
        answer = client.post(path, content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 422 and answer.json()["detail"][0]["loc"] == where
