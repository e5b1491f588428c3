"""The web tests' shared fixtures: the untrained tiny model's Translator and a TestClient of the app on it
(one of each per test module, as each module had its own before)."""

import pytest
from fastapi.testclient import TestClient

from aiayn.decoding.translator import Translator
from aiayn.web.app import create_app


@pytest.fixture(scope="module")
def translator(transformer_dir):
    return Translator.from_pretrained(transformer_dir)


@pytest.fixture(scope="module")
def client(translator):
    return TestClient(create_app(translator))
