"""LibreTranslate's API (POST /translate, GET /languages, POST /detect): a real LibreTranslate client
(libretranslatepy, from PyPI) against `aiayn serve` in a process of its own gets the model's own translations;
in process, every way LibreTranslate takes a request (JSON, urlencoded and multipart forms, the query), lists,
lines, html, alternatives and "auto" equal the Translator's outputs, and each refusal is LibreTranslate's 400
with its words."""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from fastapi.testclient import TestClient

from aiayn.decoding.translator import Translator
from aiayn.web.app import create_app
from aiayn.web.libretranslate import MAX_ALTERNATIVES, UNNAMED
from aiayn.web.limits import MAX_BATCH_TEXTS, MAX_TEXT
from tests.paths import REPO
from tests.serving import free_port

TEXTS = ["forty five", "three hundred seven", "nine"]


def translate(client, **values):
    return client.post("/translate", json=values)


def own(translator, texts, **options) -> list[str]:
    return [r.text for r in translator.translate(texts, **options)]


@pytest.fixture(scope="module")
def server(transformer_dir):
    """`aiayn serve --model M --port P` in its own process -> its base URL."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "aiayn", "serve", "--model", str(transformer_dir), "--port",
                                str(port)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url + "api/health", timeout=5)
            break
        except (urllib.error.URLError, ConnectionError):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"aiayn serve did not start: {process.communicate()[0].decode(errors='replace')}")
            time.sleep(0.2)
    yield url
    process.terminate()
    process.wait(timeout=30)


@pytest.mark.slow  # a server process of its own: a model load and a port
def test_a_libretranslate_client_translates_through_aiayn_serve(server, translator):
    from libretranslatepy import LibreTranslateAPI

    client = LibreTranslateAPI(server)
    assert client.languages() == [{"code": "en", "name": "English", "targets": ["de"]},
                                  {"code": "de", "name": "German", "targets": []}]
    for text in TEXTS:
        assert client.translate(text, "en", "de") == own(translator, [text])[0]
    assert client.translate("forty five", "auto", "de") == own(translator, ["forty five"])[0]
    assert LibreTranslateAPI(server, api_key="any").translate("nine", "en", "de") == own(translator, ["nine"])[0]
    assert [d["language"] for d in client.detect("forty five")] == ["en", "de"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        client.translate("nine", "fr", "de")
    assert refused.value.code == 400 and json.loads(refused.value.read()) == {"error": "fr is not supported"}


@pytest.fixture(scope="module")
def lt(translator):
    return TestClient(create_app(translator))


def test_every_way_of_sending_values_translates_alike(lt, translator):
    expected = {"translatedText": own(translator, ["forty five"])[0]}
    values = {"q": "forty five", "source": "en", "target": "de"}
    assert translate(lt, **values).json() == expected
    assert lt.post("/translate", data=values).json() == expected  # urlencoded
    assert lt.post("/translate", files={k: (None, v) for k, v in values.items()}).json() == expected  # multipart
    assert lt.post("/translate", params=values).json() == expected
    # the query's values come first, as in LibreTranslate (Flask's request.values)
    assert lt.post("/translate", params={"q": "forty five"}, data={**values, "q": "nine"}).json() == expected
    # a form's CR LF is a line end like any other
    assert lt.post("/translate", data={**values, "q": "nine\r\nforty five"}).json()["translatedText"] == \
        "\n".join(own(translator, ["nine", "forty five"]))


def test_lists_lines_and_blank_texts(lt, translator):
    answer = translate(lt, q=["forty five", "", "nine\n\n  three hundred seven "], source="en", target="de").json()
    nine, three = own(translator, ["nine", "three hundred seven"])
    assert answer == {"translatedText": [own(translator, ["forty five"])[0], "", f"{nine}\n\n  {three} "]}


def test_alternatives_are_the_beams_other_translations(lt, translator):
    n = 2
    beam = max(n + 1, translator.decode_cfg.beam)
    best = translator.translate(["forty five"], beam=beam, n_best=n + 1)[0]
    others = list(dict.fromkeys(t for t, _ in best.n_best[1:] if t != best.text))
    assert others, "the test needs a model whose n-best differ"
    answer = translate(lt, q="forty five", source="en", target="de", alternatives=n).json()
    assert answer == {"translatedText": best.text, "alternatives": others}
    listed = translate(lt, q=["forty five", "nine\nnine"], source="en", target="de", alternatives=str(n)).json()
    assert listed["alternatives"] == [others, []]  # a text of several lines has none
    assert "alternatives" not in translate(lt, q="nine", source="en", target="de").json()


def test_html_keeps_its_markup_and_translates_its_text(lt, translator):
    html = ('<p class="x">forty five <b>nine</b></p>\n<script>if (a < b) nine()</script><!-- nine -->'
            '<br/>three &amp; seven')
    five, nine, three = own(translator, ["forty five", "nine", "three & seven"])
    answer = translate(lt, q=html, source="en", target="de", format="html").json()["translatedText"]
    escaped = three.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert answer == (f'<p class="x">{five} <b>{nine}</b></p>\n<script>if (a < b) nine()</script><!-- nine -->'
                      f'<br/>{escaped}')


def test_auto_detects_the_models_source_language(lt, translator):
    answer = translate(lt, q=["forty five", "drei und vier"], source="auto", target="de").json()
    assert answer["translatedText"] == own(translator, ["forty five", "drei und vier"])
    first, second = answer["detectedLanguage"]
    assert first["language"] == second["language"] == "en"
    assert first["confidence"] > 50 > second["confidence"]  # the second is German words
    detected = lt.post("/detect", data={"q": "drei und vier"}).json()
    assert [d["language"] for d in detected] == ["de", "en"] and detected[0]["confidence"] > 50


@pytest.mark.parametrize(("values", "words"), [
    ({"source": "en", "target": "de"}, "Invalid request: missing q parameter"),
    ({"q": "", "source": "en", "target": "de"}, "Invalid request: missing q parameter"),
    ({"q": [], "source": "en", "target": "de"}, "Invalid request: missing q parameter"),
    ({"q": "nine", "target": "de"}, "Invalid request: missing source parameter"),
    ({"q": "nine", "source": "en"}, "Invalid request: missing target parameter"),
    ({"q": "nine", "source": "en", "target": "zz"}, "zz is not supported"),
    ({"q": "nine", "source": "xx", "target": "de"}, "xx is not supported"),
    ({"q": "nine", "source": "de", "target": "en"},
     "English (en) is not available as a target language from German (de)"),
    ({"q": "nine", "source": "en", "target": "de", "format": "xml"}, "xml format is not supported"),
    ({"q": "nine", "source": "en", "target": "de", "alternatives": "some"},
     "Invalid request: alternatives parameter is not a number"),
    ({"q": "nine", "source": "en", "target": "de", "alternatives": MAX_ALTERNATIVES + 1},
     f"Invalid request: alternatives parameter must be <= {MAX_ALTERNATIVES}"),
    ({"q": ["nine", 9], "source": "en", "target": "de"}, "Invalid request: q[1] must be a text, not int"),
])
def test_refusals_are_libretranslates(lt, values, words):
    answer = translate(lt, **values)
    assert answer.status_code == 400 and answer.json() == {"error": words}


def test_refusals_of_this_servers_bounds_name_them(lt):
    too_many = translate(lt, q=["nine"] * (MAX_BATCH_TEXTS + 1), source="en", target="de")
    assert too_many.status_code == 400
    assert too_many.json()["error"].startswith(f"Invalid request: request ({MAX_BATCH_TEXTS + 1}) exceeds text limit")
    too_long = translate(lt, q="nine " * MAX_TEXT, source="en", target="de")
    assert too_long.status_code == 400 and f"at most {MAX_TEXT} characters" in too_long.json()["error"]
    for body in (b"{", b"[1]"):
        bad = lt.post("/translate", content=body, headers={"content-type": "application/json"})
        assert bad.status_code == 400 and bad.json()["error"].startswith("Invalid JSON format")
    assert lt.post("/detect").json() == {"error": "Invalid request: missing q parameter"}
    assert lt.get("/detect").status_code == 405 and lt.post("/languages").status_code == 405


def test_pages_of_any_origin_may_call_it_as_libretranslate(lt):
    """CORS on these routes (a browser's preflight, answers and refusals), as LibreTranslate's; not on /api/."""
    asked = {"Origin": "https://example.org", "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "content-type"}
    preflight = lt.options("/translate", headers=asked)
    assert preflight.status_code == 204 and preflight.headers["access-control-allow-origin"] == "*"
    assert "content-type" in preflight.headers["access-control-allow-headers"].lower()
    origin = {"Origin": "https://example.org"}
    for answer in (translate(lt, q="nine", source="en", target="de"), translate(lt, q="nine", source="fr", target="de"),
                   lt.get("/languages", headers=origin), lt.post("/detect", data={"q": "nine"}, headers=origin)):
        assert answer.headers["access-control-allow-origin"] == "*"
    plain = lt.post("/api/translate", json={"text": "nine", "attention": False}, headers=origin)
    assert plain.status_code == 200 and "access-control-allow-origin" not in plain.headers


@pytest.mark.slow  # an export to CTranslate2
def test_the_ct2_engine_serves_it_alike(transformer_dir, tmp_path):
    """`aiayn serve --engine ct2`: the same API, CTranslate2's translations and n-best."""
    pytest.importorskip("ctranslate2")
    ct2 = Translator.from_pretrained(shutil.copytree(transformer_dir, tmp_path / "model"), engine="ct2")
    client = TestClient(create_app(ct2))
    best = ct2.translate(["forty five"], beam=max(2, ct2.decode_cfg.beam), n_best=2)[0]
    answer = translate(client, q=["forty five", "nine"], source="en", target="de").json()
    assert answer == {"translatedText": own(ct2, ["forty five", "nine"])}
    answer = translate(client, q="forty five", source="en", target="de", alternatives=1).json()
    assert answer == {"translatedText": best.text, "alternatives": [t for t, _ in best.n_best[1:] if t != best.text]}


def test_a_model_that_names_no_languages_says_so(translator):
    unnamed = TestClient(create_app(Translator(translator.model, translator.tokenizer, translator.decode_cfg)))
    assert unnamed.get("/languages").json() == []
    for path in ("/translate", "/detect"):
        answer = unnamed.post(path, json={"q": "nine", "source": "en", "target": "de"})
        assert answer.status_code == 400 and answer.json() == {"error": UNNAMED}


def test_answers_fit_their_schemas(lt):
    jsonschema = pytest.importorskip("jsonschema")
    openapi = lt.get("/openapi.json").json()
    asked = [("post", "/translate", {"q": "nine", "source": "en", "target": "de"}, 200),
             ("post", "/translate", {"q": ["nine"], "source": "auto", "target": "de", "alternatives": 1}, 200),
             ("post", "/translate", {"q": "nine", "source": "auto", "target": "de", "alternatives": 1}, 200),
             ("post", "/translate", {"source": "en"}, 400),
             ("get", "/languages", None, 200),
             ("post", "/detect", {"q": "nine"}, 200),
             ("post", "/detect", {}, 400)]
    for method, path, body, status in asked:
        answer = lt.post(path, json=body) if method == "post" else lt.get(path)
        assert answer.status_code == status, (path, body, answer.text)
        schema = openapi["paths"][path][method]["responses"][str(status)]["content"]["application/json"]["schema"]
        jsonschema.validate(answer.json(), {**schema, "components": openapi["components"]},
                            cls=jsonschema.Draft202012Validator)
    for path in ("/translate", "/detect"):  # the body LibreTranslate's clients send is described
        body = openapi["paths"][path]["post"]["requestBody"]["content"]
        assert {"application/json", "application/x-www-form-urlencoded", "multipart/form-data"} <= set(body)
