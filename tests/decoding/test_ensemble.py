"""Ensembles (aiayn.decoding.ensemble): the mixture log sum_i w_i p_i behind the model interface, so beam
search, greedy search and scoring run unchanged on it. A model alone or ensembled with itself gives its own
outputs, bit for bit; two models give the hand-computed mixture; what cannot be ensembled is one line."""

import pytest
import torch

from aiayn.checkpoint import load_checkpoint, save_checkpoint
from aiayn.config import load_config
from aiayn.data.tokenizer import Tokenizer
from aiayn.decoding.ensemble import Ensemble, mix
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.model import ModelConfig, build_model
from tests.cli_helpers import assert_user_error, run_cli

SENTENCES = ["forty five thousand six hundred twenty one", "nine", "", "three hundred thousand two", "fifty six"]


def _model_dir(root, tokenizer, seed: int):
    cfg = load_config(None, [])
    cfg.model = ModelConfig.preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                   pad_id=tokenizer.pad_id, dropout=0.0)
    cfg.decode.max_len_b = 8  # the untrained models run to their limit: short is fast
    torch.manual_seed(seed)
    save_checkpoint(root, build_model(cfg.model), cfg, tokenizer)
    return root


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, tokenizer):
    root = tmp_path_factory.mktemp("ensemble")
    return _model_dir(root / "a", tokenizer, 0), _model_dir(root / "b", tokenizer, 1)


def test_a_model_with_itself_translates_and_scores_as_itself(dirs):
    alone = Translator.from_pretrained(dirs[0])
    for paths in ([dirs[0], dirs[0]],):
        twice = Translator.from_pretrained(paths)
        for options in (dict(beam=4, n_best=2), dict(beam=1)):
            a, b = alone.translate(SENTENCES, **options), twice.translate(SENTENCES, **options)
            assert [r.text for r in b] == [r.text for r in a] and [r.n_best for r in b] == [r.n_best for r in a]
        targets = [r.text for r in a]  # scores: the mixture's pass renormalizes once more, within float rounding
        for x, y in zip(twice.score(SENTENCES, targets), alone.score(SENTENCES, targets)):
            assert x.token_log_probs == pytest.approx(y.token_log_probs, abs=1e-6)


@torch.no_grad()
def test_one_model_alone_gives_its_own_log_probs(dirs):
    model = load_checkpoint(dirs[0], "cpu")[0].eval()
    ensemble = Ensemble(models=[model]).eval()
    src = torch.tensor([[5, 9, 12, 2], [7, 3, 2, 0]])
    tokens = torch.tensor([1, 1])
    lp, _, _ = model.decode_step(tokens, model.init_state(model.encode(src)[0], src))
    elp, _, _ = ensemble.decode_step(tokens, ensemble.init_state(ensemble.encode(src)[0], src))
    assert torch.equal(elp, lp)


@torch.no_grad()
def test_two_models_mix_their_probabilities_with_the_weights(dirs):
    a, b = (load_checkpoint(d, "cpu")[0].eval() for d in dirs)
    ensemble = Ensemble(models=[a, b], weights=[1.0, 3.0]).eval()
    src, tgt_in = torch.tensor([[5, 9, 12, 2], [7, 3, 2, 0]]), torch.tensor([[1, 6, 8], [1, 4, 0]])
    pa, pb = (m(src, tgt_in).log_softmax(-1).exp() for m in (a, b))
    expected = (0.25 * pa + 0.75 * pb).log()
    torch.testing.assert_close(ensemble(src, tgt_in), expected, atol=1e-5, rtol=0)
    # cached steps give the same mixture as the teacher-forced pass
    state, tokens = ensemble.init_state(ensemble.encode(src)[0], src), tgt_in[:, 0]
    for t in range(tgt_in.size(1)):
        lp, state, _ = ensemble.decode_step(tgt_in[:, t], state)
        torch.testing.assert_close(lp, expected[:, t], atol=1e-5, rtol=0)
    # a state reorder keeps every member's rows together
    picked = ensemble.init_state(ensemble.encode(src)[0], src).select(torch.tensor([1, 1, 0]), torch.tensor([1, 0]))
    assert all(s.src_mask.size(0) == 2 for s in picked.states)
    del tokens


def test_a_token_every_member_rules_out_stays_ruled_out():
    lp = torch.tensor([[0.0, float("-inf")], [-1.0, float("-inf")]])
    out = mix([lp, lp], torch.tensor([0.5, 0.5]))
    assert out[:, 1].isinf().all() and not out.isnan().any()


def test_an_ensemble_differs_from_each_member_and_scores_its_own_translations(dirs):
    ensemble = Translator.from_pretrained(list(dirs), weights=[0.5, 0.5])
    members = [Translator.from_pretrained(d) for d in dirs]
    results = ensemble.translate(SENTENCES, beam=1, alpha=0.0)
    texts = [r.text for r in results]
    scores = ensemble.score(SENTENCES, texts, alpha=0.0)
    for r, s in zip(results, scores):
        if r.text and not r.stopped_at_limit:
            assert s.score == pytest.approx(r.score, abs=1e-5)
    own = [[s.log_prob for s in m.score(SENTENCES, texts)] for m in members]
    mixed = [s.log_prob for s in scores]
    assert mixed != own[0] and mixed != own[1]


@pytest.fixture(scope="module")
def other_vocab_dir(tmp_path_factory):
    tok = Tokenizer.train(["ein zwei drei vier fünf sechs sieben acht neun zehn"] * 50, vocab_size=40)
    return _model_dir(tmp_path_factory.mktemp("other") / "model", tok, 0)


def test_what_cannot_be_ensembled_is_one_line(dirs, other_vocab_dir):
    with pytest.raises(AiaynError, match=f"{dirs[0]} and {other_vocab_dir} have different vocabularies"):
        Translator.from_pretrained([dirs[0], other_vocab_dir])
    with pytest.raises(AiaynError, match="3 weights for 2 models"):
        Translator.from_pretrained(list(dirs), weights=[1, 1, 1])
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(AiaynError, match="not a positive number"):
            Translator.from_pretrained(list(dirs), weights=[1.0, bad])
    with pytest.raises(AiaynError, match="native engine in this process: drop --engine ct2"):
        Translator.from_pretrained(list(dirs), engine="ct2")
    with pytest.raises(AiaynError, match="drop --workers 2"):
        Translator.from_pretrained(list(dirs), workers=2)
    with pytest.raises(AiaynError, match="an ensemble has none"):
        Translator.from_pretrained(list(dirs)).translate(["nine"], return_attention=True)


def test_cli_translate_evaluate_and_score_take_several_models(dirs, other_vocab_dir, tmp_path, capsys):
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    expected = Translator.from_pretrained(list(dirs), weights=[1, 2]).translate(SENTENCES)
    tgt.write_text("".join(r.text + "\n" for r in expected), encoding="utf-8")
    models = ["--model", dirs[0], "--model", dirs[1], "--weights", "1", "2"]
    code, out = run_cli(["translate", *models, "--input", src], capsys)
    assert code == 0 and [line for line in out.splitlines() if not line.startswith("warning:")] == \
        [r.text for r in expected]
    code, out = run_cli(["score", *models, "--src", src, "--tgt", tgt], capsys)
    assert code == 0 and len(out.splitlines()) == len(SENTENCES)
    code, out = run_cli(["evaluate", *models, "--src", src, "--ref", tgt, "--bootstrap", "0", "--json"], capsys)
    assert code == 0 and '"BLEU"' in out and " + " in out
    assert_user_error(*run_cli(["translate", "--model", dirs[0], "--model", other_vocab_dir, "--input", src],
                               capsys), "different vocabularies", dirs[0], other_vocab_dir)
    assert_user_error(*run_cli(["translate", *models[:4], "--weights", "1", "--input", src], capsys),
                      "1 weights for 2 models")
    assert_user_error(*run_cli(["score", *models[:4], "--weights", "1", "0", "--src", src, "--tgt", tgt], capsys),
                      "--weights", "positive")
    assert_user_error(*run_cli(["translate", *models[:4], "--engine", "ct2", "--input", src], capsys),
                      "native engine", "--engine ct2")
