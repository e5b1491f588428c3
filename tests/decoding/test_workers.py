"""Native beam search in worker processes (aiayn.decoding.workers): the same results as in-process search,
errors that reach the caller, and the options that cannot use workers refused."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from aiayn.cli import main
from aiayn.decoding.engines import PoolEngine
from aiayn.decoding.sampling import SamplingOptions
from aiayn.decoding.translator import Translator, even_batch_size
from aiayn.errors import AiaynError, BudgetExceeded

SENTENCES = ["forty five", "three hundred twenty one", "nine", "", "seven hundred", "twelve", "eighty eight"]


@pytest.fixture
def one_thread():
    """Workers run one torch thread; so does the in-process search it is compared with (with two, some
    reductions are summed in another order: scores 1e-6 apart)."""
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def pooled(transformer_dir):
    translator = Translator.from_pretrained(transformer_dir, workers=2)
    yield translator
    translator.close()


def _summary(results):
    return [(r.text, r.score, r.n_best, r.tokens, r.src_tokens) for r in results]


def test_workers_give_the_in_process_results(pooled, transformer_dir, one_thread):
    alone = Translator.from_pretrained(transformer_dir)
    assert alone.pool is None and pooled.pool.workers == 2
    options = dict(beam=3, n_best=2, batch_size=2)  # 3 batches of the 6 non-blank sentences: both workers busy
    assert _summary(pooled.translate(SENTENCES, **options)) == _summary(alone.translate(SENTENCES, **options))
    controls = dict(beam=2, min_length=2, no_repeat_ngram_size=2, target_prefix=["zwei"] * len(SENTENCES),
                    early_stopping=True, length_penalty_form="hf", max_output_len=6, max_tokens=8)
    assert _summary(pooled.translate(SENTENCES, **controls)) == _summary(alone.translate(SENTENCES, **controls))


def test_forking_freezes_the_objects_alive_out_of_the_collector(pooled):
    """Before the fork the pool moves the live objects to the permanent generation (gc.freeze): no full
    collection walks the model's ~170k objects in the caller or, copying shared pages, in a worker."""
    import gc

    assert gc.get_freeze_count() > 10_000


@pytest.mark.slow
def test_spawned_workers_load_the_model_themselves(transformer_dir, one_thread):
    """The start method off Linux (spawn): each worker loads the model from its directory."""
    from aiayn.decoding.workers import WorkerPool

    alone = Translator.from_pretrained(transformer_dir)
    pool = WorkerPool(model=alone.model, model_dir=alone.model_dir, workers=2, start_method="spawn")
    assert pool._pool._mp_context.get_start_method() == "spawn"
    spawned = Translator(alone.model, alone.tokenizer, alone.decode_cfg, alone.device, alone.model_dir,
                         backend=PoolEngine(model=alone.model, pool=pool))
    with spawned:
        options = dict(beam=3, n_best=2, batch_size=2)
        assert _summary(spawned.translate(SENTENCES, **options)) == _summary(alone.translate(SENTENCES, **options))
    assert spawned.pool is None  # closed by the with block


def test_attention_maps_come_from_this_process(pooled, transformer_dir):
    alone = Translator.from_pretrained(transformer_dir).translate(["forty five"], beam=2, return_attention=True)[0]
    result = pooled.translate(["forty five"], beam=2, return_attention=True)[0]
    assert set(result.attention) == set(alone.attention) >= {"cross", "decoder_self", "encoder_self"}
    for kind, maps in alone.attention.items():
        assert np.array_equal(result.attention[kind], maps), kind


def test_a_time_budget_stops_the_workers(pooled):
    with pytest.raises(BudgetExceeded, match="time budget"):
        pooled.translate(SENTENCES * 20, beam=4, batch_size=4, time_limit=0.0)
    assert pooled.translate(["nine"], beam=2)[0].text is not None  # the pool still serves


@pytest.mark.parametrize("workers", [0, -1, True, 1.5, "2", 100_000])
def test_bad_worker_counts_are_refused(transformer_dir, workers):
    with pytest.raises(AiaynError, match="workers"):
        Translator.from_pretrained(transformer_dir, workers=workers)


def _kill_one_worker(pool) -> None:
    """As the out-of-memory killer does; Python's executor then ends the other workers too."""
    os.kill(next(iter(pool._pool._processes.values())).pid, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while pool.alive() == pool.workers and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_killed_worker_is_replaced(transformer_dir, one_thread):
    translator = Translator.from_pretrained(transformer_dir, workers=2)
    expected = Translator.from_pretrained(transformer_dir).translate(SENTENCES, beam=2, batch_size=1)
    _kill_one_worker(translator.pool)
    assert translator.pool.alive() < 2
    assert _summary(translator.translate(SENTENCES, beam=2, batch_size=1)) == _summary(expected)
    assert translator.pool.alive() == 2
    translator.close()


def test_workers_that_keep_dying_are_a_clear_error(transformer_dir, monkeypatch):
    from aiayn.decoding import workers

    monkeypatch.setattr(workers, "MAX_REPLACEMENTS", 1)
    translator = Translator.from_pretrained(transformer_dir, workers=2)
    _kill_one_worker(translator.pool)
    assert len(translator.translate(SENTENCES, beam=2)) == len(SENTENCES)  # replaced once
    _kill_one_worker(translator.pool)
    for _ in range(2):  # and no more: the same clear error every time
        with pytest.raises(workers.WorkersDown, match="died 2 times in .* no longer replaced: restart with fewer"):
            translator.translate(SENTENCES, beam=2)
    assert translator.pool.alive() == 0 and translator.pool.down
    translator.close()


def test_a_pool_shut_down_by_another_thread_is_a_clear_error(transformer_dir):
    """The server runs one batch per worker from two threads: when one finds a worker dead and closes the
    pool, the other's next call must get the same clear error, not the executor's RuntimeError."""
    translator = Translator.from_pretrained(transformer_dir, workers=2)
    translator.pool._pool.shutdown()  # as _died does from the other thread, before it clears the attribute
    with pytest.raises(AiaynError, match="worker processes were closed"):
        translator.translate(SENTENCES, beam=2)
    translator.close()


@pytest.mark.slow
@pytest.mark.parametrize("end", ["SIGKILL", "SIGTERM"])
def test_workers_end_when_their_parent_dies(transformer_dir, tmp_path, end):
    """A process that dies without closing its pool (killed; `aiayn serve` stopped with SIGTERM, which
    uvicorn re-raises after its shutdown, so no exit hook runs) must not leave its workers behind."""
    script = (f"import os, signal, sys\n"
              f"from aiayn.decoding.translator import Translator\n"
              f"t = Translator.from_pretrained({str(transformer_dir)!r}, workers=2)\n"
              f"print(*t.pool._pool._processes, flush=True)\n"
              f"os.kill(os.getpid(), signal.{end})\n")
    out = tmp_path / "out"
    with open(out, "w") as stdout:  # a file, not a pipe: workers left behind would hold a pipe open
        parent = subprocess.run([sys.executable, "-c", script], stdout=stdout, stderr=subprocess.STDOUT, timeout=120)
    assert parent.returncode == -getattr(signal, end), out.read_text()
    workers = [int(pid) for pid in out.read_text().split()]
    assert len(workers) == 2
    deadline = time.monotonic() + 20
    while (alive := [pid for pid in workers if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in alive:  # leave no process behind even when the test fails
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"workers {alive} outlived their parent"


def _alive(pid: int) -> bool:
    """Whether pid runs (an orphan's zombie, reaped by init, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("option", [["--alignment"], ["--sample"]])
def test_cli_refuses_workers_where_this_process_decodes(transformer_dir, tmp_path, capsys, option):
    src = tmp_path / "in.txt"
    src.write_text("nine\n")
    argv = ["translate", "--model", str(transformer_dir), "--input", str(src), "--workers", "2", *option]
    assert main(argv) == 2
    assert f"{option[0]} decodes in this process" in capsys.readouterr().err


def test_cli_translates_a_file_with_workers(transformer_dir, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(SENTENCES) + "\n")
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}.txt"
        assert main(["translate", "--model", str(transformer_dir), "--input", str(src), "--output", str(out),
                     "--batch-size", "2", "--workers", workers]) == 0
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == len(SENTENCES)


@pytest.mark.parametrize("n, batch_size, workers, size, batches", [
    (400, 64, 2, 50, 8),  # 7 batches of at most 64 -> 8 of 50: the two workers end together
    (1000, 64, 2, 63, 16),  # 16 already: each a little smaller
    (64, 64, 2, 32, 2),  # one batch -> one per worker
    (1, 64, 2, 1, 1),
    (10, 1, 2, 1, 10),
    (400, 64, 3, 45, 9),
])
def test_even_batch_size(n, batch_size, workers, size, batches):
    assert even_batch_size(n, batch_size, workers) == size <= batch_size
    assert -(-n // size) == batches


def test_the_server_decodes_plain_requests_in_the_workers(pooled, transformer_dir, one_thread):
    """`aiayn serve --workers N`: plain translations go through the pool (sentences that arrive together are
    shared between the workers, one batch each), attention maps and the page's step view stay in the
    server's process."""
    import asyncio

    import httpx

    from aiayn.web.app import create_app

    alone = Translator.from_pretrained(transformer_dir)
    texts = [s for s in SENTENCES if s]
    searched, sampled_on = [], []
    search = pooled.pool.search
    pooled.pool.search = lambda batches, *rest: searched.append(list(map(len, batches))) or search(batches, *rest)

    def translate(sentences, *, options=None, **rest):
        if options is not None and options.sampling is not None:
            sampled_on.append(threading.current_thread().name)
        return Translator.translate(pooled, sentences, options=options, **rest)

    pooled.translate = translate

    async def requests():
        app = create_app(pooled)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://aiayn") as client:
            batch = await client.post("/api/translate_batch", json={"texts": texts, "beam": 3})
            maps = await client.post("/api/translate", json={"text": texts[0], "beam": 3, "attention": True})
            sampled = await client.post("/api/translate", json={"text": texts[0], "attention": False,
                                                                "sampling": {"temperature": 1.5, "seed": 11}})
            return batch, maps, sampled

    try:
        batch, maps, sampled = asyncio.run(requests())
    finally:
        pooled.pool.search = search
        del pooled.translate
    assert batch.status_code == 200 and maps.status_code == 200, (batch.text, maps.text)
    expected = alone.translate(texts, beam=3)
    assert [t["translation"] for t in batch.json()["translations"]] == [r.text for r in expected]
    assert searched == [[3], [3]], "6 sentences at once: 2 calls of one batch each, one per worker"
    assert maps.json()["translation"] == expected[0].text and "cross" in maps.json()["maps"]
    # sampling decodes in the server's process, on the model's thread (not a batch thread of the pool)
    assert sampled.status_code == 200, sampled.text
    seeded = alone.sample([texts[0]], options=SamplingOptions(temperature=1.5, seed=11))[0]
    assert sampled.json()["translation"] == seeded.text
    assert [name.split("_")[0] for name in sampled_on] == ["aiayn-decode"]


def test_the_server_replaces_a_killed_worker_and_health_says_so(transformer_dir, one_thread, monkeypatch):
    """`aiayn serve --workers 2` with a worker killed: /api/health says so, the next plain request is
    translated by new workers; when they died too often, plain requests get a 503 naming the cause, and
    /api/health answers 503 "down"."""
    import asyncio

    import httpx

    from aiayn.decoding import workers
    from aiayn.web.app import create_app

    translator = Translator.from_pretrained(transformer_dir, workers=2)
    expected = Translator.from_pretrained(transformer_dir).translate(["forty five"], beam=2)[0].text
    plain = {"text": "forty five", "beam": 2, "attention": False}

    async def requests():
        app = create_app(translator)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://aiayn") as client:
            seen = [(await client.get("/api/health")).json()]
            _kill_one_worker(translator.pool)
            seen.append((await client.get("/api/health")).json())
            seen.append(await client.post("/api/translate", json=plain))
            seen.append((await client.get("/api/health")).json())
            monkeypatch.setattr(workers, "MAX_REPLACEMENTS", 1)  # one replacement so far: no more
            _kill_one_worker(translator.pool)
            seen.append(await client.post("/api/translate", json=plain))
            seen.append(await client.get("/api/health"))
            return seen

    try:
        ok, degraded, translated, healed, refused, down = asyncio.run(requests())
    finally:
        translator.close()
    assert ok["status"] == "ok" and ok["workers"] == {"alive": 2, "of": 2}
    assert degraded["status"] == "degraded" and degraded["workers"]["alive"] < 2
    assert translated.status_code == 200 and translated.json()["translation"] == expected, translated.text
    assert healed["status"] == "ok" and healed["workers"] == {"alive": 2, "of": 2}
    assert refused.status_code == 503 and "no longer replaced" in refused.json()["error"]
    assert down.status_code == 503 and down.json()["status"] == "down"
    assert down.json()["workers"] == {"alive": 0, "of": 2}
