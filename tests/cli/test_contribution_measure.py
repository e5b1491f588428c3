"""`aiayn attention --measure contributions` and `aiayn translate --alignment --alignment-from contributions`:
the maps and links read from the value-norm maps ||alpha_ij f(x_j)|| (aiayn.inspect.contributions) instead of
the attention weights, and the combinations refused before a model is loaded."""

import json

import numpy as np
import pytest
import torch

from aiayn.decoding.translator import Translator
from aiayn.inspect.contributions import measure_contributions
from aiayn.inspect.maps.capture import capture, maps_of, merge_subwords
from tests.cli_helpers import assert_user_error, run_cli

SENTENCE = "three hundred forty five thousand twenty one"


def _value_norm_maps(translator, maps) -> dict[str, np.ndarray]:
    """Each kind's (L, H, Q, K) value-norm maps of the maps' tokens, teacher-forced, rows divided by their sum."""
    tok = translator.tokenizer
    src = torch.tensor([[tok.source_piece_to_id(p) for p in maps.source_tokens]])
    tgt_in = torch.tensor([[tok.bos_id] + [tok.piece_to_id(p) for p in maps.target_input_tokens[1:]]])
    norms = measure_contributions(translator.model, src, tgt_in).value_norms
    return {kind: (n[0] / n[0].sum(-1, keepdim=True)).numpy() for kind, n in norms.items()}


def test_attention_draws_the_value_norm_maps(transformer_dir, tmp_path, capsys):
    t = Translator.from_pretrained(transformer_dir)
    expected = _value_norm_maps(t, capture(t, SENTENCE, beam=2))
    weights_out, contrib_out = tmp_path / "weights.npz", tmp_path / "contrib.npz"
    for measure, out in ((None, weights_out), ("contributions", contrib_out)):
        argv = ["attention", "--model", transformer_dir, SENTENCE, "--kind", "all", "--beam", "2", "--out", out]
        assert run_cli(argv + (["--measure", measure] if measure else []), capsys)[0] == 0
    weights, drawn = np.load(weights_out), np.load(contrib_out)
    assert json.loads(str(drawn["meta"]))["measure"] == "contributions"  # the file says what it holds
    assert json.loads(str(weights["meta"]))["measure"] == "weights"
    for kind, value_norms in expected.items():
        np.testing.assert_allclose(drawn[kind], value_norms, atol=1e-5)
        np.testing.assert_allclose(drawn[kind].sum(-1), 1.0, atol=1e-5)
        assert not np.allclose(drawn[kind], weights[kind], atol=1e-3)  # the measure changed what is drawn
    png = tmp_path / "contrib.png"
    assert run_cli(["attention", "--model", transformer_dir, SENTENCE, "--measure", "contributions",
                    "--merge-words", "--out", png], capsys)[0] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_contribution_maps_are_titled_as_such(transformer_dir):
    from aiayn.inspect.contributions.maps import contribution_maps
    from aiayn.inspect.maps.labels import sentence_title

    t = Translator.from_pretrained(transformer_dir)
    maps = capture(t, SENTENCE, beam=2)
    assert "value-norm" not in sentence_title(maps)
    merged = merge_subwords(contribution_maps(t, maps))
    assert merged.measure == "contributions" and "each row normalised to sum to 1" in sentence_title(merged)


def _alignment(output: str) -> list[str]:
    return [line.split(" ||| ")[1] for line in output.splitlines() if " ||| " in line]


@pytest.mark.parametrize("head, layer_head", [(None, None), ("1:2", (0, 1)), ("2:mean", (1, None))])
def test_alignment_from_contributions_is_the_argmax_of_the_value_norm_map(head, layer_head, transformer_dir,
                                                                          tmp_path, capsys):
    sentences = [SENTENCE, "twelve", "nine hundred"]
    prefixes = ["drei hundert fünf und vierzig", "zwölf", "neun hundert"]  # outputs of several words
    src, prefix = tmp_path / "in.txt", tmp_path / "prefix.txt"
    src.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    prefix.write_text("".join(s + "\n" for s in prefixes), encoding="utf-8")
    argv = ["translate", "--model", transformer_dir, "--input", src, "--target-prefix", prefix, "--alignment",
            "--alignment-from", "contributions", "--beam", "2"] + (["--alignment-head", head] if head else [])
    code, output = run_cli(argv, capsys)
    assert code == 0, output
    t = Translator.from_pretrained(transformer_dir)
    expected = []
    for result in t.translate(sentences, beam=2, return_attention=True, target_prefix=prefixes):
        maps = maps_of(result, t)
        maps.maps = _value_norm_maps(t, maps)  # the drawn maps: value norms, rows summing to 1
        merged = merge_subwords(maps)
        cross = merged.maps["cross"]
        layer, head_index = layer_head or (cross.shape[0] - 1, None)
        m = cross[layer].mean(0) if head_index is None else cross[layer, head_index]  # (T, S) words
        ends = merged.target_tokens[-1] == "</s>"  # an output cut at the length limit has no </s>
        n_src, n_tgt = len(merged.source_tokens) - 1, len(merged.target_tokens) - ends  # </s> left out
        expected.append(" ".join(f"{int(m[j, :n_src].argmax())}-{j}" for j in range(n_tgt)))
    assert _alignment(output) == expected and len(expected[0].split()) >= 5


@pytest.mark.parametrize("case, needle", [
    ("without --alignment", "--alignment-from contributions chooses what --alignment's links are read from: "
                            "add --alignment"),
    ("ct2 engine", "--alignment needs the native engine"),
    ("rnn", "--alignment-from contributions reads the value vectors of a Transformer's heads"),
])
def test_translate_refuses_bad_alignment_from_before_loading(case, needle, transformer_dir, rnn_dir, no_loading,
                                                             capsys):
    argv = {"without --alignment": ["--model", transformer_dir, "--alignment-from", "contributions"],
            "ct2 engine": ["--model", transformer_dir, "--alignment", "--alignment-from", "contributions",
                           "--engine", "ct2"],
            "rnn": ["--model", rnn_dir, "--alignment", "--alignment-from", "contributions"]}[case]
    code, output = run_cli(["translate", *argv], capsys)
    assert_user_error(code, output, needle)
    assert output.strip().count("\n") == 0  # one line


def test_attention_refuses_contributions_of_an_rnn_before_loading(rnn_dir, tmp_path, no_loading, capsys):
    code, output = run_cli(["attention", "--model", rnn_dir, "1 2", "--measure", "contributions",
                            "--out", tmp_path / "maps.png"], capsys)
    assert_user_error(code, output, "--measure contributions needs a Transformer's layers of heads")
