"""A model's own diagnostic thresholds: the tail rule, thresholds.json written and read back, the diagnostics
judging by it, `aiayn calibrate`'s bad inputs, and training storing them (a trained model's right answers
pass its own thresholds, a wrong answer does not)."""

import json
import shutil

import numpy as np
import pytest

from aiayn.cli import main
from aiayn.data.synthetic import number_task
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.inspect.quality.calibration import (
    FLAG_BUDGET,
    TAILS,
    flagged_share,
    thresholds_at,
    thresholds_on,
)
from aiayn.inspect.quality.diagnostics import diagnose_output, translate_diagnosed
from aiayn.inspect.quality.thresholds import DEFAULT_THRESHOLDS, THRESHOLDS_FILE, read_thresholds
from tests.cli_helpers import assert_user_error, run_cli

SOURCES = ["forty five", "seven", "three hundred twelve", "twenty", "nine hundred one", "eighty eight"]


def clean_outputs(n: int = 400, seed: int = 0) -> list[dict]:
    """diagnose()-shaped results of n clean outputs, the continuous signals drawn at random."""
    rng = np.random.default_rng(seed)

    def signal(value, flag):
        return {"value": float(value), "threshold": None, "rule": None, "flag": flag, "flagged": False}

    return [{"signals": {"log_prob": {**signal(rng.normal(-0.8, 0.3), "hallucination"), "rule": "<"},
                         "source_contribution": {**signal(rng.normal(0.55, 0.05), "hallucination"), "rule": "<"},
                         "eos_attention": {**signal(rng.uniform(0, 0.2), "hallucination"), "rule": ">"},
                         "uncovered_share": {**signal(rng.uniform(0, 0.3), "low_coverage"), "rule": ">"},
                         "repeat_run": {**signal(rng.choice([1, 1, 1, 2]), "repetition"), "rule": ">="},
                         "source_copy": {**signal(rng.uniform(0, 30), "copy"), "rule": ">="},
                         "length_ratio": {**signal(rng.uniform(0.7, 1.4), "length_ratio"), "rule": "outside"}}}
            for _ in range(n)]


def test_the_largest_tail_within_the_budget_is_chosen():
    clean = clean_outputs()
    thresholds, tail = thresholds_on(clean)
    assert flagged_share(clean, thresholds) <= FLAG_BUDGET
    larger = [t for t in TAILS if t > tail]
    assert all(flagged_share(clean, thresholds_at(clean, t)) > FLAG_BUDGET for t in larger)
    log_probs = np.array([d["signals"]["log_prob"]["value"] for d in clean])
    assert thresholds.log_prob == round(float(np.percentile(log_probs, tail)), 2)
    assert thresholds.stopped_at_limit is True and thresholds.unknown_share == DEFAULT_THRESHOLDS.unknown_share


@pytest.fixture(scope="module")
def calibrated_once(transformer_dir, tmp_path_factory):
    """The tiny model calibrated on SOURCES, once for the module -> (its directory, what the command printed)."""
    import contextlib
    import io

    model = tmp_path_factory.mktemp("calibrated") / "model"
    shutil.copytree(transformer_dir, model)
    src = model.parent / "val.txt"
    src.write_text("\n".join(SOURCES) + "\n")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        code = main(["calibrate", "--model", str(model), "--src", str(src)])
    assert code == 0, printed.getvalue()
    return model, printed.getvalue()


@pytest.fixture
def calibrated(calibrated_once, tmp_path):
    """A copy of the calibrated tiny model (its thresholds.json free to change), its validation sources in
    tmp_path / "val.txt" -> (its directory, what `aiayn calibrate` printed)."""
    model = tmp_path / "model"
    shutil.copytree(calibrated_once[0], model)
    shutil.copy(calibrated_once[0].parent / "val.txt", tmp_path / "val.txt")
    return model, calibrated_once[1].replace(str(calibrated_once[0]), str(model))


def test_calibrate_writes_thresholds_that_read_back_and_judge_the_model(calibrated):
    model, output = calibrated
    stored = json.loads((model / THRESHOLDS_FILE).read_text())
    assert f"wrote {model / THRESHOLDS_FILE}" in output and stored["sentences"] == len(SOURCES)
    thresholds = read_thresholds(model)
    for name, value in stored["thresholds"].items():
        assert getattr(thresholds, name) == (tuple(value) if isinstance(value, list) else value)
    translator = Translator.from_pretrained(model)
    signals = translate_diagnosed(translator, ["forty five"], beam=2, max_output_len=12)[0].diagnostics["signals"]
    assert signals["log_prob"]["threshold"] == thresholds.log_prob
    assert signals["length_ratio"]["threshold"] == list(thresholds.length_ratio)
    defaults = translate_diagnosed(translator, ["forty five"], beam=2, max_output_len=12,
                                   thresholds=DEFAULT_THRESHOLDS)[0].diagnostics["signals"]
    assert defaults["log_prob"]["threshold"] == DEFAULT_THRESHOLDS.log_prob


@pytest.mark.parametrize("content, needle", [("{", "not a thresholds file"),
                                             ('{"thresholds": {"log_prob": "low"}}', "thresholds.log_prob"),
                                             ('{"thresholds": {"loudness": 1}}', "unknown signal 'loudness'")])
def test_a_damaged_thresholds_file_is_one_line_naming_it(calibrated, content, needle):
    model, _ = calibrated
    (model / THRESHOLDS_FILE).write_text(content)
    with pytest.raises(AiaynError, match=needle) as err:
        read_thresholds(model)
    assert str(model / THRESHOLDS_FILE) in str(err.value) and "\n" not in str(err.value)


def test_calibrate_bad_inputs(transformer_dir, tmp_path, capsys):
    assert_user_error(*run_cli(["calibrate", "--model", tmp_path / "nowhere"], capsys), "nowhere", "--model")
    assert_user_error(*run_cli(["calibrate", "--model", transformer_dir, "--src", tmp_path / "none.txt"], capsys),
                      "none.txt")
    with pytest.raises(SystemExit) as exited:  # argparse's own one line
        main(["calibrate", "--model", str(transformer_dir), "--limit", "0"])
    assert exited.value.code == 2 and "--limit: '0' is not a count" in capsys.readouterr().err
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n")
    assert_user_error(*run_cli(["calibrate", "--model", transformer_dir, "--src", blank], capsys), "blank.txt")
    assert not (transformer_dir / THRESHOLDS_FILE).exists()


SMALL = ["data.synthetic_train=2000", "data.synthetic_valid=200", "data.vocab_size=64", "data.byte_fallback=false",
         "model.d_model=64", "model.d_ff=128", "train.max_tokens=1024", "train.warmup_steps=100",
         "train.bleu_sentences=5", "train.num_threads=1", "train.eval_every=1000", "train.save_every=1000",
         "train.average_last=1", "train.max_steps=600", "train.bleu_every=100000"]


@pytest.mark.slow
def test_training_stores_thresholds_that_pass_right_answers_and_flag_wrong_ones(tmp_path, capsys):
    """The number task, trained briefly: its held-out right answers pass its own thresholds, and another
    sentence's reference given as the output is flagged."""
    out = tmp_path / "run"
    code, output = run_cli(["train", "--out", out] + [x for s in SMALL for x in ("--set", s)], capsys)
    assert code == 0, output
    assert "diagnostic thresholds of its 200 validation outputs" in output
    translator = Translator.from_pretrained(out)
    stored = read_thresholds(translator.model_dir)
    assert stored is not None and stored != DEFAULT_THRESHOLDS
    test = number_task(2000, 200, 200, 1234)["test"][:100]
    results = translate_diagnosed(translator, [s for s, _ in test])
    right = [r for r, (_, ref) in zip(results, test) if r.text == ref]
    assert len(right) >= 20
    assert np.mean([bool(r.diagnostics["flags"]) for r in right]) <= 0.05
    wrong = [diagnose_output(translator, source, test[(i + 1) % len(test)][1])["flags"]
             for i, (source, _) in enumerate(test[:50])]
    assert np.mean([bool(f) for f in wrong]) >= 0.9
    assert run_cli(["calibrate", "--model", out], capsys)[0] == 0
    assert read_thresholds(translator.model_dir) == stored  # the same model and data: the same thresholds


def _diagnostics_lines(model, tmp_path, capsys) -> tuple[int, list]:
    src = tmp_path / "in.txt"
    src.write_text("forty five\nseven\n")
    code, output = run_cli(["translate", "--model", model, "--input", src, "--diagnostics", "--beam", "2"], capsys)
    return code, [json.loads(line)["diagnostics"] for line in output.splitlines() if line.startswith("{")]


def test_calibrate_stores_the_combined_score_and_translate_reports_it(calibrated, tmp_path, capsys):
    model, output = calibrated
    stored = json.loads((model / THRESHOLDS_FILE).read_text())
    combined = stored["combined"]
    # clean: the model's own outputs and the perturbed ones that stayed close (at most CLOSE_PER_KIND per kind)
    assert "combined score over log_prob" in output and combined["clean"] > len(SOURCES)
    assert combined["hallucinations"] > 0 and read_thresholds(model).combined.threshold == combined["threshold"]
    code, lines = _diagnostics_lines(model, tmp_path, capsys)
    assert code == 0 and len(lines) == 2
    for found in lines:
        assert found["combined"]["threshold"] == combined["threshold"] and found["combined"]["rule"] == ">"
        assert {"flags", "source_contribution", "token_source_contribution"} <= set(found)
        assert found["combined"]["flagged"] == (found["combined"]["value"] > combined["threshold"])
        if found["combined"]["flagged"]:
            assert "hallucination" in found["flags"]


def test_calibrating_twice_on_the_same_data_writes_the_same_file(calibrated, tmp_path, capsys):
    model, _ = calibrated
    first = (model / THRESHOLDS_FILE).read_bytes()
    assert run_cli(["calibrate", "--model", model, "--src", tmp_path / "val.txt"], capsys)[0] == 0
    assert (model / THRESHOLDS_FILE).read_bytes() == first


def test_a_thresholds_file_without_the_combined_score_still_judges(calibrated, tmp_path, capsys):
    model, _ = calibrated
    stored = json.loads((model / THRESHOLDS_FILE).read_text())
    del stored["combined"]
    (model / THRESHOLDS_FILE).write_text(json.dumps(stored))
    assert read_thresholds(model).combined is None
    code, lines = _diagnostics_lines(model, tmp_path, capsys)
    assert code == 0 and len(lines) == 2 and not any("combined" in found for found in lines)
    assert lines[0]["signals"]["log_prob"]["threshold"] == stored["thresholds"]["log_prob"]


@pytest.mark.parametrize("combined, needle", [('"no"', '"combined" is not an object'),
                                              ('{"signals": ["log_prob"], "suspect": ["low"], "usual": [null], '
                                               '"mean": [0], "scale": [1], "weights": [1, 2], "bias": 0, '
                                               '"threshold": 0, "clean": 1, "hallucinations": 1}',
                                               "combined.weights")])
def test_a_damaged_combined_score_stops_translate_in_one_line(calibrated, tmp_path, capsys, combined, needle):
    model, _ = calibrated
    (model / THRESHOLDS_FILE).write_text('{"thresholds": {}, "combined": ' + combined + "}")
    code, output = run_cli(["translate", "--model", model, "--input", tmp_path / "val.txt", "--diagnostics"], capsys)
    assert_user_error(code, output, model / THRESHOLDS_FILE, needle)
    assert len([line for line in output.splitlines() if line.strip()]) == 1
