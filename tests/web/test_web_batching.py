"""The batching server: plain translations of concurrent requests share one translate call,
per options, with the same results as alone; one request's error stays its own; bounded queue; a client that
leaves costs no decoding; /api/translate_batch; the ct2 engine's plain endpoints.

No timing assertions: a translator held at a gate (a threading.Event the test opens) makes the queue fill
deterministically: while the model is busy with the first request, the others wait, and the test sees them
queued (batcher.admitted) before it opens the gate."""

import asyncio
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient

from aiayn.cli import main
from aiayn.decoding.sampling import SamplingOptions
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError, BudgetExceeded
from aiayn.web.app import MAX_BATCH_BODY, MAX_BATCH_TEXTS, MAX_BODY, MAX_TEXT, Limits, create_app
from aiayn.web.batching import Batcher
from aiayn.web.guards import Busy
from tests.cli.test_translate_cli import spy_on_searches

TEXTS = ["forty five thousand", "nine", "three hundred seven", "twenty one", "six hundred", "fifty thousand two"]
PLAIN_KEYS = {"translation", "score", "source_tokens", "target_tokens"}


class Recording:
    """The real translator behind a gate: every call is recorded (sentences, beam) and waits until the test
    opens the gate; `fail(sentences)` may raise instead of translating."""

    def __init__(self, real: Translator, fail=None):
        self.real, self.fail, self.gate, self.calls = real, fail, threading.Event(), []
        self.tokenizer, self.model, self.arch, self.model_dir = real.tokenizer, real.model, real.arch, real.model_dir
        self.engine, self.resolve, self.decode_cfg = real.engine, real.resolve, real.decode_cfg
        self.max_positions, self.backend = real.max_positions, real.backend
        self.parallel_batches = real.parallel_batches

    def translate(self, sentences, *, options, target_prefix=None, **per_sentence):
        self.calls.append((list(sentences), options.beam))
        self.gate.wait(60)  # a failing test must not hang
        if self.fail:
            self.fail(sentences)
        return self.real.translate(sentences, options=options, target_prefix=target_prefix, **per_sentence)


async def until(condition, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def plain(text: str, beam: int = 2) -> dict:
    return {"text": text, "beam": beam, "attention": False}


async def held_then_queued(app, recording, payloads: list[dict], path="/api/translate") -> tuple[httpx.Response, list]:
    """One request that the model works on (held at the gate), then `payloads` sent together: they queue.
    -> (the first response, the others' responses) once the gate is opened."""
    batcher = app.state.batcher
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://aiayn", timeout=60) as client:
        first = asyncio.create_task(client.post("/api/translate", json=plain("seven")))
        await until(lambda: len(recording.calls) == 1, "the first request to reach the model")
        others = [asyncio.create_task(client.post(path, json=p)) for p in payloads]
        await until(lambda: batcher.admitted == 1 + sum(len(p.get("texts", [0])) for p in payloads),
                    "the requests to queue")
        recording.gate.set()
        return await first, list(await asyncio.gather(*others))


def assert_same_as_alone(translator, response: httpx.Response, text: str, beam: int) -> None:
    alone = translator.translate([text], beam=beam)[0]
    body = response.json()
    assert response.status_code == 200 and set(body) == PLAIN_KEYS  # the plain mode: no maps
    assert (body["translation"], body["source_tokens"], body["target_tokens"]) == (alone.text, alone.src_tokens,
                                                                                   alone.tokens)
    assert body["score"] == pytest.approx(alone.score, abs=1e-4)


# ---- the app: batches, options, errors, bounds -------------------------------------------------------
def test_concurrent_plain_requests_share_one_call_with_the_results_of_each_alone(translator):
    recording = Recording(translator)
    app = create_app(recording)
    first, responses = asyncio.run(held_then_queued(app, recording, [plain(t) for t in TEXTS]))
    assert first.status_code == 200
    assert len(recording.calls) == 2, "the six queued requests should be one translate call"
    assert sorted(recording.calls[1][0]) == sorted(TEXTS) and recording.calls[1][1] == 2
    for text, response in zip(TEXTS, responses):
        assert_same_as_alone(translator, response, text, beam=2)
    assert app.state.batcher.admitted == 0


def test_requests_with_other_options_are_not_mixed(translator):
    recording = Recording(translator)
    payloads = [plain(text, beam=1 + 2 * (i % 2)) for i, text in enumerate(TEXTS)]  # beams 1, 3, 1, 3, ...
    _, responses = asyncio.run(held_then_queued(create_app(recording), recording, payloads))
    batches = recording.calls[1:]
    assert len(batches) == 2
    for sentences, beam in batches:  # one call per beam, holding exactly that beam's texts
        assert sorted(sentences) == sorted(p["text"] for p in payloads if p["beam"] == beam)
    for payload, response in zip(payloads, responses):
        assert_same_as_alone(translator, response, payload["text"], payload["beam"])


def test_a_bad_text_is_refused_before_it_queues(translator):
    """Its 400 comes while the model is still held: it never waited for the model, nor took a place."""
    recording = Recording(translator)
    app = create_app(recording)

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://aiayn") as client:
            first = asyncio.create_task(client.post("/api/translate", json=plain("seven")))
            await until(lambda: len(recording.calls) == 1, "the first request to reach the model")
            good = [asyncio.create_task(client.post("/api/translate", json=plain(t))) for t in TEXTS[:2]]
            bad = [await client.post("/api/translate", json=plain(t)) for t in ("x" * MAX_TEXT, "   ")]
            await until(lambda: app.state.batcher.admitted == 3, "the good requests to queue")
            recording.gate.set()
            await first
            return await asyncio.gather(*good), bad

    good, (too_long, blank) = asyncio.run(scenario())
    assert too_long.status_code == 400 and "at most 128" in too_long.json()["error"]
    assert blank.status_code == 400 and "empty" in blank.json()["error"]
    for text, response in zip(TEXTS[:2], good):
        assert_same_as_alone(translator, response, text, 2)
    assert [len(sentences) for sentences, _ in recording.calls] == [1, 2]


def test_an_error_inside_a_batch_reaches_only_its_own_request(translator):
    """The batch's call fails; its sentences are decoded again one at a time: the failing one gets its own
    400, its neighbours their translations."""
    def fail(sentences):
        if "nine" in sentences:
            raise AiaynError("cannot translate 'nine' (a test's refusal)")

    recording = Recording(translator, fail)
    texts = [TEXTS[0], "nine", TEXTS[2]]
    _, responses = asyncio.run(held_then_queued(create_app(recording), recording, [plain(t) for t in texts]))
    assert responses[1].status_code == 400 and "a test's refusal" in responses[1].json()["error"]
    assert_same_as_alone(translator, responses[0], texts[0], 2)
    assert_same_as_alone(translator, responses[2], texts[2], 2)
    assert [len(sentences) for sentences, _ in recording.calls] == [1, 3, 1, 1, 1]  # held, the batch, retries


def test_a_batch_over_its_time_budget_is_retried_one_by_one(translator):
    """Only a sentence that runs out of time alone gets the time-budget 503, as without batching."""
    def fail(sentences):
        if len(sentences) > 1 or "twenty one" in sentences:
            raise BudgetExceeded("decoding stopped: over its time budget")

    recording = Recording(translator, fail)
    texts = [TEXTS[0], "twenty one", TEXTS[2]]
    _, responses = asyncio.run(held_then_queued(create_app(recording), recording, [plain(t) for t in texts]))
    assert responses[1].status_code == 503 and "retry-after" not in responses[1].headers
    assert "time budget" in responses[1].json()["error"]
    assert_same_as_alone(translator, responses[0], texts[0], 2)
    assert_same_as_alone(translator, responses[2], texts[2], 2)


def test_full_queue_is_refused_at_once_with_retry_after(translator):
    recording = Recording(translator)
    app = create_app(recording, Limits(queued=3))

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://aiayn") as client:
            held = [asyncio.create_task(client.post("/api/translate", json=plain(t))) for t in TEXTS[:3]]
            await until(lambda: app.state.batcher.admitted == 3, "the queue to fill")
            refused = [await client.post("/api/translate", json=plain("fifty six")),
                       await client.post("/api/translate_batch", json={"texts": ["fifty six"]})]
            recording.gate.set()
            return await asyncio.gather(*held), refused

    held, refused = asyncio.run(scenario())
    for response in refused:
        assert response.status_code == 503 and int(response.headers["retry-after"]) > 0
        assert "busy" in response.json()["error"]
    assert [r.status_code for r in held] == [200] * 3 and app.state.batcher.admitted == 0
    assert all("fifty six" not in sentences for sentences, _ in recording.calls)


def test_a_client_that_leaves_while_queued_costs_no_decoding(translator):
    """At the ASGI level: the second request's client disconnects while it waits behind the first."""
    recording = Recording(translator)
    app = create_app(recording)
    batcher = app.state.batcher

    async def leaving_request(leave: asyncio.Event, sent: list):
        body = b'{"text": "twenty one", "beam": 2, "attention": false}'
        messages = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if messages:
                return messages.pop()
            await leave.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/api/translate", "raw_path": b"/api/translate", "query_string": b"",
                 "root_path": "", "headers": [(b"content-type", b"application/json"),
                                              (b"content-length", str(len(body)).encode())],
                 "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
        await app(scope, receive, send)

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://aiayn") as client:
            first = asyncio.create_task(client.post("/api/translate", json=plain("seven")))
            await until(lambda: len(recording.calls) == 1, "the first request to reach the model")
            leave, sent = asyncio.Event(), []
            second = asyncio.create_task(leaving_request(leave, sent))
            await until(lambda: batcher.admitted == 2, "the second request to queue")
            leave.set()
            await until(lambda: batcher.admitted == 1, "the second request to leave the queue")
            recording.gate.set()
            await second
            return await first, sent

    first, sent = asyncio.run(scenario())
    assert first.status_code == 200 and len(recording.calls) == 1  # "twenty one" was never decoded
    assert sent[0]["status"] == 499


def test_requests_with_maps_are_unchanged_and_have_maps(translator):
    client = TestClient(create_app(translator))
    with_maps = client.post("/api/translate", json={"text": "nine", "beam": 2}).json()
    without = client.post("/api/translate", json=plain("nine")).json()
    assert "maps" in with_maps and set(without) == PLAIN_KEYS
    assert without["translation"] == with_maps["translation"] and without["score"] == pytest.approx(with_maps["score"])
    assert without["target_tokens"] == [t for t in with_maps["target_tokens"] if t != "</s>"]


# ---- /api/translate_batch -------------------------------------------------------------------------------
def test_translate_batch_answers_in_input_order(translator):
    client = TestClient(create_app(translator))
    texts = TEXTS + ["", "nine"]
    r = client.post("/api/translate_batch", json={"texts": texts, "beam": 3})
    assert r.status_code == 200
    expected = translator.translate(texts, beam=3)
    got = r.json()["translations"]
    assert [t["translation"] for t in got] == [e.text for e in expected]
    assert [t["score"] for t in got] == pytest.approx([e.score for e in expected], abs=1e-4)
    assert got[6] == {"translation": "", "score": 0.0} and all(set(t) == {"translation", "score"} for t in got)


def test_translate_batch_bounds(translator):
    client = TestClient(create_app(translator))
    post = client.post
    assert post("/api/translate_batch", json={"texts": ["nine"] * (MAX_BATCH_TEXTS + 1)}).status_code == 422
    assert post("/api/translate_batch", json={"texts": ["nine", "x" * (MAX_TEXT + 1)]}).status_code == 422
    assert post("/api/translate_batch", json={"texts": []}).status_code == 422
    assert post("/api/translate_batch", json={"texts": ["nine"], "attention": True}).status_code == 422
    too_long = post("/api/translate_batch", json={"texts": ["nine", "x" * MAX_TEXT]})
    assert too_long.status_code == 400 and too_long.json()["error"].startswith("texts[1]: ")
    # a body over /api/translate's limit fits this endpoint's (few subwords, many characters)
    long_text = "nine" + " " * (MAX_TEXT - 8) + "nine"
    big = {"texts": [long_text] * 40, "beam": 1}
    assert MAX_BODY < len(httpx.Request("POST", "/", json=big).content) < MAX_BATCH_BODY
    assert post("/api/translate_batch", json=big).status_code == 200
    assert post("/api/translate", json={"text": "nine", "pad": long_text * 40}).status_code == 413
    assert post("/api/translate_batch", content=b"x" * (MAX_BATCH_BODY + 1),
                headers={"content-type": "application/json"}).status_code == 413


# ---- the batcher alone ----------------------------------------------------------------------------------
class Decoder:
    """A decode function for the Batcher: records (key, texts), holds the first call at a gate, fails on
    texts named in `bad`."""

    def __init__(self, bad=()):
        self.calls, self.gate, self.bad = [], threading.Event(), set(bad)

    def __call__(self, key, texts):
        self.calls.append((key, list(texts)))
        self.gate.wait(60)
        if self.bad & set(texts):
            raise ValueError(f"bad: {sorted(self.bad & set(texts))}")
        return [f"{key}:{t}" for t in texts]


def run_batcher(decoder, submissions, **bounds):
    """Submit ("first", key 0) and wait until the decoder holds it, then the (key, text, work) submissions
    at once; open the gate -> (each submission's result or exception, the batcher)."""
    settings = dict(max_batch=64, max_work=1000, max_wait_s=0.0, rejoin_s=0.0, capacity=100) | bounds

    async def scenario():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(decoder, pool, **settings)
            first = asyncio.create_task(batcher.translate(0, ["first"], [1]))
            await until(lambda: len(decoder.calls) == 1, "the first call")
            tasks = [asyncio.create_task(batcher.translate(key, [text], [work])) for key, text, work in submissions]
            await until(lambda: batcher.admitted == 1 + len(submissions), "the submissions to queue")
            decoder.gate.set()
            await first
            return await asyncio.gather(*tasks, return_exceptions=True), batcher

    return asyncio.run(scenario())


def test_batcher_groups_by_key_oldest_first_within_size_and_work():
    decoder = Decoder()
    submissions = [(1, "a", 1), (2, "b", 1), (1, "c", 1), (2, "d", 1), (1, "e", 1), (1, "f", 5), (1, "g", 1)]
    results, batcher = run_batcher(decoder, submissions, max_batch=3, max_work=6)
    assert [r[0] for r in results] == [f"{key}:{text}" for key, text, _ in submissions]
    # key 1: a, c, e (max_batch 3); then key 2, whose b is now the oldest; then f and g (work 5 + 1 = 6)
    assert decoder.calls[1:] == [(1, ["a", "c", "e"]), (2, ["b", "d"]), (1, ["f", "g"])]
    assert batcher.admitted == 0 and batcher.queue == []


def test_batcher_work_bound_splits_but_always_takes_the_oldest():
    decoder = Decoder()
    results, _ = run_batcher(decoder, [(1, "big", 50), (1, "small", 1), (1, "big2", 50)], max_work=10)
    assert decoder.calls[1:] == [(1, ["big"]), (1, ["small"]), (1, ["big2"])]  # 1 + 50 is over 10
    assert [r[0] for r in results] == ["1:big", "1:small", "1:big2"]


def test_batcher_retries_a_failed_batch_one_by_one():
    decoder = Decoder(bad={"b"})
    results, batcher = run_batcher(decoder, [(1, "a", 1), (1, "b", 1), (1, "c", 1)])
    assert results[0] == ["1:a"] and results[2] == ["1:c"]
    assert isinstance(results[1], ValueError) and "bad: ['b']" in str(results[1])
    assert decoder.calls[1:] == [(1, ["a", "b", "c"]), (1, ["a"]), (1, ["b"]), (1, ["c"])]
    assert batcher.admitted == 0


def test_batcher_refuses_past_capacity_and_withdraws_cancelled_requests():
    decoder = Decoder()

    async def scenario():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(decoder, pool, max_batch=64, max_work=1000, max_wait_s=0.0, rejoin_s=0.0, capacity=3)
            first = asyncio.create_task(batcher.translate(0, ["first"], [1]))
            await until(lambda: len(decoder.calls) == 1, "the first call")
            leaving = asyncio.create_task(batcher.translate(1, ["x", "y"], [1, 1]))
            await until(lambda: batcher.admitted == 3, "the queue to fill")
            with pytest.raises(Busy):
                await batcher.translate(1, ["z"], [1])
            leaving.cancel()
            await until(lambda: batcher.admitted == 1, "the cancelled request to leave the queue")
            staying = asyncio.create_task(batcher.translate(1, ["z"], [1]))
            decoder.gate.set()
            return await first, await staying

    assert asyncio.run(scenario()) == (["0:first"], ["1:z"])
    assert decoder.calls == [(0, ["first"]), (1, ["z"])]  # x and y were never decoded


@pytest.mark.parametrize("rejoin_s, batches", [(0.0, [["a"], ["b"]]), (1.0, [["a", "b"]])])
def test_after_a_batch_the_next_one_waits_for_its_clients_to_come_back(rejoin_s, batches):
    """A batch ends while "a" waits; its client sends "b" at once. Without the rejoin wait, "a" goes alone
    (the batcher takes the next batch as soon as the last one is settled); with it, "b" joins "a"."""
    decoder = Decoder()

    async def scenario():
        with ThreadPoolExecutor(1) as pool:
            batcher = Batcher(decoder, pool, max_batch=64, max_work=1000, max_wait_s=0.0, rejoin_s=rejoin_s,
                              capacity=10)
            first = asyncio.create_task(batcher.translate(1, ["first"], [1]))
            await until(lambda: len(decoder.calls) == 1, "the first call")
            waiting = asyncio.create_task(batcher.translate(1, ["a"], [1]))
            await until(lambda: batcher.admitted == 2, "a to queue")
            decoder.gate.set()
            await first  # the first client is answered ...
            return await asyncio.gather(waiting, batcher.translate(1, ["b"], [1]))  # ... and sends its next

    assert asyncio.run(scenario()) == [["1:a"], ["1:b"]]
    assert [texts for _, texts in decoder.calls[1:]] == batches


# ---- the ct2 engine -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ct2_translator(transformer_dir, tmp_path_factory):
    pytest.importorskip("ctranslate2")
    model_dir = shutil.copytree(transformer_dir, tmp_path_factory.mktemp("ct2") / "model")  # the cache goes inside
    return Translator.from_pretrained(model_dir, engine="ct2")


def test_ct2_serves_the_plain_endpoints_and_refuses_maps_by_name(ct2_translator):
    client = TestClient(create_app(ct2_translator))
    assert client.get("/api/health").json()["engine"] == "ct2"
    assert client.get("/api/info").json()["engine"] == "ct2"
    assert_same_as_alone(ct2_translator, client.post("/api/translate", json=plain(TEXTS[0])), TEXTS[0], 2)
    r = client.post("/api/translate_batch", json={"texts": TEXTS, "beam": 2})
    assert [t["translation"] for t in r.json()["translations"]] == [t.text for t in ct2_translator.translate(TEXTS,
                                                                                                              beam=2)]
    step = {"source_ids": [5, 3], "target_input_ids": [2], "kind": "cross", "layer": 0, "head": 0, "query": 0}
    alternatives = {"source_ids": [5, 3], "target_input_ids": [2], "k": 3}
    trace = {"text": "nine", "attention": False, "trace": True}
    for response in (client.post("/api/translate", json={"text": "nine"}), client.post("/api/step", json=step),
                     client.post("/api/alternatives", json=alternatives), client.post("/api/translate", json=trace)):
        assert response.status_code == 400 and "--engine native" in response.json()["error"]
    page = client.get("/")
    assert page.status_code == 404 and "--engine native" in page.json()["error"]


def test_cli_serve_with_ct2_serves_the_plain_api(ct2_translator, monkeypatch):
    from aiayn.web.server import GuardedServer

    served = {}

    def run(server):
        served.update(app=server.config.app)
        server.started = True

    monkeypatch.setattr(GuardedServer, "run", run)
    assert main(["serve", "--model", str(ct2_translator.model_dir), "--engine", "ct2", "--threads", "2"]) == 0
    client = TestClient(served["app"])
    assert client.get("/api/health").json()["engine"] == "ct2"
    assert client.post("/api/translate_batch", json={"texts": ["nine"]}).status_code == 200
    refused = client.post("/api/translate_batch", json={"texts": ["nine"], "early_stopping": False})
    assert refused.status_code == 400 and "beam-size finished hypotheses" in refused.json()["error"]


def test_decoding_controls_over_rest_equal_the_translator(translator, monkeypatch):
    """min_length, no_repeat_ngram_size, a target prefix (one text, a batch, and the page's request with
    maps) and sampling reach the Translator as in Python; clashes and a prefix list of the wrong length are
    400 with the reason."""
    client = TestClient(create_app(translator))
    controls = {"min_length": 5, "no_repeat_ngram_size": 2}
    answer = client.post("/api/translate", json={**plain("nine", beam=3), **controls, "target_prefix": "neun"})
    expected = translator.translate(["nine"], beam=3, target_prefix=["neun"], **controls)[0]
    assert answer.status_code == 200 and answer.json()["translation"] == expected.text
    assert expected.text.startswith("neun") and len(expected.tokens) >= 5
    batch = client.post("/api/translate_batch",
                        json={"texts": TEXTS[:3], "beam": 2, "target_prefixes": ["", "sieben", ""]})
    expected = translator.translate(TEXTS[:3], beam=2, target_prefix=["", "sieben", ""])
    assert [t["translation"] for t in batch.json()["translations"]] == [r.text for r in expected]
    with_maps = client.post("/api/translate", json={"text": "nine", "beam": 2, "target_prefix": "sieben"}).json()
    assert with_maps["translation"].startswith("sieben") and "maps" in with_maps
    sampling = {"temperature": 1.5, "top_p": 0.9, "seed": 11}
    sampled = client.post("/api/translate", json={"text": "nine", "attention": False, "sampling": sampling})
    again = client.post("/api/translate", json={"text": "nine", "attention": False, "sampling": sampling})
    expected = translator.sample(["nine"], options=SamplingOptions(**sampling))[0]
    assert sampled.json()["translation"] == again.json()["translation"] == expected.text
    seen = spy_on_searches(monkeypatch)
    early = client.post("/api/translate_batch", json={"texts": TEXTS[:3], "beam": 3, "early_stopping": True})
    assert seen and set(seen) == {True}  # the field reached the search
    expected = translator.translate(TEXTS[:3], beam=3, early_stopping=True)
    assert [t["translation"] for t in early.json()["translations"]] == [r.text for r in expected]
    for payload, needle in (({"text": "nine", "sampling": sampling}, "attention"),
                            ({**plain("nine"), "sampling": sampling}, "drop beam"),
                            ({"texts": ["nine"], "early_stopping": False, "sampling": sampling}, "drop early_stopping"),
                            ({"texts": ["nine"], "target_prefixes": ["a", "b"]}, "2 entries for 1 texts")):
        path = "/api/translate_batch" if "texts" in payload else "/api/translate"
        refused = client.post(path, json=payload)
        assert refused.status_code == 400 and needle in refused.json()["error"]
    assert client.post("/api/translate", json={**plain("nine"), "sampling": {"top_p": 2}}).status_code == 422


def test_n_best_in_plain_mode(translator):
    client = TestClient(create_app(translator))
    answer = client.post("/api/translate", json={**plain("nine", beam=3), "n_best": 3}).json()
    expected = translator.translate(["nine"], beam=3, n_best=3)[0]
    assert answer["n_best"] == [list(pair) for pair in expected.n_best] and len(answer["n_best"]) == 3
    batch = client.post("/api/translate_batch", json={"texts": TEXTS[:2], "beam": 2, "n_best": 2}).json()
    assert all(len(t["n_best"]) == 2 for t in batch["translations"])
    assert "n_best" not in client.post("/api/translate", json=plain("nine")).json()
    for payload, needle in (({**plain("nine", beam=2), "n_best": 3}, "at most the beam"),
                            ({"text": "nine", "n_best": 2}, "plain translations")):
        refused = client.post("/api/translate", json=payload)
        assert refused.status_code == 400 and needle in refused.json()["error"]


def test_with_two_workers_two_batches_decode_at_once_and_share_the_queue():
    """in_flight 2 (a translator with 2 worker processes): a second batch starts while the first still
    decodes (with in_flight 1 it waits for it), and sentences that arrive together on two free workers are
    cut into two batches, one each, rather than one batch on one worker while the other idles."""
    decoder = Decoder()

    async def scenario():
        with ThreadPoolExecutor(2) as pool:
            batcher = Batcher(decoder, pool, max_batch=64, max_work=1000, max_wait_s=0.0, rejoin_s=0.0,
                              capacity=10, in_flight=2)
            together = asyncio.create_task(batcher.translate(1, ["a", "b", "c", "d"], [1] * 4))
            await until(lambda: len(decoder.calls) == 2, "both workers to take a batch")
            later = asyncio.create_task(batcher.translate(1, ["e"], [1]))
            await until(lambda: batcher.admitted == 5, "e to queue")
            await asyncio.sleep(0.05)
            assert len(decoder.calls) == 2, "no third batch while both workers are busy"
            decoder.gate.set()
            return await together, await later

    assert asyncio.run(scenario()) == (["1:a", "1:b", "1:c", "1:d"], ["1:e"])
    assert decoder.calls == [(1, ["a", "b"]), (1, ["c", "d"]), (1, ["e"])]


@pytest.mark.parametrize("in_flight", [1, 2])
def test_a_client_alone_does_not_wait_for_rejoiners(in_flight):
    """The rejoin wait is for a crowd: one client that sends its next sentence as soon as it is answered
    (nothing else queued when its batch was answered) goes at once, not after rejoin_s (here 20 s)."""
    decoder = Decoder()
    decoder.gate.set()

    async def scenario():
        with ThreadPoolExecutor(2) as pool:
            batcher = Batcher(decoder, pool, max_batch=64, max_work=1000, max_wait_s=0.002, rejoin_s=20.0,
                              capacity=10, in_flight=in_flight)
            start = time.monotonic()
            results = [await batcher.translate(1, [text], [1]) for text in "abc"]  # awaited here, in this task
            return results, time.monotonic() - start

    results, seconds = asyncio.run(scenario())
    assert results == [["1:a"], ["1:b"], ["1:c"]] and seconds < 30  # 40 s with the rejoin waits
