"""The explorer's computations equal the model's: teacher-forced maps (as `aiayn attention --target`), the
rest of the layer for one row (heads, Concat W^O, Add & Norm, FFN: the layer's output), the unscaled
softmax, the next-token top k, the positional-encoding table; the word alignment (as `aiayn translate
--alignment`); the warnings and the model panel's facts."""

import json
import math

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from aiayn.inspect.alignment.head_choice import maps_alignment
from aiayn.inspect.maps.capture import capture
from aiayn.inspect.maps.checks import InspectError
from aiayn.web.app import create_app
from aiayn.web.info import training_facts

SENTENCE, TARGET = "forty five thousand", "fünf und vierzig tausend"


def test_target_gives_the_teacher_forced_maps_of_aiayn_attention(client, translator):
    body = client.post("/api/translate", json={"text": SENTENCE, "target": TARGET}).json()
    expected = capture(translator, SENTENCE, target=TARGET)
    assert body["teacher_forced"] and body["translation"] == TARGET and body["score"] is None
    assert body["target_tokens"] == expected.target_tokens and body["source_tokens"] == expected.source_tokens
    for kind, maps in expected.maps.items():
        np.testing.assert_allclose(np.array(body["maps"][kind]), maps, atol=5e-4 + 1e-6)
    assert body["words"]["target"][0] == ["fünf", "und", "vierzig", "tausend", "</s>"]


def _layer_outputs(model, src, tgt_in):
    outputs = {}
    hooks = [layer.register_forward_hook(lambda m, a, o, key=(side, i): outputs.__setitem__(key, o[0]))
             for side, layers in (("encoder", model.encoder_layers), ("decoder", model.decoder_layers))
             for i, layer in enumerate(layers)]
    with torch.no_grad():
        logits = model(src, tgt_in)
    for hook in hooks:
        hook.remove()
    return outputs, logits


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_step_rest_of_the_layer_equals_the_model(client, translator, kind):
    body = client.post("/api/translate", json={"text": SENTENCE, "target": TARGET}).json()
    ids = {"source_ids": body["source_ids"], "target_input_ids": body["target_input_ids"]}
    outputs, logits = _layer_outputs(translator.model, torch.tensor([ids["source_ids"]]),
                                     torch.tensor([ids["target_input_ids"]]))
    side = "encoder" if kind == "encoder_self" else "decoder"
    for layer in (0, 1):
        step = client.post("/api/step", json={**ids, "kind": kind, "layer": layer, "head": 1, "query": 2}).json()
        rest = step["layer_step"]
        np.testing.assert_allclose(rest["layer_output"], outputs[(side, layer)][0, 2].numpy(), atol=1e-5)
        np.testing.assert_allclose(rest["heads"][1], step["output"], atol=2e-5)  # the step's head, in the list
        np.testing.assert_allclose(rest["concat"], np.concatenate(rest["heads"]), atol=1e-6)
        dots = np.array(step["dots"])
        mask = np.array(step["mask"])
        unscaled = np.where(mask, np.exp(dots - dots[mask].max()), 0)
        np.testing.assert_allclose(step["unscaled_weights"], unscaled / unscaled.sum(), atol=2e-5)
        if side == "decoder" and layer == 1:
            probs = torch.softmax(logits[0, 2].float(), -1)
            top = probs.topk(len(rest["next_tokens"]))
            assert [t["id"] for t in rest["next_tokens"]] == top.indices.tolist()
            np.testing.assert_allclose([t["prob"] for t in rest["next_tokens"]], top.values.numpy(), atol=1e-5)
        else:
            assert "next_tokens" not in rest


@pytest.mark.parametrize("temperature", [0.5, 2.0, 1])
def test_the_next_token_distribution_at_a_temperature_is_softmax_of_logits_over_t(client, translator, temperature):
    body = client.post("/api/translate", json={"text": SENTENCE, "target": TARGET}).json()
    ids = {"source_ids": body["source_ids"], "target_input_ids": body["target_input_ids"]}
    _, logits = _layer_outputs(translator.model, torch.tensor([ids["source_ids"]]),
                               torch.tensor([ids["target_input_ids"]]))
    step = client.post("/api/step", json={**ids, "kind": "cross", "layer": 1, "head": 0, "query": 2,
                                          "temperature": temperature}).json()
    rest = step["layer_step"]
    top = torch.softmax(logits[0, 2].float() / temperature, -1).topk(len(rest["next_tokens"]))
    assert rest["temperature"] == temperature
    assert [t["id"] for t in rest["next_tokens"]] == top.indices.tolist()
    np.testing.assert_allclose([t["prob"] for t in rest["next_tokens"]], top.values.numpy(), atol=1e-5)


@pytest.mark.parametrize("temperature", [0, -1, 101, "2"])
def test_a_temperature_out_of_range_is_refused(client, translator, temperature):
    body = client.post("/api/translate", json={"text": SENTENCE}).json()
    answer = client.post("/api/step", json={"source_ids": body["source_ids"], "target_input_ids":
                                            body["target_input_ids"], "kind": "cross", "layer": 1, "head": 0,
                                            "query": 0, "temperature": temperature})
    assert answer.status_code == 422 and "temperature" in answer.text


@pytest.mark.parametrize("head, layer_head, chosen", [(None, [1, None], "default"), ("1:2", [0, 1], "given"),
                                                     ("2:mean", [1, None], "given")])
def test_alignment_is_what_translate_alignment_prints(translator, head, layer_head, chosen):
    from argparse import Namespace

    from aiayn.cli.heads import alignment_function

    client = TestClient(create_app(translator, alignment=head))
    for text, target in (("seventeen x nineteen", ""), (SENTENCE, TARGET)):
        body = client.post("/api/translate", json={"text": text, "beam": 2, "target": target}).json()
        if target:  # teacher forcing: the same function on the forced maps
            links = maps_alignment(capture(translator, text, target=target), *layer_head)
        else:  # the function --alignment --alignment-head HEAD prints with
            result = translator.translate([text], beam=2, return_attention=True)[0]
            options = Namespace(alignment=True, alignment_head=head, alignment_from="weights")
            links = alignment_function(options, translator)(result)
            assert len(links.split()) >= 2
        assert body["alignment"] == {"links": links, "layer": layer_head[0], "head": layer_head[1], "chosen": chosen}
    with pytest.raises(InspectError, match="no such head"):
        create_app(translator, alignment="3:1")


def test_positions_are_the_models_table(client, translator):
    pe = client.get("/api/positions").json()
    table = translator.model.positional.table[: len(pe["table"])].numpy()
    np.testing.assert_allclose(pe["table"], table, atol=1e-6)
    assert pe["kind"] == "sinusoidal" and pe["d_model"] == table.shape[1]
    np.testing.assert_allclose(pe["dots"], table @ table.T, atol=1e-3)


def test_warnings_have_codes(client):
    german = client.post("/api/translate", json={"text": "vier und zwanzig tausend"}).json()
    assert {"code": "target_language", "lang": "de"} in german["warnings"]
    unknown = client.post("/api/translate", json={"text": "45 67 89"}).json()
    assert unknown["warnings"][0]["code"] in ("unk", "mostly_unknown")
    too_long = client.post("/api/translate", json={"text": " ".join(["x"] * 200)})
    assert too_long.status_code == 400 and too_long.json()["code"] == "too_many_tokens"


def test_stopped_at_limit_is_told(client, translator):
    result = translator.translate([SENTENCE], max_output_len=3)[0]  # the untrained model never ends in 3
    assert result.stopped_at_limit and len(result.tokens) == 3
    body = client.post("/api/translate", json={"text": SENTENCE}).json()
    ended = body["target_tokens"][-1] == "</s>"
    assert body["stopped_at_limit"] == (not ended)
    assert ({"code": "stopped_at_limit"} in body["warnings"]) == (not ended)


def test_model_panel_tells_steps_bleu_and_import(tmp_path, client):
    info = client.get("/api/info").json()
    assert info["decode"] == {"beam": 4, "alpha": 0.6, "length_penalty_form": "gnmt"}
    run = tmp_path / "run"
    step = run / "checkpoints" / "step_00000300"
    step.mkdir(parents=True)
    (step / "info.json").write_text(json.dumps({"step": 300, "epoch": 1}))
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in (
        {"step": 200, "bleu": 11.5}, {"step": 300, "bleu": 17.25}, {"step": 400, "bleu": 20.0})))
    assert training_facts(step) == {"steps": 300, "dev_bleu": 17.25}
    imported = tmp_path / "imported"
    imported.mkdir()
    (imported / "info.json").write_text(json.dumps({"output": "import", "source": "Helsinki-NLP/opus-mt-en-de"}))
    assert training_facts(imported) == {"imported_from": "Helsinki-NLP/opus-mt-en-de"}
    assert math.isfinite(info["parameters"])


def test_model_panel_says_when_the_model_was_trained_with_the_pronoun_probe(tmp_path, transformer_dir):
    import shutil

    from aiayn.decoding.translator import Translator

    probed = shutil.copytree(transformer_dir, tmp_path / "probed")
    config = probed / "config.yaml"
    text = config.read_text(encoding="utf-8")
    assert "  pronoun_probe: 0.0\n" in text
    config.write_text(text.replace("  pronoun_probe: 0.0\n", "  pronoun_probe: 1.0\n"), encoding="utf-8")
    plain = TestClient(create_app(Translator.from_pretrained(transformer_dir))).get("/api/info").json()
    told = TestClient(create_app(Translator.from_pretrained(probed))).get("/api/info").json()
    assert "pronoun_probe" not in plain and told["pronoun_probe"] == 1.0
