"""What `aiayn attention` says it drew: a given --target is printed as the target, not as the model's
translation, and the HTML page's title names the sentence (a browser tab or bookmark tells pages apart)."""

import re

from tests.cli_helpers import run_cli


def test_a_given_target_is_printed_as_target_and_the_own_output_as_translation(transformer_dir, tmp_path, capsys):
    code, forced = run_cli(["attention", "--model", transformer_dir, "forty five", "--target", "vierzig fünf",
                            "--out", tmp_path / "a.json"], capsys)
    assert code == 0 and "target: vierzig fünf" in forced and "translation:" not in forced, forced
    code, own = run_cli(["attention", "--model", transformer_dir, "forty five", "--out", tmp_path / "b.json"], capsys)
    assert code == 0 and "translation: " in own and "target:" not in own, own


def test_the_html_page_title_names_the_sentence(transformer_dir, tmp_path, capsys):
    out = tmp_path / "maps.html"
    code, output = run_cli(["attention", "--model", transformer_dir, "seven hundred", "--out", out], capsys)
    assert code == 0, output
    title = re.search(r"<title>(.*?)</title>", out.read_text(encoding="utf-8")).group(1)
    assert "“seven hundred" in title.split("→")[0], title
