"""translate --trace: each sentence's beam search step by step, beside the translations it explains."""

import json

import pytest

from aiayn.cli import main
from tests.cli_helpers import assert_user_error, run_cli


@pytest.fixture
def sources(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("1 2 3\n\n4 5\n", encoding="utf-8")
    return path


def test_the_trace_table_ends_in_the_translation_printed(transformer_dir, sources, capsys):
    code = main(["translate", "--model", transformer_dir, "--input", str(sources), "--beam", "3", "--trace"])
    captured = capsys.readouterr()
    assert code == 0
    translations = captured.out.splitlines()
    tables = [t for t in captured.err.split("\n\n") if t.startswith("source:")]
    assert len(tables) == 2  # the blank line has no search
    for table, source, translation in zip(tables, ["1 2 3", "4 5"], [translations[0], translations[2]]):
        assert table.startswith(f"source: {source}\nbeam 3, n-best 1")
        assert table.splitlines()[-1].startswith(f"n-best: {translation} (")
        assert "-> search ends" in table


def test_the_trace_file_holds_every_step_and_replays_the_translation(transformer_dir, sources, tmp_path, capsys):
    from aiayn.decoding.beam_trace import BeamTrace, TraceCandidate, TraceStep

    out = tmp_path / "trace.jsonl"
    code = main(["translate", "--model", transformer_dir, "--input", str(sources), "--beam", "2", "--n-best", "2",
                 "--trace", str(out)])
    assert code == 0
    printed = []  # per input line its n-best: rank<TAB>score<TAB>text lines, ranks from 0
    for line in capsys.readouterr().out.splitlines():
        rank, _, text = line.split("\t")
        if rank == "0":
            printed.append([])
        printed[-1].append(text)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["line"], r["source"]) for r in records] == [(1, "1 2 3"), (3, "4 5")]
    for record in records:
        shown = printed[record["line"] - 1]
        raw = record["trace"]
        trace = BeamTrace(**{**raw, "steps": [TraceStep(**{**s, "candidates": [TraceCandidate(**c)
                                                                               for c in s["candidates"]]})
                                              for s in raw["steps"]]})
        assert trace.steps[-1].done is not None and len(trace.replay()) == 2
        assert [c.text for c in trace.replay()] == shown  # the n-best printed, as the trace replays it


@pytest.mark.parametrize("argv, needle", [
    (["--trace", "--sample"], "--trace shows a beam search and --sample draws one translation"),
    (["--trace", "--engine", "ct2"], "--trace shows aiayn's own beam search; the ct2 engine's is not shown"),
])
def test_a_trace_that_cannot_be_shown_is_refused_before_loading(argv, needle, transformer_dir, no_loading, capsys):
    code, output = run_cli(["translate", "--model", transformer_dir, *argv], capsys)
    assert_user_error(code, output, needle)


def test_the_trace_file_is_checked_before_loading(transformer_dir, sources, no_loading, capsys):
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", sources, "--trace", sources], capsys)
    assert_user_error(code, output, "is also an input")


def test_a_trace_file_that_is_a_directory_is_refused_before_loading(transformer_dir, sources, tmp_path, no_loading,
                                                                      capsys):
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", sources, "--trace", tmp_path], capsys)
    assert_user_error(code, output, f"{tmp_path} is a directory; give a file name")
