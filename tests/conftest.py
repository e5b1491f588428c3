import pytest
import torch

from aiayn.data.synthetic import number_task
from aiayn.data.tokenizer import Tokenizer
from tests.model_helpers import model_dir


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    torch.set_num_threads(2)


@pytest.fixture(scope="session", autouse=True)
def _compiled_cache(tmp_path_factory):
    """Compiled decoders (aiayn.decoding.compiled_cache) are kept for this test session only: tests
    compiling the same model share one compile, and nothing lands in the user's ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("AIAYN_CACHE", str(tmp_path_factory.mktemp("aiayn-cache")))
    yield
    mp.undo()


@pytest.fixture(scope="session")
def tokenizer():
    pairs = number_task(2000, 10, 10, seed=1)["train"]
    return Tokenizer.train([s for p in pairs for s in p], vocab_size=128)


@pytest.fixture(scope="session")
def transformer_dir(tmp_path_factory, tokenizer):
    """An untrained tiny Transformer checkpoint: enough for equivalences, not for quality."""
    return model_dir(tmp_path_factory.mktemp("transformer") / "model", tokenizer, "tiny")


@pytest.fixture(scope="session")
def rnn_dir(tmp_path_factory, tokenizer):
    return model_dir(tmp_path_factory.mktemp("rnn") / "model", tokenizer, "rnn-luong", d_model=32)


@pytest.fixture(autouse=True)
def packed_products_on_every_cpu(monkeypatch):
    """aiayn.cpu.linear packs small products only on AVX-512 CPUs (where it was measured faster); the
    tests run the packed path on every CPU, so that its equivalence is checked wherever they run."""
    monkeypatch.setattr("aiayn.cpu.linear.packing_pays", lambda: True)
