"""The charts of the diagnostic tools: `aiayn heads --plot`, `aiayn audit --plot` and draw_beam_trace write a
PNG of a sane size; a bad --plot path is one line naming it, exit 2, before any work, and nothing is written."""

import json
import struct
import sys

import pytest

from aiayn.errors import AiaynError
from tests.cli_helpers import assert_user_error, run_cli

pytest.importorskip("matplotlib")


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def assert_sane_png(path, max_bytes=250_000):
    width, height = png_size(path)
    assert 300 <= width <= 2400 and 200 <= height <= 1600, (width, height)
    assert path.stat().st_size < max_bytes


def test_heads_plot(transformer_dir, tmp_path, capsys):
    from aiayn.cli import main

    out = tmp_path / "heads.png"
    assert main(["heads", "--model", str(transformer_dir), "--limit", "4", "--plot", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert_sane_png(out)
    assert main(["heads", "--model", str(transformer_dir), "--limit", "4", "--json", "--plot", str(out)]) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)["heads"]
    assert len(rows) == 2 * (4 + 1)  # stdout stays JSON; "wrote" goes to stderr
    assert f"wrote {out}" in captured.err
    for row in rows:  # layer and head count from 1, as the name does
        assert row["name"] == f"{row['layer']}:{'mean' if row['head'] is None else row['head']}"
    assert {row["layer"] for row in rows} == {1, 2}


@pytest.mark.parametrize("name, says", [
    ("missing/heads.png", "does not exist; create it first"),
    ("heads.jpg", "give a file name ending in .png"),
    (".", "is a directory"),
])
def test_bad_plot_path_is_one_line(transformer_dir, tmp_path, capsys, name, says):
    path = tmp_path / name
    code, output = run_cli(["heads", "--model", transformer_dir, "--limit", "4", "--plot", path], capsys)
    assert_user_error(code, output, "--plot", says)
    assert len(output.strip().splitlines()) == 1 and not (tmp_path / "heads.jpg").exists()


def test_plot_never_inside_the_model(transformer_dir, capsys):
    code, output = run_cli(["heads", "--model", transformer_dir, "--plot", transformer_dir / "h.png"], capsys)
    assert_user_error(code, output, "inside the model directory")
    assert not (transformer_dir / "h.png").exists()


def corpus(tmp_path):
    src, tgt = tmp_path / "train.en", tmp_path / "train.de"
    src.write_text("A dog runs on the grass.\nTwo men talk.\nA very long English line that has no partner.\n"
                   "A dog runs on the grass.\n")
    tgt.write_text("Ein Hund rennt auf dem Gras.\nZwei reden.\nJa.\nEin Hund rennt auf dem Gras.\n")
    return src, tgt


def test_audit_plot_and_length_ratios(tmp_path, capsys):
    from aiayn.cli import main
    from aiayn.data.audit import audit_corpus

    src, tgt = corpus(tmp_path)
    report = audit_corpus({"train": (src, tgt)})
    ratios = report["splits"]["train"]["length_ratios"]
    assert len(ratios["counts"]) == len(ratios["log2_edges"]) - 1
    assert sum(ratios["counts"]) == 3  # "Two men talk." / "Zwei reden." : both sides under 15 characters
    assert ratios["counts"][0] == 1  # the outlier (46 / 3 characters: log2 < -4) in the outermost bin
    out = tmp_path / "audit.png"
    assert main(["audit", "--train", str(src), str(tgt), "--plot", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert_sane_png(out)
    code, output = run_cli(["audit", "--train", src, tgt, "--plot", tmp_path / "no" / "a.png"], capsys)
    assert_user_error(code, output, "--plot", "no/a.png", "does not exist")
    code, output = run_cli(["audit", "--train", src, tgt, "--plot", src], capsys)
    assert_user_error(code, output, "--plot", "ending in .png")


def test_beam_trace_picture(transformer_dir, tmp_path):
    from aiayn.decoding.translator import Translator
    from aiayn.inspect.maps.charts import draw_beam_trace

    trace = Translator.from_pretrained(transformer_dir).trace("forty five", beam=3, n_best=3, max_output_len=6)
    out = draw_beam_trace(trace, tmp_path / "trace.png", title="forty five")
    assert_sane_png(out)


def test_without_matplotlib_a_chart_is_one_line(monkeypatch):
    from aiayn.inspect.maps import charts

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(AiaynError, match=r"pip install 'aiayn\[viz\]'"):
        charts._pyplot()


def test_heads_grid_without_gold(tmp_path):
    from aiayn.inspect.alignment.heads import HeadScore
    from aiayn.inspect.maps.charts import draw_heads

    scores = [HeadScore(layer, head, None, 0.2, 0.5 + 0.1 * (head or 0), 0.5, 0.9)
              for layer in range(2) for head in (0, 1, 2, None)]
    assert_sane_png(draw_heads(sorted(scores, key=lambda s: -s.score), tmp_path / "h.png"))
