import json
import re

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient

from aiayn.decoding.translator import Translator
from aiayn.web.app import create_app


@pytest.fixture(scope="module")
def client(transformer_dir):
    return TestClient(create_app(Translator.from_pretrained(transformer_dir)))


def test_health_page_and_its_files(client):
    assert client.get("/api/health").json()["status"] == "ok"
    page = client.get("/")
    assert page.status_code == 200
    scripts = re.findall(r'<script type="module" src="/static/([\w.]+)"', page.text)
    assert scripts == ["app.js"] and 'href="/static/style.css"' in page.text
    seen = set()
    while len(seen) < len(scripts):  # every module the page imports, one import at a time
        for name in [n for n in scripts if n not in seen]:
            seen.add(name)
            imports = re.findall(r'from "\./([\w.]+)"', client.get(f"/static/{name}").text)
            scripts += [i for i in imports if i not in scripts]
    assert {"i18n.js", "api.js", "matrix.js", "step.js"} <= set(scripts)
    for name in scripts + ["style.css"]:  # offline: every file the page uses comes from this server
        r = client.get(f"/static/{name}")
        assert r.status_code == 200 and r.headers["content-type"].startswith(("text/javascript", "text/css"))
        text = r.text.replace('"http://www.w3.org/2000/svg"', "")  # SVG's namespace name, never fetched
        assert "http://" not in text and "https://" not in text and "cdn" not in text.lower(), name
    for name in ("../app.py", "..%2Fapp.py", "nope.js", "%2e%2e%2fguards.py"):
        assert client.get(f"/static/{name}").status_code == 404


def test_page_files_are_revalidated_and_only_static_files(client):
    r = client.get("/static/app.js")
    assert r.headers["cache-control"] == "no-cache" and r.headers["content-type"].startswith("text/javascript")
    again = client.get("/static/app.js", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    for name in ("nope.js", "routes/page.py", "__init__.py", ""):  # not a page file: the API's error body
        missing = client.get(f"/static/{name}")
        assert missing.status_code == 404 and missing.json() == {"error": "no such file"}


def test_model_info(client):
    info = client.get("/api/info").json()
    assert info["arch"] == "transformer" and info["n_heads"] == 4 and info["d_k"] == info["d_model"] // 4
    assert info["n_encoder_layers"] == info["n_decoder_layers"] == 2
    assert info["multi_head"] and info["attention_kinds"] == ["encoder_self", "decoder_self", "cross"]
    assert info["positions"] == "sinusoidal" and info["d_ff"] > 0
    assert info["src_lang"] == "en" and info["tgt_lang"] == "de" and len(info["examples"]) == 3
    assert info["unk_piece"] == "<unk>" and info["max_text"] == 500
    assert len(json.dumps(info)) < 4096


def test_translate_returns_every_map(client):
    body = client.post("/api/translate", json={"text": "forty five thousand", "beam": 2}).json()
    S, T = len(body["source_tokens"]), len(body["target_tokens"])
    cross = np.array(body["maps"]["cross"])
    assert cross.shape[2:] == (T, S)
    assert np.array(body["maps"]["encoder_self"]).shape[2:] == (S, S)
    assert np.array(body["maps"]["decoder_self"]).shape[2:] == (T, T)
    np.testing.assert_allclose(cross.sum(-1), 1.0, atol=S * 5e-4)  # each weight rounded to 3 decimals
    assert isinstance(body["translation"], str) and isinstance(body["score"], float)
    ids = {"source_ids": body["source_ids"], "target_input_ids": body["target_input_ids"]}
    step = client.post("/api/step", json={**ids, "kind": "cross", "layer": 1, "head": 0, "query": 0}).json()
    np.testing.assert_allclose(step["weights"], cross[1, 0, 0], atol=1e-3)


@pytest.mark.parametrize("payload", [
    {"text": "", "beam": 2}, {"text": "x" * 501}, {"text": "nine", "beam": 0}, {"text": "nine", "beam": 99},
    {"text": "nine", "path": "/etc/passwd"}, {"beam": 2}, {"text": 5},
])
def test_bad_requests_get_4xx_json(client, payload):
    r = client.post("/api/translate", json=payload)
    assert 400 <= r.status_code < 500 and r.headers["content-type"].startswith("application/json")


def test_malformed_and_oversized_bodies(client):
    r = client.post("/api/translate", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    r = client.post("/api/translate", content=b"x" * 20000, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "error" in r.json()
    r = client.post("/api/step", json={"source_ids": [99999], "target_input_ids": [2], "kind": "cross",
                                       "layer": 0, "head": 0, "query": 0})
    assert r.status_code == 400 and "token ids" in r.json()["error"]
    r = client.post("/api/step", json={"source_ids": [5, 3], "target_input_ids": [2], "kind": "cross",
                                       "layer": 9, "head": 0, "query": 0})
    assert r.status_code == 400 and "layer=9" in r.json()["error"]


@pytest.mark.parametrize("body, needle", [
    (b'{"text": ' + b"[" * 3000 + b"]" * 3000 + b"}", "the JSON body is nested too deeply to read"),
    (b'{"text": "one", "x": ' + b'{"a":' * 2000 + b"1" + b"}" * 2000 + b"}", "nested too deeply"),
    (b'{"text": "\xff\xfe"}', "the JSON body is not UTF-8 text (an invalid byte at 10)"),
])
def test_an_unreadable_body_says_why(client, body, needle):
    """Not FastAPI's "There was an error parsing the body": what kept the JSON from being read."""
    r = client.post("/api/translate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and needle in r.json()["error"], r.text
    assert client.get("/api/nowhere").status_code == 404  # every other HTTP error as FastAPI answers it


def test_rnn_model_page_api(rnn_dir):
    client = TestClient(create_app(Translator.from_pretrained(rnn_dir)))
    body = client.post("/api/translate", json={"text": "forty five", "beam": 2}).json()
    assert set(body["maps"]) == {"cross"} and body["arch"] == "rnn"
    info = client.get("/api/info").json()
    assert info["arch"] == "rnn" and info["decoder"] == "luong" and info["score_name"].startswith("general")
    assert not info["multi_head"] and info["attention_kinds"] == ["cross"] and info["n_heads"] == 1
    assert info["positions"] is None and info["d_ff"] is None
    ids = {"source_ids": body["source_ids"], "target_input_ids": body["target_input_ids"]}
    cross = np.array(body["maps"]["cross"])
    for query in range(len(body["target_input_ids"])):  # seed 002's step reproduces every row of the map
        step = _step(client, **ids, kind="cross", layer=0, head=0, query=query)
        np.testing.assert_allclose(step["weights"], cross[0, 0, query], atol=1e-3)
        context = np.array(step["weights"]) @ np.array(step["keys"])  # a_t = sum_i alpha_i h_i
        np.testing.assert_allclose(step["context"], context, atol=1e-4)
        assert step["score_formula"] == "score(s, h_i) = s^T W_a h_i" and len(step["top"]) == 5
    r = client.post("/api/step", json={**ids, "kind": "cross", "layer": 1, "head": 0, "query": 0})
    assert r.status_code == 400 and "one attention map" in r.json()["error"]


def _step(client, source_ids, target_input_ids, kind, layer, head, query) -> dict:
    r = client.post("/api/step", json={"source_ids": source_ids, "target_input_ids": target_input_ids, "kind": kind,
                                       "layer": layer, "head": head, "query": query})
    assert r.status_code == 200, r.text
    return r.json()


def test_step_view_masks_source_padding_and_the_future(client, transformer_dir):
    """The step view weighs keys as the model does: a padding key of the source never gets weight (encoder
    self-attention and cross attention), and decoder self-attention sees only keys up to the query."""
    model = Translator.from_pretrained(transformer_dir).model
    pad = model.pad_id
    source_ids, target_input_ids = [7, 12, 9, 3, pad, pad], [2, 11, 8, 14]
    src, tgt_in = torch.tensor([source_ids]), torch.tensor([target_input_ids])
    with torch.no_grad():
        _, maps = model(src, tgt_in, return_attention=True)  # the model's own padding and causal masks
    for kind, query in (("encoder_self", 1), ("encoder_self", 4), ("cross", 2), ("decoder_self", 2)):
        step = _step(client, source_ids, target_input_ids, kind, 1, 3, query)
        row = maps[kind][0, 1, 3, query].numpy()
        if kind == "decoder_self":  # every key is listed; the future ones masked: q.k -> -inf -> 0
            assert step["mask"] == [k <= query for k in range(len(target_input_ids))]
            assert step["scores"][query + 1:] == [None] * 1 and step["weights"][query + 1:] == [0.0]
            assert np.allclose(row[query + 1:], 0.0) and step["dots"][query + 1] is not None
        else:
            assert step["mask"] == [i != pad for i in source_ids]
            assert step["scores"][-2:] == [None, None] and step["weights"][-2:] == [0.0, 0.0]
        np.testing.assert_allclose(step["weights"], row, atol=1e-5)
        np.testing.assert_allclose(step["output"], np.array(step["weights"]) @ np.array(step["values"]), atol=1e-4)
        q, keys, mask = np.array(step["query_vector"]), np.array(step["keys"]), np.array(step["mask"])
        np.testing.assert_allclose(step["dots"], keys @ q, atol=1e-3)  # the raw q.k, before / sqrt(d_k)
        scores = np.where(mask, keys @ q / np.sqrt(step["d_k"]), -np.inf)
        np.testing.assert_allclose(step["weights"], np.exp(scores - scores.max()) / np.exp(scores - scores.max()).sum(),
                                   atol=1e-4)
        np.testing.assert_allclose(np.array(step["exps"]) / step["exp_sum"], step["weights"], atol=1e-4)
        assert len(step["x_vector"]) == step["d_model"] == 64 and len(q) == step["d_k"] == 16


def test_step_answer_is_bounded(client):
    """The largest step request (every key the server takes) answers with one head's q, K, V and a few
    numbers per key, each rounded: about 12 bytes a number at most."""
    from aiayn.web.app import MAX_OUTPUT_TOKENS, MAX_SOURCE_TOKENS

    K = MAX_SOURCE_TOKENS
    r = client.post("/api/step", json={"source_ids": [5] * K, "target_input_ids": [2] * MAX_OUTPUT_TOKENS,
                                       "kind": "decoder_self", "layer": 1, "head": 0, "query": K - 1})
    assert r.status_code == 200
    step = r.json()
    d_k, d_model = step["d_k"], step["d_model"]
    assert len(step["keys"]) == len(step["values"]) == K and all(step["mask"])
    assert len(r.content) < 12 * ((2 * K + 1) * d_k + d_model + 6 * K) + 1024
