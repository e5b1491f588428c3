"""POST /api/translate with "without_heads" (aiayn.web.ablated): its translation equals the Translator's with
those heads taken out by aiayn.inspect.ablation.heads_removed, its "with_every_head" the plain translation;
taking out no head changes nothing; heads the model lacks and the modes it does not combine with are refused in
one line naming the field."""

import pytest
from fastapi.testclient import TestClient

from aiayn.inspect.ablation import Head, all_heads, heads_removed
from aiayn.web import ablated
from aiayn.web.app import create_app
from aiayn.web.limits import TranslateRequest

SENTENCES = ["forty five thousand", "three hundred twelve"]


def ask(client, text, heads, **more):
    return client.post("/api/translate", json={"text": text, "attention": False, "beam": 3, "without_heads": heads,
                                               **more})


def direct(translator, text, heads, **options):
    with heads_removed(translator.model, heads):
        return translator.translate([text], beam=3, **options)[0]


def test_without_heads_equals_the_translator_with_those_heads_removed(client, translator):
    changed = 0
    for text in SENTENCES:
        plain = client.post("/api/translate", json={"text": text, "attention": False, "beam": 3}).json()
        for head in all_heads(translator.model):
            body = ask(client, text, [{"kind": head.kind, "layer": head.layer, "head": head.head}]).json()
            expected = direct(translator, text, [head])
            assert (body["translation"], body["target_tokens"]) == (expected.text, expected.tokens)
            assert body["score"] == pytest.approx(expected.score, rel=1e-6, abs=1e-5)
            assert body["log_prob"] == pytest.approx(expected.log_prob, rel=1e-6, abs=1e-5)
            every = body["with_every_head"]
            assert every["translation"] == plain["translation"]
            assert every["score"] == pytest.approx(plain["score"], rel=1e-6, abs=1e-5)
            assert body["without_heads"] == [{"kind": head.kind, "layer": head.layer, "head": head.head}]
            changed += abs(body["score"] - plain["score"]) > 1e-4 or body["translation"] != plain["translation"]
    assert changed > 0  # some head matters to these sentences, so the comparison has teeth


def test_several_heads_at_once_each_once_in_model_order(client, translator):
    heads = [Head("cross", 1, 0), Head("encoder_self", 0, 1), Head("cross", 1, 0)]
    body = ask(client, SENTENCES[0], [{"kind": h.kind, "layer": h.layer, "head": h.head} for h in heads],
               n_best=2).json()
    expected = direct(translator, SENTENCES[0], heads, n_best=2)
    assert body["translation"] == expected.text and body["score"] == pytest.approx(expected.score, rel=1e-6, abs=1e-5)
    assert [pair[0] for pair in body["n_best"]] == [text for text, _ in expected.n_best]
    assert body["without_heads"] == [{"kind": "cross", "layer": 1, "head": 0},
                                     {"kind": "encoder_self", "layer": 0, "head": 1}]


def test_no_head_taken_out_is_the_plain_translation(client):
    for text in SENTENCES:
        plain = client.post("/api/translate", json={"text": text, "attention": False, "beam": 3}).json()
        body = ask(client, text, []).json()
        for answer in (body, body["with_every_head"]):
            assert answer["translation"] == plain["translation"]
            assert answer["score"] == pytest.approx(plain["score"], rel=1e-6, abs=1e-5)
        assert body["target_tokens"] == plain["target_tokens"] and body["without_heads"] == []


def test_the_model_is_whole_again_after_a_request(client, translator):
    before = translator.translate(SENTENCES, beam=3)
    ask(client, SENTENCES[0], [{"kind": "cross", "layer": 0, "head": 0}])
    assert [(r.text, r.score) for r in translator.translate(SENTENCES, beam=3)] == [(r.text, r.score) for r in before]


@pytest.mark.parametrize(("head", "field", "bound"), [
    ({"kind": "encoder_self", "layer": 9, "head": 0}, "without_heads[1].layer", "0 to "),
    ({"kind": "cross", "layer": 0, "head": 99}, "without_heads[1].head", "0 to "),
])
def test_a_head_the_model_lacks_is_refused_naming_it(client, head, field, bound):
    answer = ask(client, SENTENCES[0], [{"kind": "cross", "layer": 0, "head": 0}, head])
    assert answer.status_code == 400
    message = answer.json()["error"]
    assert message.startswith(field) and bound in message and "\n" not in message


@pytest.mark.parametrize("head", [{"kind": "encoder", "layer": 0, "head": 0}, {"kind": "cross", "layer": -1, "head": 0},
                                  {"kind": "cross", "layer": "0", "head": 0}, {"kind": "cross", "layer": 0}])
def test_malformed_heads_are_422_naming_the_field(client, head):
    answer = ask(client, SENTENCES[0], [head])
    assert answer.status_code == 422
    assert all(d["loc"][:3] == ["body", "without_heads", 0] for d in answer.json()["detail"])


@pytest.mark.parametrize(("more", "word"), [({"attention": True}, "attention"), ({"trace": True}, "trace"),
                                            ({"diagnostics": True}, "diagnostics"), ({"sampling": {}}, "sampling")])
def test_modes_it_does_not_combine_with_are_refused(client, more, word):
    answer = ask(client, SENTENCES[0], [], **more)
    assert answer.status_code == 400 and word in answer.json()["error"]


def test_other_engines_and_recurrent_models_are_refused(rnn_dir):
    from aiayn.decoding.translator import Translator

    req = TranslateRequest(text="forty five", attention=False, without_heads=[])
    assert "--engine native" in ablated.refusal(req, attention_maps=False)
    rnn = TestClient(create_app(Translator.from_pretrained(rnn_dir)))
    answer = ask(rnn, "forty five", [{"kind": "cross", "layer": 0, "head": 0}])
    assert answer.status_code == 400 and "Transformer" in answer.json()["error"]


@pytest.mark.slow  # worker processes
def test_worker_processes_leave_the_ablated_search_to_the_servers_own_model(transformer_dir, translator):
    """With --workers the plain searches run in other processes, whose weights no hook reaches: the heads'
    removal still shows, since both of its searches run on this process's model."""
    from aiayn.decoding.translator import Translator

    head = Head("cross", 1, 0)
    with Translator.from_pretrained(transformer_dir, workers=2) as pooled:
        body = ask(TestClient(create_app(pooled)), SENTENCES[0], [{"kind": "cross", "layer": 1, "head": 0}]).json()
    expected, plain = direct(translator, SENTENCES[0], [head]), translator.translate(SENTENCES[:1], beam=3)[0]
    assert abs(expected.score - plain.score) > 1e-3  # the workers' untouched model would answer `plain`
    assert body["translation"] == expected.text
    assert body["score"] == pytest.approx(expected.score, rel=1e-6, abs=1e-5)
