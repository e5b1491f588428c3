"""Corpus audit: what in a parallel corpus would make a score or a model lie.

Across splits: each dev or test source sentence that is also in the training sources (or in dev, for
test), exactly or once normalised (audit_text.normalise: NFKC, case folded, punctuation and symbols dropped,
whitespace collapsed), named with its line number in both files. Within a split: duplicated pairs (exact
and normalised), source = target copies (normalised, non-empty), pairs with a blank side, length-ratio
outliers (audit_text.LENGTH_RATIO), lines whose script (by Unicode ranges) is not the majority script of
their side of the split, and encoding problems (invalid UTF-8, control characters, U+FFFD). Files are
streamed; a split costs 16 bytes a line (two 64-bit hashes) plus one byte a line per side for the script,
and the held-out sentences are kept as normalised text.
"""

import logging
from array import array
from collections import Counter
from pathlib import Path

import numpy as np

from aiayn.data import audit_text as T
from aiayn.data.corpus import CorpusError

log = logging.getLogger(__name__)
ORDER = ("train", "dev", "test")


def _examples(store: dict, key: str, item, cap: int = 50) -> None:
    bucket = store.setdefault(key, {"count": 0, "examples": []})
    bucket["count"] += 1
    if len(bucket["examples"]) < cap:
        bucket["examples"].append(item)


def _pairs(src_path, tgt_path):
    """(line number, (raw, text) source, (raw, text) target); unequal line counts are an error."""
    src_lines, tgt_lines = T.raw_lines(src_path), T.raw_lines(tgt_path)
    number = 0
    while (src := next(src_lines, None)) is not None and (tgt := next(tgt_lines, None)) is not None:
        number += 1
        yield number, src, tgt
    src_rest = 0 if src is None else 1 + sum(1 for _ in src_lines)  # src was read, its partner missing
    tgt_rest = sum(1 for _ in tgt_lines)
    for path, more in ((src_path, src_rest), (tgt_path, tgt_rest)):
        if more:
            raise CorpusError(f"{path}: {more:,} more line{'' if more == 1 else 's'} than its partner's {number:,}; "
                              f"a parallel corpus needs one target line per source line")


def _line_checks(found: dict, number: int, src, tgt) -> None:
    for side, (raw, text) in (("source", src), ("target", tgt)):
        for problem in T.encoding_problems(raw, text):
            _examples(found, problem, {"line": number, "side": side, "text": text})
    (_, s), (_, t) = src, tgt
    blank = [side for side, text in (("source", s), ("target", t)) if not text.strip()]
    if blank:  # a pair that teaches the model to say nothing, or to say something for nothing
        _examples(found, "blank_sides", {"line": number, "side": " and ".join(blank), "text": s if t.strip() else t})
    if T.length_outlier(s, t):
        _examples(found, "length_ratio", {"line": number, "source": s, "target": t})


def _duplicates(hashes: array) -> dict:
    """Lines whose hash an earlier line has: count, and the first groups as line numbers."""
    if not len(hashes):  # an empty split: no line, no duplicate
        return {"count": 0, "examples": []}
    values = np.frombuffer(hashes, dtype=np.int64)
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    sizes = np.diff(np.r_[starts, len(values)])
    groups = [sorted((order[s: s + n] + 1).tolist()) for s, n in zip(starts, sizes) if n > 1]
    groups.sort()
    return {"count": int(len(values) - len(starts)), "examples": groups[:50]}


def _majority_script(codes: array) -> int:
    counts = Counter(c for c in codes if c)
    return counts.most_common(1)[0][0] if counts else 0


def _scan_split(paths, held: dict, name: str) -> dict:
    """One split's own findings; `held` (normalised source -> [line, ...]) of the held-out splits gets this
    split's first line for each of its sentences found here."""
    found: dict = {}
    exact, norm = array("q"), array("q")
    scripts = {"source": array("B"), "target": array("B")}
    script_examples: dict = {"source": {}, "target": {}}
    lines, ratios = 0, [0] * (len(T.RATIO_EDGES) - 1)
    for lines, src, tgt in _pairs(*paths):
        (_, s), (_, t) = src, tgt
        if (bin_ := T.ratio_bin(s, t)) is not None:
            ratios[bin_] += 1
        ns, nt = T.normalise(s), T.normalise(t)
        exact.append(hash((s, t)))
        norm.append(hash((ns, nt)))
        if ns and ns == nt:
            _examples(found, "copies", {"line": lines, "text": s})
        _line_checks(found, lines, src, tgt)
        for side, text in (("source", s), ("target", t)):
            code = T.script_of(text)
            scripts[side].append(code)
            if len(script_examples[side].setdefault(code, [])) < 50:
                script_examples[side][code].append({"line": lines, "text": text})
        for other in held.values():
            entry = other.get(ns)
            if entry is not None:
                entry["train_line"] = entry["train_line"] or lines
                entry["exact_found"].update(text for _, text in entry["lines"] if text == s)
    found["duplicate_pairs_exact"] = _duplicates(exact)
    found["duplicate_pairs_normalised"] = _duplicates(norm)
    found["wrong_script"] = _wrong_script(scripts, script_examples)
    log.info("%s: %d lines audited", name, lines)
    return {"files": [str(p) for p in paths], "lines": lines, "findings": found,
            "length_ratios": {"log2_edges": T.RATIO_EDGES, "counts": ratios}}


def _wrong_script(scripts: dict, examples: dict) -> dict:
    out = {"count": 0, "examples": [], "majority": {}}
    for side, codes in scripts.items():
        major = _majority_script(codes)
        out["majority"][side] = T.SCRIPTS[major]
        for code, items in examples[side].items():
            if code and code != major:
                out["count"] += sum(1 for c in codes if c == code)
                out["examples"] += [{**item, "side": side, "script": T.SCRIPTS[code]} for item in items]
    out["examples"] = sorted(out["examples"], key=lambda e: e["line"])[:50]
    return out


def _held_sentences(paths) -> dict:
    """normalised source -> its (line, text)s, where the scanned split first has it and which of its texts
    were found there as they are (both filled by _scan_split)."""
    held: dict = {}
    for number, (_, s) in enumerate(T.raw_lines(paths[0]), start=1):
        key = T.normalise(s)
        if key:
            held.setdefault(key, {"lines": [], "train_line": None, "exact_found": set()})["lines"].append((number, s))
    return held


def _overlap(held: dict) -> dict:
    """The held-out split's sentences found in the other split: lines in both files, exact or normalised."""
    items = [{"line": line, "other_line": e["train_line"], "text": text, "exact": text in e["exact_found"]}
             for e in held.values() if e["train_line"] is not None for line, text in e["lines"]]
    items.sort(key=lambda i: i["line"])
    return {"count": len(items), "exact": sum(i["exact"] for i in items), "lines": items}


def audit_corpus(splits: dict) -> dict:
    """splits: {"train": (src, tgt), "dev": (src, tgt)?, "test": (src, tgt)?} -> the report (JSON-ready)."""
    if "train" not in splits:
        raise CorpusError("an audit needs the training files (--train SRC TGT)")
    names = [n for n in ORDER if n in splits]
    held = {n: _held_sentences(splits[n]) for n in names[1:]}
    report = {"thresholds": {"length_ratio": T.LENGTH_RATIO, "length_min_chars": T.LENGTH_MIN_CHARS},
              "splits": {}, "overlap": {}}
    for name in names:
        # each split is checked against the held-out splits after it: train against dev and test, dev against test
        later = {n: h for n, h in held.items() if names.index(n) > names.index(name)}
        for h in later.values():
            for entry in h.values():
                entry["train_line"], entry["exact_found"] = None, set()
        report["splits"][name] = _scan_split(splits[name], later, name)
        for other, h in later.items():
            report["overlap"][f"{other} in {name}"] = _overlap(h)
    return report



def held_out_in_training(train_sources, held: dict) -> dict:
    """held: {name: source lines}; train_sources: the training source lines, streamed once. -> {name:
    (count of held-out lines whose normalised source is in training, [(held line, training line), ...])},
    names with no overlap left out. Costs the held-out sentences' memory and one normalise() a training line."""
    index: dict = {}
    for name, lines in held.items():
        for number, text in enumerate(lines, start=1):
            key = T.normalise(text)
            if key:
                index.setdefault(key, []).append((name, number))
    first_seen: dict = {}
    for number, text in enumerate(train_sources, start=1):
        key = T.normalise(text)
        if key in index and key not in first_seen:
            first_seen[key] = number
    found: dict = {}
    for key, train_line in first_seen.items():
        for name, line in index[key]:
            found.setdefault(name, []).append((line, train_line))
    return {name: (len(found[name]), sorted(found[name])) for name in held if name in found}


def _source_lines(data, split: str):
    """Source sentences of a split, by line for corpus files (so the numbers are the file's lines)."""
    from aiayn.data.datasets import iter_pairs

    path = data.train_src if split == "train" else data.valid_src
    if data.dataset == "files" and path and Path(path).is_file():  # else TSV, data.corpora, or a pipe or device
        # (read as pairs, which says what is wrong with the last)
        return (text for _, text in T.raw_lines(path))
    if data.dataset == "multi30k":
        from aiayn.data import multi30k

        name = data.valid_split if split == "valid" else split
        return (text for _, text in T.raw_lines(multi30k.split_path(name, data.src_lang, data.data_dir or None)))
    return (src for src, _ in iter_pairs(data, split))


def warn_held_out_in_training(data) -> None:
    """One warning per held-out split (validation data; Multi30k's test_2016_flickr when it is on disk)
    whose sentences are in the training data: the count and the first line numbers."""
    held = {"validation": list(_source_lines(data, "valid"))}
    if data.dataset == "multi30k" and data.valid_split != "test_2016_flickr" and _local_multi30k(data):
        held["test_2016_flickr"] = list(_source_lines(data, "test_2016_flickr"))
    for name, (count, lines) in held_out_in_training(_source_lines(data, "train"), held).items():
        shown = ", ".join(f"{held_line}={train_line}" for held_line, train_line in lines[:5])
        log.warning("%s data: %d of %d source sentences are also in the training data (normalised; %s line = "
                    "training line: %s%s); scores on it overstate the model: `aiayn audit` lists them", name, count,
                    len(held[name]), name, shown, ", …" if count > 5 else "")


def _local_multi30k(data) -> bool:
    import os

    local = data.data_dir or os.environ.get("AIAYN_MULTI30K_DIR")
    return bool(local) and any((Path(local) / f"test_2016_flickr.{data.src_lang}{ext}").exists()
                               for ext in (".gz", ""))
