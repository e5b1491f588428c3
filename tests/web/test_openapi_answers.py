"""Every route's real answers fit the shapes /openapi.json declares for them (aiayn.web.shapes): one
representative request per route and answer kind, and the refusals (400, 404, 422), each validated against the
schema of its status code in the app's own OpenAPI document."""

import pytest

jsonschema = pytest.importorskip("jsonschema")  # installed with nbformat (the docs' notebooks)


@pytest.fixture(scope="module")
def openapi(client):
    return client.get("/openapi.json").json()


def _requests(tok):
    src = tok.encode(["forty five"])[0] + [tok.eos_id]
    step = {"source_ids": src, "target_input_ids": [tok.bos_id], "kind": "cross", "layer": 0, "head": 0, "query": 0}
    return [
        ("get", "/api/health", None, 200),
        ("post", "/api/translate", {"text": "forty five"}, 200),
        ("post", "/api/translate", {"text": "forty five", "diagnostics": True}, 200),
        ("post", "/api/translate", {"text": "forty five", "measure": "contributions"}, 200),
        ("post", "/api/translate", {"text": "forty five", "attention": False, "measure": "contributions"}, 400),
        ("post", "/api/translate", {"text": "forty five", "attention": False}, 200),
        ("post", "/api/translate", {"text": "forty five", "attention": False, "beam": 2, "n_best": 2}, 200),
        ("post", "/api/translate", {"text": "forty five", "attention": False, "diagnostics": True}, 200),
        ("post", "/api/translate", {"text": "forty five", "attention": False, "trace": True}, 200),
        ("post", "/api/translate", {"text": "forty five", "n_best": 2}, 400),
        ("post", "/api/translate", {"text": "forty five", "attention": False,
                                    "without_heads": [{"kind": "cross", "layer": 0, "head": 1}]}, 200),
        ("post", "/api/translate", {"text": "forty five", "attention": False,
                                    "without_heads": [{"kind": "cross", "layer": 9, "head": 1}]}, 400),
        ("post", "/api/translate", {"text": ""}, 422),
        ("post", "/api/translate_batch", {"texts": ["forty five", "three hundred"], "beam": 2}, 200),
        ("post", "/api/score", {"sources": ["forty five"], "targets": ["s"]}, 200),
        ("post", "/api/score", {"sources": ["forty five"], "targets": ["s", "t"]}, 400),
        ("post", "/api/step", step, 200),
        ("get", "/api/info", None, 200),
        ("get", "/api/positions", None, 200),
        ("post", "/api/alternatives", {"source_ids": src, "target_input_ids": [tok.bos_id], "k": 3}, 200),
        ("post", "/api/alternatives", {"source_ids": src, "target_input_ids": [tok.bos_id], "k": "3"}, 422),
        ("get", "/api/timeline", None, 200),
        ("get", "/api/timeline/5", None, 404),
    ]


def _route(path: str) -> str:
    return "/api/timeline/{step}" if path.startswith("/api/timeline/") else path


def test_every_route_declares_its_answer(openapi):
    for path, methods in openapi["paths"].items():
        if path.startswith("/api/"):
            for method, op in methods.items():
                assert "schema" in op["responses"]["200"]["content"]["application/json"], (method, path)
                assert op["responses"]["200"]["content"]["application/json"]["schema"], (method, path)


def test_answers_fit_their_schemas(client, translator, openapi):
    seen = set()
    for method, path, body, status in _requests(translator.tokenizer):
        answer = client.post(path, json=body) if method == "post" else client.get(path)
        assert answer.status_code == status, (path, body, answer.text)
        op = openapi["paths"][_route(path)][method]
        assert str(status) in op["responses"], f"{method} {path} does not declare {status}"
        schema = op["responses"][str(status)]["content"]["application/json"]["schema"]
        # the document's components beside the schema, so its #/components/schemas/... references resolve
        jsonschema.validate(answer.json(), {**schema, "components": openapi["components"]},
                            cls=jsonschema.Draft202012Validator)
        seen.add((method, _route(path)))
    declared = {(m, p) for p, ms in openapi["paths"].items() if p.startswith("/api/") for m in ms}
    assert seen == declared


def test_a_wrong_answer_is_caught(openapi):
    """The check has teeth: an answer missing a declared field fails its schema."""
    schema = openapi["paths"]["/api/score"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"scores": [{"score": 1.0}]}, {**schema, "components": openapi["components"]},
                            cls=jsonschema.Draft202012Validator)
