"""Translation diagnostics: each flag fires on a crafted case and not on its clean twin; the AUROC; the
library on a real (tiny) model; the CLI's --diagnostics lines and evaluate's counts; the REST field."""

import json
import re
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from aiayn.cli import main
from aiayn.decoding.sampling import SamplingOptions
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError
from aiayn.inspect.quality import calibration
from aiayn.inspect.quality.diagnostics import diagnose, flags_under, forced_evidence, translate_diagnosed
from aiayn.inspect.quality.signals import FLAGS, SIGNALS, Evidence, repeat_run
from aiayn.inspect.quality.thresholds import COVERAGE_MASS, DEFAULT_THRESHOLDS, Thresholds
from aiayn.web.app import create_app
from aiayn.web.diagnosed import PAGE_WORDS
from tests.cli_helpers import assert_user_error, run_cli
from tests.paths import REPO

SRC = ["▁ein", "▁Hund", "▁läuft", "</s>"]
TGT = ["▁a", "▁dog", "▁runs"]


def diagonal(rows: int = 4, cols: int = 4) -> np.ndarray:
    """(L=2, H=2, T, S): output word i looks at source word i; the </s> step at </s>."""
    weights = np.full((rows, cols), 0.02)
    for i in range(rows):
        weights[i, min(i, cols - 1)] = 1.0
    weights /= weights.sum(-1, keepdims=True)
    return np.broadcast_to(weights, (2, 2, rows, cols)).copy()


def clean(**changes) -> Evidence:
    twin = Evidence(source="ein Hund läuft", output="a dog runs", src_tokens=SRC, tgt_tokens=TGT, cross=diagonal(),
                    log_prob=-0.3 * 4, source_shares=np.full(4, 0.6))  # 0.6 of each step from the source
    return replace(twin, **changes)


def flags(evidence: Evidence) -> list[str]:
    return diagnose(evidence)["flags"]


def test_the_clean_twin_raises_nothing_and_every_signal_shows_its_value_and_threshold():
    found = diagnose(clean())
    assert found["flags"] == [] and found["uncovered_words"] == []
    assert set(found["signals"]) == {"log_prob", "source_contribution", "eos_attention", "uncovered_share",
                                     "repeat_run", "source_copy", "length_ratio", "stopped_at_limit", "unknown_share"}
    for signal in found["signals"].values():
        assert {"value", "threshold", "rule", "flag", "flagged"} <= set(signal) and signal["flag"] in FLAGS
    assert found["signals"]["log_prob"] == {"value": -0.3, "threshold": DEFAULT_THRESHOLDS.log_prob, "rule": "<",
                                            "flag": "hallucination", "flagged": False}
    json.dumps(found)  # plain JSON


def test_low_coverage_fires_when_source_words_get_no_attention():
    onto_first = np.zeros((2, 2, 4, 4))
    onto_first[..., 0] = 1.0  # every output word looks at "ein"
    found = diagnose(clean(cross=onto_first))
    assert found["flags"] == ["low_coverage"] and found["uncovered_words"] == ["Hund", "läuft"]
    assert found["signals"]["uncovered_share"]["value"] == pytest.approx(2 / 3, abs=1e-4)
    assert COVERAGE_MASS == 0.2


def test_subwords_merge_into_words_before_coverage():
    src = ["▁ein", "▁Hu", "nd", "</s>"]  # "Hund" in two pieces: its pieces' attention adds up
    cross = np.zeros((1, 1, 4, 4))
    cross[0, 0, :, 1] = cross[0, 0, :, 2] = 0.15
    cross[0, 0, :, 0], cross[0, 0, :, 3] = 0.6, 0.1
    found = diagnose(clean(src_tokens=src, cross=cross))
    assert "low_coverage" not in found["flags"] and found["signals"]["uncovered_share"]["value"] == 0


def test_hallucination_fires_on_attention_to_eos_and_on_a_low_log_prob():
    onto_eos = np.zeros((2, 2, 4, 4))
    onto_eos[..., 3] = 1.0
    found = diagnose(clean(cross=onto_eos))
    assert "hallucination" in found["flags"] and found["signals"]["eos_attention"]["value"] == 1.0
    assert flags(clean(log_prob=-3.0 * 4)) == ["hallucination"]
    assert flags(clean(log_prob=-1.0 * 4)) == []


def test_repetition_of_words_and_of_pieces_inside_a_word():
    assert repeat_run("a b a b a b c".split()) == 3 and repeat_run("a b c".split()) == 1 and repeat_run([]) == 0
    assert flags(clean(output="a dog dog dog runs")) == ["repetition"]
    assert flags(clean(output="a dog dog runs")) == []
    loop = clean(output="a undundund", tgt_tokens=["▁a", "▁und", "und", "und"], cross=diagonal(5, 4))
    assert "repetition" in flags(loop)


def test_copy_of_the_source():
    assert flags(clean(output="ein Hund läuft")) == ["copy"]
    assert diagnose(clean())["signals"]["source_copy"]["value"] < DEFAULT_THRESHOLDS.source_copy


def test_length_ratio_outliers_on_both_sides():
    long = "a dog runs and runs on and on over the green hills"
    assert flags(clean(output=long)) == ["length_ratio"]
    short = diagnose(clean(output="dog", tgt_tokens=["▁dog"], cross=diagonal(2, 4)))
    assert "length_ratio" in short["flags"]
    assert short["signals"]["length_ratio"]["value"] == pytest.approx(1 / 3, abs=1e-4)
    assert diagnose(clean())["signals"]["length_ratio"]["threshold"] == list(DEFAULT_THRESHOLDS.length_ratio)


def test_stopped_at_limit_and_unknown_input():
    assert flags(clean(stopped_at_limit=True)) == ["stopped_at_limit"]
    unknown = clean(src_tokens=["<unk>", "<0x41>", "▁Hund", "</s>"])
    assert flags(unknown) == ["unknown_input"]
    assert flags(clean(src_tokens=["<unk>", "▁ein", "▁Hund", "</s>"])) == []  # a third: not "made of" unknowns


def test_one_threshold_per_signal_named_as_it():
    assert [f.name for f in fields(Thresholds)] == [s.name for s in SIGNALS] + ["combined"]  # and the score
    assert FLAGS == ("hallucination", "low_coverage", "repetition", "copy", "length_ratio", "stopped_at_limit",
                     "unknown_input")


def test_auroc_by_hand():
    auroc = _bench("roc").auroc
    assert auroc([3, 4], [1, 2]) == 1.0 and auroc([1, 2], [3, 4]) == 0.0
    assert auroc([1], [1]) == 0.5  # a tie counts half
    assert auroc([0.8, 0.4], [0.5, 0.1, 0.4]) == pytest.approx(4.5 / 6)  # 3 + 0 + 1 + 0.5 of 6 pairs


def test_auroc_interval_holds_the_auroc_and_narrows_with_more_cases():
    roc = _bench("roc")
    auroc, auroc_interval = roc.auroc, roc.auroc_interval
    rng = np.random.default_rng(1)
    few_pos, many_pos, neg = rng.normal(1, 1, 10), rng.normal(1, 1, 1000), rng.normal(0, 1, 1000)
    few, many = auroc_interval(few_pos, neg, resamples=300), auroc_interval(many_pos, neg, resamples=300)
    assert few[0] <= auroc(few_pos, neg) <= few[1] and many[0] <= auroc(many_pos, neg) <= many[1]
    assert many[1] - many[0] < (few[1] - few[0]) / 2
    assert auroc_interval([3, 4], [1, 2], resamples=50) == (1.0, 1.0)  # separated in every resample
    with pytest.raises(AiaynError):
        auroc([], [1])


def test_auroc_difference_interval_is_paired():
    """Two scores of the same cases: one a copy of the other differs by exactly 0 in every resample; a score
    that separates where the other is chance is ahead by a clear margin."""
    difference = _bench("roc").auroc_difference_interval
    rng = np.random.default_rng(2)
    pos, neg = rng.normal(1, 1, 200), rng.normal(0, 1, 200)
    assert difference(pos, neg, pos, neg, resamples=200) == (0.0, 0.0)
    noise_pos, noise_neg = rng.normal(0, 1, 200), rng.normal(0, 1, 200)
    low, high = difference(pos + 3, neg, noise_pos, noise_neg, resamples=200)
    assert 0.3 < low <= high < 0.6  # about 0.98 against 0.5


def test_a_grouped_bootstrap_draws_whole_groups():
    """Cases of one group (a sentence's outputs) come and go together; each case written four times over is
    as uncertain, drawn by group, as the cases once, and looks surer drawn case by case."""
    roc = _bench("roc")
    rng = np.random.default_rng(4)
    drawn = roc.Resampler(6, [7, 7, 7, 2, 2, 5]).draw(rng)
    counts = np.bincount(drawn, minlength=6)
    assert counts[0] == counts[1] == counts[2] and counts[3] == counts[4]
    pos, neg = rng.normal(0.8, 1, 40), rng.normal(0, 1, 200)
    once = roc.auroc_interval(pos, neg, resamples=400)
    grouped = roc.auroc_interval(np.repeat(pos, 4), neg, positive_groups=np.repeat(np.arange(40), 4), resamples=400)
    ungrouped = roc.auroc_interval(np.repeat(pos, 4), neg, resamples=400)
    width = [high - low for low, high in (once, grouped, ungrouped)]
    assert abs(width[1] - width[0]) < 0.25 * width[0] and width[2] < 0.8 * width[1]


def test_combined_fits_bench_measures_the_candidates_and_judges_a_fit(transformer_dir):
    """bench/combined_fits.py: the four candidate signals of real outputs are finite suspicions in their ranges,
    and a fit on val rows where log_prob separates the classes ranks test rows by it."""
    fits = _bench("combined_fits")
    translator = Translator.from_pretrained(transformer_dir)
    rows = fits.measured(translator, [("forty five", "forty five"), ("seven", "nine hundred one")])
    for row in rows:
        assert set(row) == set(fits.SEVEN + fits.CANDIDATES)
        assert row["entropy"] >= 0 and row["worst_token"] >= 0 and 0 <= row["greedy_disagreement"] <= 100
        assert np.isfinite(row["source_pmi"])
    rng = np.random.default_rng(3)

    def made(n, log_prob):
        return [{**rows[0], "log_prob": float(rng.normal(log_prob, 0.3)), "entropy": float(rng.uniform(0, 2))}
                for _ in range(n)]

    val = {"clean": made(60, -0.5), "close": made(30, -0.8), "forced": made(40, -2.5), "natural": made(20, -2.0)}
    test = {"clean": made(60, -0.5), "close": made(30, -0.8), "forced": made(40, -2.5), "natural": made(20, -2.0)}
    design = fits.DESIGNS["forced and natural (the stored score)"]
    score, weights = fits.fitted(val, fits.SEVEN + fits.CANDIDATES, design, 1.0)
    found = fits.judged(test, score, 1.0)
    assert weights[fits.SEVEN.index("log_prob")] == max(weights)
    assert all(r["best"] == "log_prob" and r["auroc"] > 0.8 for r in found.values())
    assert all(low <= high for low, high in (r["minus_best"] for r in found.values()))


def test_translate_diagnosed_on_a_real_model(transformer_dir):
    translator = Translator.from_pretrained(transformer_dir)
    results = translate_diagnosed(translator, ["forty five", "", "seven"], beam=2, max_output_len=12)
    assert [r.diagnostics["flags"] for r in results][1] == []
    assert all(r.attention is None and isinstance(r.diagnostics["flags"], list) for r in results)
    kept = translate_diagnosed(translator, ["forty five"], beam=2, max_output_len=12, return_attention=True)[0]
    assert kept.attention["cross"].shape[-2:] == (kept.attention["cross"].shape[-2], len(kept.src_tokens))
    assert kept.diagnostics == results[0].diagnostics
    # teacher forcing the search's own output gives the search's maps (the rows of its tokens)
    forced = forced_evidence(translator, "forty five", kept.text)
    if forced.tgt_tokens == kept.tokens:
        T = len(kept.tokens)
        np.testing.assert_allclose(forced.cross[..., :T, :], kept.attention["cross"][..., :T, :], atol=1e-4)


def test_diagnostics_need_maps(transformer_dir):
    translator = Translator.from_pretrained(transformer_dir)
    with pytest.raises(AiaynError, match="sampling"):
        translate_diagnosed(translator, ["seven"], sampling=SamplingOptions(seed=1))


def test_cli_writes_one_json_object_per_line(transformer_dir, tmp_path, capsys):
    src, out = tmp_path / "in.txt", tmp_path / "out.jsonl"
    src.write_text("forty five\n\n")
    assert main(["translate", "--model", str(transformer_dir), "--input", str(src), "--diagnostics", "--output",
                 str(out), "--beam", "1"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 2 and lines[1] == {"translation": "", "diagnostics": {"flags": [], "signals": {},
                                                                                "uncovered_words": []}}
    for line in lines:
        assert isinstance(line["diagnostics"]["flags"], list) and set(line["diagnostics"]["flags"]) <= set(FLAGS)
    assert lines[0]["diagnostics"]["signals"]["log_prob"]["threshold"] == DEFAULT_THRESHOLDS.log_prob


def test_cli_diagnostics_without_maps_is_one_line(transformer_dir, tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("seven\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--diagnostics", "--engine",
                            "ct2"], capsys)
    assert_user_error(code, output, "--diagnostics", "--engine native")
    assert len(output.strip().splitlines()) == 1 and not (Path(transformer_dir) / "ct2").exists()
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, "--diagnostics", "--sample"],
                           capsys)
    assert_user_error(code, output, "--sample")


def test_evaluate_counts_each_flag(transformer_dir, tmp_path, capsys):
    src, ref = tmp_path / "src.txt", tmp_path / "ref.txt"
    src.write_text("seven\n")
    ref.write_text("sieben\n")
    code, output = run_cli(["evaluate", "--model", transformer_dir, "--src", src, "--ref", ref, "--diagnostics",
                            "--bootstrap", "0", "--json", "--beam", "1"], capsys)
    assert code == 0, output
    counts = json.loads(output[output.index("{"):])["diagnostics"]
    assert set(counts) == set(FLAGS) and all(0 <= n <= 1 for n in counts.values())


def test_rest_diagnostics_field(transformer_dir):
    client = TestClient(create_app(Translator.from_pretrained(transformer_dir)))
    body = client.post("/api/translate", json={"text": "forty five", "beam": 2, "diagnostics": True}).json()
    assert set(body["diagnostics"]) == {"flags", "signals", "uncovered_words", "source_contribution",
                                        "token_source_contribution"} and "maps" in body
    fired = [name for name, s in body["diagnostics"]["signals"].items() if s["flagged"] and name in PAGE_WORDS]
    assert [w["code"] for w in body["warnings"] if w["code"].startswith("diag_")] == [f"diag_{n}" for n in fired]
    assert all(w["words"] == PAGE_WORDS[w["code"][5:]] for w in body["warnings"] if w["code"].startswith("diag_"))
    plain = client.post("/api/translate", json={"text": "forty five", "beam": 2, "attention": False,
                                                "diagnostics": True}).json()
    assert "maps" not in plain and plain["diagnostics"]["flags"] == body["diagnostics"]["flags"]
    assert "diagnostics" not in client.post("/api/translate", json={"text": "forty five", "beam": 2}).json()


def test_the_page_words_every_diagnostic_warning_in_both_languages():
    """English from the signal list (sent with each warning), Korean from the page's dictionary."""
    static = REPO / "aiayn" / "web" / "static"
    told_by_page = {"stopped_at_limit", "unknown_share"}  # the page's own warnings tell these flags
    assert set(PAGE_WORDS) == set(diagnose(clean())["signals"]) - told_by_page
    assert all("{value}" in words for words in PAGE_WORDS.values())
    assert not re.findall(r'"warn\.diag_(\w+)"', (static / "i18n_en.js").read_text())
    assert set(re.findall(r'"warn\.diag_(\w+)"', (static / "i18n_ko.js").read_text())) == set(PAGE_WORDS) | {
        "combined"}


def _bench(name: str):
    """bench/NAME.py as a module, its sibling scripts importable (as when run: python bench/NAME.py)."""
    import importlib.util
    import sys

    if str(REPO / "bench") not in sys.path:
        sys.path.append(str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", REPO / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_calibration_keeps_all_flags_within_the_budget():
    """Calibration (and bench/diagnostics.py through it) shrinks every signal's tail together until all flags
    fire on at most FLAG_BUDGET of val; its flagged share is diagnose()'s for the same thresholds."""
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghijklmnop"), 5)) for _ in range(40)]
    evidences = [Evidence(source="ein Hund läuft", output=" ".join(rng.choice(words, 3)), src_tokens=SRC,
                          tgt_tokens=TGT, cross=diagonal() + rng.uniform(0, 0.3, (2, 2, 4, 4)),
                          log_prob=float(rng.normal(-2, 1)), source_shares=rng.uniform(0.3, 0.8, 4))
                 for _ in range(400)]
    val = [diagnose(e) for e in evidences]
    thresholds, tail = calibration.thresholds_on(val)
    share = calibration.flagged_share(val, thresholds)
    assert 0 < share <= calibration.FLAG_BUDGET and 0.1 <= tail <= 1.0
    assert share == np.mean([bool(diagnose(e, thresholds)["flags"]) for e in evidences])
    strict = replace(thresholds, log_prob=-1.0, source_copy=5.0)  # flags_under judges again as diagnose() would
    assert [flags_under(d, strict) for d in val] == [diagnose(e, strict)["flags"] for e in evidences]
    assert any(flags_under(d, strict) for d in val)
    log_probs = [d["signals"]["log_prob"]["value"] for d in val]
    assert thresholds.log_prob == round(float(np.percentile(log_probs, tail)), 2)
