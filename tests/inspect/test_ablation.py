"""Heads taken out (aiayn.inspect.ablation): a head masked by heads_removed is the model with that head's
columns of W^O zeroed, in teacher forcing and in the decoding steps; all heads of a kind out change the
output; the greedy pruning follows its rule; `aiayn heads --ablate`'s baseline is a plain evaluation's BLEU."""

import copy
import json

import pytest
import torch

from aiayn.inspect.ablation import Head, Quality, all_heads, heads_removed, prune_greedy
from aiayn.inspect.maps.checks import InspectError
from tests.cli_helpers import assert_user_error, run_cli
from tests.model_helpers import random_batch, small_model, step_by_step_logprobs

KINDS = ("encoder_self", "decoder_self", "cross")


def _modules(model, kind):
    return {"encoder_self": [layer.self_attn for layer in model.encoder_layers],
            "decoder_self": [layer.self_attn for layer in model.decoder_layers],
            "cross": [layer.cross_attn for layer in model.decoder_layers]}[kind]


def _zeroed_copy(model, heads):
    """The direct computation: a copy of the model with each head's input columns of W^O set to 0."""
    other = copy.deepcopy(model)
    with torch.no_grad():
        for head in heads:
            attn = _modules(other, head.kind)[head.layer]
            attn.out_proj.weight[:, head.head * attn.d_head: (head.head + 1) * attn.d_head] = 0.0
    return other


@pytest.mark.parametrize("heads", [[Head("encoder_self", 1, 0)], [Head("decoder_self", 0, 2)],
                                   [Head("cross", 1, 3), Head("cross", 1, 1), Head("encoder_self", 0, 3)]])
def test_removed_head_equals_its_columns_of_w_o_zeroed(heads):
    model = small_model(n_encoder_layers=2, n_decoder_layers=2, d_model=32, n_heads=4)
    src, tgt_in = random_batch()
    direct = _zeroed_copy(model, heads)
    with torch.no_grad():
        expected, expected_steps = direct(src, tgt_in), step_by_step_logprobs(direct, src, tgt_in)[0]
        with heads_removed(model, heads):
            masked, masked_steps = model(src, tgt_in), step_by_step_logprobs(model, src, tgt_in)[0]
        plain = model(src, tgt_in)
    torch.testing.assert_close(masked, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(masked_steps, expected_steps, atol=1e-5, rtol=1e-5)  # the decoding steps too
    assert (plain - masked).abs().max() > 1e-3  # the head did something, so the equivalence means something


def test_all_heads_of_a_kind_out_change_the_output_and_the_block_leaves_nothing_behind():
    model = small_model(n_encoder_layers=2, n_decoder_layers=2, d_model=32, n_heads=4)
    src, tgt_in = random_batch()
    with torch.no_grad():
        before = model(src, tgt_in)
        for kind in KINDS:
            with heads_removed(model, all_heads(model, [kind])):
                out = model(src, tgt_in)
            assert (out - before).abs().max() > 1e-2, kind
        with pytest.raises(RuntimeError), heads_removed(model, all_heads(model)):
            raise RuntimeError("an error inside the block")
        after = model(src, tgt_in)
    assert torch.equal(before, after)
    assert not any(m._forward_pre_hooks for m in model.modules())


def test_a_head_the_model_lacks_is_refused():
    model = small_model(n_encoder_layers=2, n_decoder_layers=2, d_model=32, n_heads=4)
    with pytest.raises(InspectError, match="no head enc 3:1"), heads_removed(model, [Head("encoder_self", 2, 0)]):
        pass


def test_greedy_pruning_takes_the_cheapest_head_each_step():
    # BLEU with a set of heads out: 30 minus each head's own cost, plus a penalty once a and b are both out
    # (b is cheapest alone, then a; with b out, a costs 2 + 5 and c (3) goes before it)
    a, b, c = Head("encoder_self", 0, 0), Head("encoder_self", 0, 1), Head("encoder_self", 1, 0)
    cost = {a: 2.0, b: 0.5, c: 3.0}

    def measure(heads):
        bleu = 30.0 - sum(cost[h] for h in heads) - (5.0 if a in heads and b in heads else 0.0)
        return Quality(bleu=bleu, loss=1.0)

    baseline = measure([])
    path = prune_greedy(measure, baseline, [a, b, c], steps=3)
    assert [r.head for r in path] == [b, c, a]
    assert [r.quality.bleu for r in path] == [29.5, 26.5, 19.5]
    assert [r.head for r in prune_greedy(measure, baseline, [a, b, c], steps=1)] == [b]


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_ablate_baseline_is_a_plain_evaluations_bleu(tmp_path, transformer_dir, capsys):
    from aiayn.decoding.translator import Translator

    sources = ["one hundred and two", "forty five", "seven", "three hundred and twelve"]
    outputs = [r.text for r in Translator.from_pretrained(transformer_dir).translate(sources, beam=1)]
    # half the references are the model's own outputs: a BLEU neither 0 nor 100
    refs = [outputs[0], "a different sentence here", outputs[2], "and one more"]
    src, ref = _write(tmp_path / "s.txt", sources), _write(tmp_path / "r.txt", refs)
    code, out = run_cli(["evaluate", "--model", transformer_dir, "--src", src, "--ref", ref, "--beam", 1,
                         "--bootstrap", 0, "--json"], capsys)
    assert code == 0, out
    bleu = next(s["score"] for s in json.loads(out)["scores"] if s["name"] == "BLEU")
    assert 0 < bleu < 100
    report, picture = tmp_path / "ablation.json", tmp_path / "ablation.png"
    code, out = run_cli(["heads", "--model", transformer_dir, "--ablate", "--src", src, "--ref", ref,
                         "--prune-steps", 2, "--json", report, "--plot", picture], capsys)
    assert code == 0, out
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = json.loads(report.read_text())
    assert result["baseline"]["bleu"] == bleu
    assert len(result["heads"]) == len({(h["kind"], h["layer"], h["head"]) for h in result["heads"]})
    assert {h["kind"] for h in result["heads"]} == set(KINDS)
    steps = result["pruning"]["steps"]
    assert len(steps) == 2 and all(s["kind"] == "encoder_self" for s in steps)
    first = min((h for h in result["heads"] if h["kind"] == "encoder_self"),
                key=lambda h: (-h["bleu"], h["loss"]))  # the first step is the cheapest head alone
    assert steps[0]["name"] == first["name"]


def test_ablate_bad_options_are_one_line(tmp_path, transformer_dir, capsys):
    src, ref = _write(tmp_path / "s.txt", ["seven"]), _write(tmp_path / "r.txt", ["sieben"])
    model = ["heads", "--model", transformer_dir]
    cases = [(["--src", src, "--ref", ref], "--ref", "--ablate"),
             (["--ablate", "--src", src, "--tgt", ref], "--tgt", "--ref"),
             (["--ablate", "--src", src, "--ref", ref, "--prune", "encoder,cross"], "--prune encoder,cross"),
             (["--ablate", "--src", src, "--ref", ref, "--beam", 0], "--beam 0"),
             (["--ablate", "--src", src], "--ref"),
             (["--ablate", "--src", src, "--ref", ref, "--plot", tmp_path / "h.svg"], "--plot", ".png"),
             (["--ablate", "--src", src, "--ref", ref, "--json", src], "is also an input")]
    for extra, *needles in cases:
        assert_user_error(*run_cli(model + extra, capsys), *needles)
