"""Fixtures of the command-line tests."""

import pytest


@pytest.fixture
def no_loading(monkeypatch):
    """Loading a model fails the test: whatever is refused must be refused before it."""
    import aiayn.checkpoint
    import aiayn.decoding.translator

    def loaded(*args, **kwargs):
        raise AssertionError("a model was loaded before the refusal")

    monkeypatch.setattr(aiayn.checkpoint, "load_checkpoint", loaded)
    monkeypatch.setattr(aiayn.decoding.translator.Translator, "from_pretrained", loaded)
