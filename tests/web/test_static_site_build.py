"""`aiayn export-site`'s refusals: each is one line, exit code 2, and nothing written (the browser test of the
site it writes is test_static_site.py)."""

from pathlib import Path

import pytest

from tests.cli_helpers import assert_user_error, run_cli
from tests.paths import REPO

PACKAGES = ("onnxruntime-web", "@agnai/sentencepiece-js")


def test_export_site_without_the_npm_packages_names_them_and_writes_nothing(tmp_path, transformer_dir, capsys):
    empty = tmp_path / "node_modules"
    empty.mkdir()
    code, output = run_cli(["export-site", "--model", transformer_dir, "--out", tmp_path / "site",
                            "--node-modules", empty], capsys)
    assert_user_error(code, output, str(empty), "npm ci", *PACKAGES)
    assert not (tmp_path / "site").exists()


def test_export_site_keeps_a_folder_that_is_not_an_earlier_site(tmp_path, transformer_dir, capsys):
    node_modules = REPO / "node_modules"
    if not all((node_modules / name / "package.json").is_file() for name in PACKAGES):
        pytest.skip(f"needs the npm packages {', '.join(PACKAGES)} in {node_modules} (npm ci)")
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    code, output = run_cli(["export-site", "--model", transformer_dir, "--out", out], capsys)
    assert_user_error(code, output, str(out))
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_export_site_refuses_an_rnn_model(tmp_path, rnn_dir, capsys):
    node_modules = REPO / "node_modules"
    if not all((node_modules / name / "package.json").is_file() for name in PACKAGES):
        pytest.skip(f"needs the npm packages {', '.join(PACKAGES)} in {node_modules} (npm ci)")
    pytest.importorskip("onnx")
    code, output = run_cli(["export-site", "--model", rnn_dir, "--out", tmp_path / "site"], capsys)
    assert_user_error(code, output, "RNN")
    assert not Path(tmp_path / "site").exists()
