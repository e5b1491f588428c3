"""The page's "contributions" measure over the API: /api/translate with "measure": "contributions" answers the
value-norm maps ||alpha_ij f(x_j)|| (rows normalised, as `aiayn attention --measure contributions` draws them)
and the word alignment read from them; a weights answer stays as it was; the step view's ||f(x_j)|| and
shares equal aiayn.inspect.contributions' own numbers."""

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from aiayn.inspect.alignment.head_choice import maps_alignment
from aiayn.inspect.contributions import measure_contributions
from aiayn.inspect.contributions.maps import contribution_maps
from aiayn.inspect.maps.capture import capture
from aiayn.web.app import create_app

SENTENCE, TARGET = "forty five thousand", "fünf und vierzig tausend"


def _value_norms(translator, body):
    """The answer's own ids, teacher-forced -> {kind: (L, H, Q, K)} ||alpha^h_ij f_h(x_j)||."""
    src, tgt_in = torch.tensor([body["source_ids"]]), torch.tensor([body["target_input_ids"]])
    found = measure_contributions(translator.model, src, tgt_in).value_norms
    return {kind: maps[0].double().numpy() for kind, maps in found.items()}


@pytest.mark.parametrize("forced", [False, True])
def test_contributions_answer_holds_the_row_normalised_value_norm_maps(client, translator, forced):
    request = {"text": SENTENCE, **({"target": TARGET} if forced else {})}
    weights = client.post("/api/translate", json=request).json()
    body = client.post("/api/translate", json={**request, "measure": "contributions"}).json()
    assert body["measure"] == "contributions" and "measure" not in weights
    same = ("translation", "source_tokens", "target_tokens", "source_ids", "target_input_ids", "token_probs", "words")
    assert {k: body[k] for k in same} == {k: weights[k] for k in same}
    for kind, norms in _value_norms(translator, body).items():
        expected = norms / norms.sum(-1, keepdims=True)
        got = np.array(body["maps"][kind])
        np.testing.assert_allclose(got, expected, atol=5e-4 + 1e-6)
        assert np.abs(got - np.array(weights["maps"][kind])).max() > 0.01, f"{kind}: contributions equal weights"


def test_contributions_alignment_is_read_from_the_contribution_maps(client, translator):
    body = client.post("/api/translate", json={"text": SENTENCE, "target": TARGET, "measure": "contributions"}).json()
    maps = contribution_maps(translator, capture(translator, SENTENCE, target=TARGET))
    assert body["alignment"]["links"] == maps_alignment(maps, None, None)


def test_measure_is_refused_in_one_line_where_it_cannot_apply(client, rnn_dir):
    from aiayn.decoding.translator import Translator

    plain = client.post("/api/translate", json={"text": SENTENCE, "attention": False, "measure": "contributions"})
    assert plain.status_code == 400 and "attention" in plain.json()["error"]
    assert client.post("/api/translate", json={"text": SENTENCE, "measure": "norms"}).status_code == 422
    rnn = TestClient(create_app(Translator.from_pretrained(rnn_dir)))
    refused = rnn.post("/api/translate", json={"text": SENTENCE, "measure": "contributions"})
    assert refused.status_code == 400 and "Transformer" in refused.json()["error"]
    assert "\n" not in refused.json()["error"]
    assert rnn.post("/api/translate", json={"text": SENTENCE}).status_code == 200


@pytest.mark.parametrize("kind,layer,head,query", [("encoder_self", 0, 1, 2), ("decoder_self", 1, 3, 3),
                                                    ("cross", 1, 0, 2)])
def test_step_value_norms_times_weights_are_the_value_norm_maps(client, translator, kind, layer, head, query):
    body = client.post("/api/translate", json={"text": SENTENCE, "target": TARGET}).json()
    ids = {"source_ids": body["source_ids"], "target_input_ids": body["target_input_ids"]}
    step = client.post("/api/step", json={**ids, "kind": kind, "layer": layer, "head": head, "query": query}).json()
    row = _value_norms(translator, body)[kind][layer, head, query]  # alpha_j ||f(x_j)||
    weights, norms = np.array(step["weights"]), np.array(step["value_norms"])
    np.testing.assert_allclose(weights * norms, row, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(step["contributions"], row / row.sum(), atol=1e-6)
    assert np.all(norms > 0) and not np.allclose(norms, norms[0]), "one norm per key, not a constant"
