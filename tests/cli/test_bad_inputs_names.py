"""Names, reserved pieces, empty inputs and the real cause: outputs aiayn derives from a user's name are kept
unless --force; a refusal says what was wrong in one line."""

import re

import pytest

from aiayn.cli import main
from tests.cli_helpers import assert_user_error, run_cli


# ---- outputs derived from a name the user gave ---------------------------------------------------------
def test_write_gold_keeps_an_existing_derived_file_unless_force(tmp_path, capsys):
    gold = tmp_path / "gold"
    (tmp_path / "gold.tgt").write_text("mine\n")
    code, out = run_cli(["heads", "--write-gold", gold], capsys)
    assert_user_error(code, out, f"{gold}.tgt", "--force")
    assert (tmp_path / "gold.tgt").read_text() == "mine\n"
    assert not gold.exists() and not (tmp_path / "gold.src").exists()  # nothing written before the refusal
    code, out = run_cli(["heads", "--write-gold", gold, "--force"], capsys)
    assert code == 0, out
    assert (tmp_path / "gold.tgt").read_text() != "mine\n"
    assert len((tmp_path / "gold.src").read_text().splitlines()) == len(gold.read_text().splitlines())


# ---- empty and blank inputs ----------------------------------------------------------------------------
def test_empty_and_blank_files_are_counted_or_one_line(transformer_dir, tmp_path, capsys):
    empty, blank, one = tmp_path / "empty.txt", tmp_path / "blank.txt", tmp_path / "one.txt"
    empty.write_text("")
    blank.write_text("\n\n  \n")
    one.write_text("one\n")
    code, out = run_cli(["audit", "--train", empty, empty], capsys)
    assert code == 0 and "train: 0 lines" in out and not re.search(r"(^|\s)-\d", out) and "no findings" in out, out
    code, out = run_cli(["audit", "--train", blank, blank], capsys)
    assert code == 0 and "pairs with a blank side: 3" in out, out
    code, out = run_cli(["score", "--model", transformer_dir, "--src", empty, "--tgt", empty], capsys)
    assert code == 0 and out == "", out  # no pair, no score
    code, out = run_cli(["evaluate", "--model", transformer_dir, "--src", blank, "--ref", blank], capsys)
    assert_user_error(code, out, f"{blank} has only blank lines (3): there is nothing to translate and score")
    code, out = run_cli(["heads", "--model", transformer_dir, "--src", empty, "--tgt", empty], capsys)
    assert_user_error(code, out, f"--src {empty} / --tgt {empty}: have no lines")
    code, out = run_cli(["heads", "--model", transformer_dir, "--src", blank, "--tgt", blank], capsys)
    assert_user_error(code, out, "line 1 is blank")
    code, out = run_cli(["heads", "--model", transformer_dir, "--src", one, "--tgt", one, "--gold", empty], capsys)
    assert_user_error(code, out, f"{empty}: 0 lines for 1 sentence pairs")
    assert out.count("\n") == 1


# ---- messages that name the real cause -----------------------------------------------------------------
def test_a_negative_show_says_so(tmp_path, capsys):
    one = tmp_path / "one.txt"
    one.write_text("one\n")
    with pytest.raises(SystemExit) as stop:
        main(["audit", "--train", str(one), str(one), "--show", "-1"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert "argument --show: '-1' is not a count of examples" in err


def test_an_alignment_head_starting_with_a_minus_reaches_its_check(transformer_dir, tmp_path, capsys):
    one = tmp_path / "one.txt"
    one.write_text("one\n")
    code, out = run_cli(["translate", "--model", transformer_dir, "--input", one, "--alignment",
                         "--alignment-head", "-1:1"], capsys)
    assert_user_error(code, out, "--alignment-head '-1:1': give L:H (layer L, head H, counted from 1)")
    assert "expected one argument" not in out


def test_diagnostics_with_an_ensemble_names_the_ensemble(transformer_dir, tmp_path, capsys):
    one = tmp_path / "one.txt"
    one.write_text("one\n")
    for argv in (["translate", "--input", one], ["evaluate", "--src", one, "--ref", one]):
        code, out = run_cli([*argv, "--model", transformer_dir, "--model", transformer_dir, "--diagnostics"], capsys)
        assert_user_error(code, out, "--diagnostics reads one model's cross-attention maps, and an ensemble "
                                     "(2 --model) has none: give one --model")


def test_export_to_a_link_to_a_users_directory_says_it_is_a_link(transformer_dir, tmp_path, capsys):
    mine, link = tmp_path / "mine", tmp_path / "link"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep\n")
    link.symlink_to(mine)
    code, out = run_cli(["export-hf", "--model", transformer_dir, "--out", link, "--force"], capsys)
    assert_user_error(code, out, f"--out {link} is a symbolic link to a directory ({mine})")
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and link.is_symlink()
