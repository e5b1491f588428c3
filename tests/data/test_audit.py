import json
import logging
import re

import pytest

from aiayn.config import DataConfig
from aiayn.data import audit_text as T
from aiayn.data.audit import audit_corpus, held_out_in_training, warn_held_out_in_training
from aiayn.data.audit_report import report_text
from aiayn.data.corpus import CorpusError

CLEAN_EN = ["A dog runs in the park.", "Two men are talking.", "A woman reads a book.", "Children play outside."]
CLEAN_DE = ["Ein Hund rennt im Park.", "Zwei Männer reden.", "Eine Frau liest ein Buch.", "Kinder spielen draußen."]


def _write(path, lines, raw: bytes | None = None):
    path.write_bytes(raw if raw is not None else "".join(line + "\n" for line in lines).encode("utf-8"))
    return path


def _pair(tmp_path, name, src, tgt, raw_src=None):
    return _write(tmp_path / f"{name}.en", src, raw_src), _write(tmp_path / f"{name}.de", tgt)


def _counts(report, split):
    return {k: v["count"] for k, v in report["splits"][split]["findings"].items()}


def test_clean_files_report_nothing(tmp_path):
    train = _pair(tmp_path, "train", CLEAN_EN, CLEAN_DE)
    dev = _pair(tmp_path, "dev", ["A cat sleeps on a sofa."], ["Eine Katze schläft auf einem Sofa."])
    report = audit_corpus({"train": train, "dev": dev})
    assert all(c == 0 for split in ("train", "dev") for c in _counts(report, split).values())
    assert report["overlap"]["dev in train"]["count"] == 0
    assert report_text(report).endswith("no findings")
    json.dumps(report)  # machine-readable as it is


def test_planted_problems_are_found_with_line_numbers(tmp_path):
    en = CLEAN_EN + ["A dog runs in the park.",  # 5: exact duplicate pair of line 1
                     "two men are TALKING",  # 6: normalised duplicate of line 2
                     "Hello world",  # 7: copy
                     "Собака бежит по парку.",  # 8: wrong script (Cyrillic in a Latin corpus)
                     "A very long sentence that goes on and on and on.",  # 9: length-ratio outlier
                     "A bell\x07rings.",  # 10: control character
                     "A broken \ufffd sign."]  # 11: replacement character
    de = CLEAN_DE + ["Ein Hund rennt im Park.", "Zwei Männer reden!", "hello, world!", "Ein Hund rennt im Park.",
                     "Ja.", "Eine Glocke läutet.", "Ein kaputtes Zeichen."]
    raw = "".join(line + "\n" for line in en).encode("utf-8") + b"Caf\xe9 au lait.\n"  # 12: Latin-1, not UTF-8
    de.append("Milchkaffee.")
    train = _pair(tmp_path, "train", en, de, raw_src=raw)
    dev = _pair(tmp_path, "dev", ["A new sentence.", "a dog runs in the park"], ["Ein neuer Satz.", "Ein Hund."])
    test = _pair(tmp_path, "test", ["A woman reads a book."], ["Eine Frau liest."])
    report = audit_corpus({"train": train, "dev": dev, "test": test})
    found = report["splits"]["train"]["findings"]
    assert found["duplicate_pairs_exact"] == {"count": 1, "examples": [[1, 5]]}
    assert found["duplicate_pairs_normalised"]["examples"] == [[1, 5], [2, 6]]
    assert [e["line"] for e in found["copies"]["examples"]] == [7]
    wrong = found["wrong_script"]["examples"]
    assert [(e["line"], e["side"], e["script"]) for e in wrong] == [(8, "source", "Cyrillic")]
    assert [e["line"] for e in found["length_ratio"]["examples"]] == [9]
    assert [e["line"] for e in found["control_characters"]["examples"]] == [10]
    assert [e["line"] for e in found["replacement_characters"]["examples"]] == [11]
    assert [e["line"] for e in found["invalid_utf8"]["examples"]] == [12]
    dev_in_train = report["overlap"]["dev in train"]
    assert dev_in_train["lines"] == [{"line": 2, "other_line": 1, "text": "a dog runs in the park", "exact": False}]
    assert report["overlap"]["test in train"]["lines"][0] | {"text": ""} == \
        {"line": 1, "other_line": 3, "text": "", "exact": True}
    text = report_text(report)
    assert "dev line 2 = train line 1 (normalised)" in text and "test line 1 = train line 3" in text


def test_normalise_and_script():
    assert T.normalise("  A dog,  RUNS!  ") == T.normalise("a dog runs") == "a dog runs"
    assert T.SCRIPTS[T.script_of("Ein Hund rennt")] == "Latin"
    assert T.SCRIPTS[T.script_of("犬が走る")] == "Han"
    assert T.script_of("123 !") == 0


def test_unreadable_corpus_is_one_line(tmp_path):
    en, de = _pair(tmp_path, "train", CLEAN_EN, CLEAN_DE)
    for bad, says in ((tmp_path / "missing.en", "file not found"), (tmp_path, "is a directory")):
        with pytest.raises(CorpusError, match=says) as err:
            audit_corpus({"train": (bad, de)})
        assert "\n" not in str(err.value)
    broken = tmp_path / "broken.en.gz"
    broken.write_bytes(b"this is not gzip data\n")
    with pytest.raises(CorpusError, match="damaged gzip"):
        audit_corpus({"train": (broken, de)})
    short = _write(tmp_path / "short.de", CLEAN_DE[:2])
    with pytest.raises(CorpusError, match="2 more lines"):
        audit_corpus({"train": (en, short)})


def test_held_out_in_training_counts_and_lines():
    train = ["A dog runs.", "Two men.", "a dog runs", "A cat."]
    found = held_out_in_training(iter(train), {"dev": ["New.", "A DOG RUNS"], "test": ["Nothing here."]})
    assert found == {"dev": (1, [(2, 1)])}


def test_training_warns_about_dev_sentences_in_training(tmp_path, caplog):
    en, de = _pair(tmp_path, "train", CLEAN_EN, CLEAN_DE)
    den, dde = _pair(tmp_path, "dev", ["Children play outside!", "Something else."], ["Kinder.", "Etwas."])
    data = DataConfig(dataset="files", train_src=str(en), train_tgt=str(de), valid_src=str(den), valid_tgt=str(dde))
    with caplog.at_level(logging.WARNING, logger="aiayn.data.audit"):
        warn_held_out_in_training(data)
    [record] = caplog.records
    assert "validation data: 1 of 2 source sentences" in record.getMessage()
    assert "validation line = training line: 1=4" in record.getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="aiayn.data.audit"):
        warn_held_out_in_training(DataConfig(synthetic_train=200, synthetic_valid=20))  # disjoint by design
    assert not caplog.records


def test_audit_command(tmp_path, capsys):
    from aiayn.cli import main

    train = _pair(tmp_path, "train", CLEAN_EN, CLEAN_DE)
    dev = _pair(tmp_path, "dev", ["Two men are talking"], ["Zwei Männer."])
    report = tmp_path / "r.json"
    assert main(["audit", "--train", *map(str, train), "--dev", *map(str, dev), "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "dev line 1 = train line 2 (normalised)" in out
    assert json.loads(report.read_text())["overlap"]["dev in train"]["count"] == 1
    assert main(["audit", "--train", str(tmp_path / "nope.en"), str(train[1])]) == 2
    assert "nope.en: file not found" in capsys.readouterr().err


def test_the_report_never_replaces_a_corpus(tmp_path, capsys):
    from aiayn.cli import main

    train = _pair(tmp_path, "train", CLEAN_EN, CLEAN_DE)
    before = train[0].read_bytes()
    assert main(["audit", "--train", *map(str, train), "--json", str(train[0])]) == 2
    assert "is also an input" in capsys.readouterr().err and train[0].read_bytes() == before


def test_the_report_counts_in_words_and_escapes_once(tmp_path, capsys):
    """One line is "1 line"; a control character shows as repr writes it (\\x07), not escaped twice."""
    from aiayn.cli import main

    train = _pair(tmp_path, "train", ["A bell\x07rings."], ["Eine Glocke läutet."])
    assert main(["audit", "--train", *map(str, train)]) == 0
    out = capsys.readouterr().out
    assert "train: 1 line (" in out and "1 lines" not in out
    assert "line 1 (source): 'A bell\\x07rings.'" in out and "\\\\x07" not in out
    report = audit_corpus({"train": _pair(tmp_path, "more", CLEAN_EN, CLEAN_DE)})
    assert "train: 4 lines (" in report_text(report)
    short = _write(tmp_path / "one.de", CLEAN_DE[:3])
    with pytest.raises(CorpusError, match="1 more line than"):
        audit_corpus({"train": (train[0].with_name("more.en"), short)})


def test_audit_help_says_when_it_exits_non_zero(capsys):
    from aiayn.cli import main

    with pytest.raises(SystemExit):
        main(["audit", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "exits 0, findings or not" in help_text and "Exits 2" in help_text


def test_an_empty_split_counts_zero_everywhere(tmp_path):
    empty = _pair(tmp_path, "empty", [], [])
    report = audit_corpus({"train": _pair(tmp_path, "train", ["one"], ["eins"]), "test": empty})
    found = report["splits"]["test"]["findings"]
    assert report["splits"]["test"]["lines"] == 0
    assert found["duplicate_pairs_exact"] == {"count": 0, "examples": []} == found["duplicate_pairs_normalised"]
    assert not re.search(r"(^|\s)-\d", report_text(report))  # no negative count (paths may hold "-1")


def test_pairs_with_a_blank_side_are_a_finding(tmp_path):
    report = audit_corpus({"train": _pair(tmp_path, "train", ["one", "", "  ", "two"], ["eins", "zwei", " ", ""])})
    blank = report["splits"]["train"]["findings"]["blank_sides"]
    assert blank["count"] == 3
    assert [(e["line"], e["side"]) for e in blank["examples"]] == [(2, "source"), (3, "source and target"),
                                                                  (4, "target")]
    assert "pairs with a blank side: 3" in report_text(report)
