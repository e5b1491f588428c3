"""The beam search, shown (aiayn.decoding.beam_trace): replaying a trace gives exactly the n-best list."""

import pytest
from fastapi.testclient import TestClient

from aiayn.data.synthetic import number_task
from aiayn.decoding.beam_trace import FINISHED
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.web.app import create_app


@pytest.fixture(scope="module")
def translator(transformer_dir):
    return Translator.from_pretrained(transformer_dir)


SOURCES = [en for en, _ in number_task(10, 10, 12, seed=3)["test"]]


@pytest.mark.parametrize("early", [False, True])
def test_replaying_the_trace_gives_the_n_best_bit_for_bit(translator, early):
    for sentence in SOURCES:
        trace = translator.trace(sentence, beam=4, n_best=4, early_stopping=early)
        result = translator.translate([sentence], beam=4, n_best=4, early_stopping=early)[0]
        assert [(c.text, c.score) for c in trace.replay()] == result.n_best  # floats compared exactly
        listed = [trace.steps[i].candidates[j] for i, j in trace.ranked()]  # the REST answer's "ranked"
        assert [(c.text, c.score) for c in listed[:4]] == result.n_best
        assert len(listed) == len(trace.finished()) and all(c.status in FINISHED for c in listed)
        assert trace.steps[-1].done is not None and all(s.done is None for s in trace.steps[:-1])
        for step in trace.steps[:-1]:  # K live hypotheses go on after every step but the last
            assert sum(c.status == "kept" for c in step.candidates) == 4
            assert all(c.score == c.log_prob / step.length_penalty for c in step.candidates)


def test_trace_with_constraints_and_prefix_replays(translator):
    for sentence in SOURCES[:6]:
        trace = translator.trace(sentence, n_best=2, constraints=["neun", "und acht"], target_prefix="drei")
        result = translator.translate([sentence], n_best=2, constraints=[["neun", "und acht"]],
                                      target_prefix=["drei"])[0]
        assert [(c.text, c.score) for c in trace.replay()] == result.n_best
        kept = [c for s in trace.steps for c in s.candidates if c.status == "kept"]
        assert all(c.met is not None for c in kept)
        assert all(c.status not in FINISHED or "neun" in c.text for s in trace.steps for c in s.candidates
                   if c.status == "finished")


def test_trace_refusals(translator):
    with pytest.raises(AiaynError, match="a trace shows a beam search: drop sampling"):
        from aiayn.decoding.sampling import SamplingOptions
        translator.trace("one", sampling=SamplingOptions(seed=1))
    with pytest.raises(AiaynError, match="blank"):
        translator.trace("  ")


def test_rest_trace(transformer_dir, translator):
    client = TestClient(create_app(Translator.from_pretrained(transformer_dir)))
    r = client.post("/api/translate", json={"text": SOURCES[0], "attention": False, "trace": True, "n_best": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["translation"] == translator.translate([SOURCES[0]])[0].text
    steps = body["trace"]["steps"]
    fields = {"tokens", "pieces", "text", "log_prob", "score", "status", "met"}
    assert steps and fields <= set(steps[0]["candidates"][0])
    listed = [steps[i]["candidates"][j] for i, j in body["trace"]["ranked"]]  # the page's list, as it comes
    finished = [c for s in steps for c in s["candidates"] if c["status"] in FINISHED]
    assert listed[0]["text"] == body["translation"] and len(listed) == len(finished)
    assert [c["score"] for c in listed] == sorted([c["score"] for c in listed], reverse=True)  # no constraints
    r = client.post("/api/translate", json={"text": SOURCES[0], "trace": True})
    assert r.status_code == 400 and "attention" in r.json()["error"]
