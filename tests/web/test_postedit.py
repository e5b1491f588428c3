"""Post-editing (POST /api/alternatives): the top-k next tokens equal the model's softmax; a picked token's text
prefix encodes back to the same pieces; the page's re-decoded translation (POST /api/translate with that
target_prefix) equals `aiayn translate --target-prefix` and the library's maps."""

import json

import numpy as np
import pytest
import torch

from aiayn.data.synthetic import number_task
from aiayn.inspect.maps.capture import maps_of

SENTENCE = "forty five thousand six hundred"


@pytest.fixture(scope="module")
def answer(client):
    response = client.post("/api/translate", json={"text": SENTENCE, "beam": None, "diagnostics": True})
    assert response.status_code == 200, response.text
    return response.json()


def alternatives_at(client, answer, t, k=10):
    response = client.post("/api/alternatives", json={"source_ids": answer["source_ids"],
                                                      "target_input_ids": answer["target_input_ids"][: t + 1], "k": k})
    assert response.status_code == 200, response.text
    return response.json()


def test_alternatives_equal_the_models_softmax(client, answer, translator):
    src = torch.tensor([answer["source_ids"]])
    tgt_in = torch.tensor([answer["target_input_ids"]])
    with torch.no_grad():
        probs = torch.softmax(translator.model(src, tgt_in)[0].float(), dim=-1)  # (T, V)
    for t in range(len(answer["target_tokens"])):
        found = alternatives_at(client, answer, t)
        assert found["position"] == t
        ids = [a["id"] for a in found["alternatives"]]
        expected = torch.topk(probs[t], 10)
        assert ids == expected.indices.tolist()
        np.testing.assert_allclose([a["prob"] for a in found["alternatives"]], expected.values.numpy(), atol=1e-5)
        own = translator.tokenizer.piece_to_id(answer["target_tokens"][t])
        assert abs(float(probs[t, own]) - answer["token_probs"][t]) < 1e-5


def test_text_prefixes_of_the_demo_vocabulary_encode_back_to_their_pieces(client, answer, translator):
    tok = translator.tokenizer
    for _, target in number_task(200, 10, 10, seed=3)["test"]:  # the demo task's own target sentences
        ids = tok.encode_target([target])[0]
        for t in range(1, len(ids) + 1):
            assert tok.encode_target([tok.decode(ids[:t])])[0] == ids[:t], (target, t)
    offered = 0
    for t in range(len(answer["target_tokens"])):
        for alt in alternatives_at(client, answer, t, k=20)["alternatives"]:
            pieces = answer["target_input_ids"][1: t + 1] + [alt["id"]]
            assert alt["prefix"] == tok.decode(pieces)
            assert alt["pickable"] == (alt["id"] not in {tok.eos_id, tok.pad_id, tok.bos_id, tok.unk_id}
                                       and tok.encode_target([alt["prefix"]])[0] == pieces)
            offered += alt["pickable"]
    assert offered > 0


def test_a_pick_redecodes_as_the_cli_with_that_prefix(client, answer, translator, transformer_dir, tmp_path):
    from aiayn.cli import main

    t, alt = next((t, a) for t in range(len(answer["target_tokens"]))
                  for a in alternatives_at(client, answer, t)["alternatives"]
                  if a["pickable"] and a["piece"] != answer["target_tokens"][t])
    picked = client.post("/api/translate", json={"text": SENTENCE, "beam": None, "diagnostics": True,
                                                 "target_prefix": alt["prefix"]}).json()
    chosen = answer["target_input_ids"][1: t + 1] + [alt["id"]]
    assert [translator.tokenizer.piece_to_id(p) for p in picked["target_tokens"][: t + 1]] == chosen
    (tmp_path / "in.txt").write_text(SENTENCE + "\n")
    (tmp_path / "prefix.txt").write_text(alt["prefix"] + "\n")
    assert main(["translate", "--model", str(transformer_dir), "--input", str(tmp_path / "in.txt"),
                 "--target-prefix", str(tmp_path / "prefix.txt"), "--output", str(tmp_path / "out.txt")]) == 0
    assert picked["translation"] == (tmp_path / "out.txt").read_text().rstrip("\n")
    result = translator.translate([SENTENCE], target_prefix=[alt["prefix"]], return_attention=True)[0]
    library = maps_of(result, translator)
    assert picked["target_tokens"] == library.target_tokens
    for kind, value in library.maps.items():
        np.testing.assert_allclose(np.array(picked["maps"][kind]), value, atol=6e-4)


def test_bad_alternative_requests_get_one_line(client, answer):
    bad = client.post("/api/alternatives", json={"source_ids": [10_000], "target_input_ids": [1]})
    assert bad.status_code == 400 and "vocabulary" in bad.json()["error"] and "\n" not in bad.json()["error"]
    no_bos = client.post("/api/alternatives", json={"source_ids": answer["source_ids"],
                                                    "target_input_ids": answer["target_input_ids"][1:2]})
    assert no_bos.status_code == 400 and "<s>" in no_bos.json()["error"]
    assert json.loads(client.get("/api/timeline").text) == {"steps": [], "sentences": []}
