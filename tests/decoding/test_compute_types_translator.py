"""Compute types through the Translator and the command line (aiayn.cpu.compute_types): a model loads and
translates in each, attention maps still come back, worker processes and the compiled step decode as this
process does in the same compute type, and a type the engine cannot run is one line at exit 2."""

import pytest
import torch

from aiayn.cli import main
from aiayn.cpu import compute_type_of, supported_compute_types
from aiayn.decoding.translator import Translator
from tests.decoding.test_compiled import needs_compiler

SENTENCES = ["forty five", "three hundred twenty one", "nine", "", "seven hundred", "twelve", "eighty eight"]
LOW = [pytest.param(c, marks=pytest.mark.skipif(c not in supported_compute_types(), reason=f"no native {c} here"))
       for c in ("bfloat16", "int8")]


@pytest.fixture
def one_thread():
    """Workers run one torch thread; so does the in-process search they are compared with."""
    torch.set_num_threads(1)


def _summary(results):
    return [(r.text, r.tokens, r.src_tokens) for r in results]


@pytest.mark.parametrize("compute_type", LOW)
def test_a_model_translates_in_each_compute_type_with_attention_maps(transformer_dir, compute_type):
    translator = Translator.from_pretrained(transformer_dir, compute_type=compute_type)
    assert compute_type_of(translator.model) == compute_type
    results = translator.translate(SENTENCES, beam=2, max_output_len=6, return_attention=True)
    assert [r.text == "" for r in results] == [s == "" for s in SENTENCES]  # a blank line stays blank
    for sentence, result in zip(SENTENCES, results):
        if not sentence:
            continue
        assert result.tokens and result.log_prob is not None and result.log_prob < 0
        cross = result.attention["cross"]  # (L, H, T, S): one row per output token, one column per source piece
        assert cross.shape[2:] == (len(result.tokens), len(result.src_tokens))
        assert abs(cross.sum(-1) - 1).max() < 1e-3  # softmax rows, in float32 whatever the products
    # scoring teacher-forces in the compute type too: per token within the bound of tests/cpu/test_compute_types
    low = translator.score(["forty five"], ["fünf und vierzig"])[0].token_log_probs
    high = Translator.from_pretrained(transformer_dir).score(["forty five"], ["fünf und vierzig"])[0].token_log_probs
    assert 0 < max(abs(a - b) for a, b in zip(low, high, strict=True)) < 0.15


@pytest.mark.parametrize("value", ["int3", "float16"])
def test_a_compute_type_the_native_engine_cannot_run_is_one_line(transformer_dir, tmp_path, capsys, value):
    (tmp_path / "in.txt").write_text("nine\n", encoding="utf-8")
    assert main(["translate", "--model", str(transformer_dir), "--input", str(tmp_path / "in.txt"),
                 "--compute-type", value]) == 2
    err = capsys.readouterr().err
    assert f"--compute-type {value}" in err and "float32" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("compute_type", [p for p in LOW if p.values == ("int8",)])
def test_workers_translate_as_this_process_in_int8(transformer_dir, compute_type, one_thread):
    alone = Translator.from_pretrained(transformer_dir, compute_type=compute_type)
    with Translator.from_pretrained(transformer_dir, compute_type=compute_type, workers=2) as pooled:
        options = dict(beam=3, n_best=2, batch_size=2)  # 3 batches of the 6 non-blank sentences: both busy
        expected, got = alone.translate(SENTENCES, **options), pooled.translate(SENTENCES, **options)
    assert _summary(got) == _summary(expected)
    assert [r.score for r in got] == pytest.approx([r.score for r in expected], abs=1e-5)


@needs_compiler
@pytest.mark.parametrize("compute_type", [p for p in LOW if p.values == ("bfloat16",)])
def test_the_compiled_step_translates_as_the_eager_one_in_bfloat16(transformer_dir, compute_type, one_thread):
    """Most sentences, not all: inductor orders the float32 sums of the step differently from the eager
    products, and the untrained model's near-ties can flip on that."""
    eager = Translator.from_pretrained(transformer_dir, compute_type=compute_type)
    compiled = Translator.from_pretrained(transformer_dir, compute_type=compute_type, compile=True)
    assert compute_type_of(compiled.model) == compute_type
    options = dict(beam=4, max_output_len=8)
    a, b = eager.translate(SENTENCES, **options), compiled.translate(SENTENCES, **options)
    same = sum(x.text == y.text for x, y in zip(a, b))
    assert same >= len(SENTENCES) - 2, [(x.text, y.text) for x, y in zip(a, b)]
