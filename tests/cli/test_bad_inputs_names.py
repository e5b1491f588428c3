"""Names, reserved pieces, empty inputs and the real cause: outputs aiayn derives from a user's name are kept
unless --force; a refusal says what was wrong in one line."""

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
