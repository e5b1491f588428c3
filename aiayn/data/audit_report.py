"""The audit's report for people: a few lines a finding, the first examples, line numbers to look at."""

FINDINGS = [
    ("duplicate_pairs_exact", "duplicated pairs (exact)"),
    ("duplicate_pairs_normalised", "duplicated pairs (normalised)"),
    ("copies", "source = target copies"),
    ("blank_sides", "pairs with a blank side"),
    ("length_ratio", "length-ratio outliers"),
    ("wrong_script", "wrong-script lines"),
    ("invalid_utf8", "invalid UTF-8 lines"),
    ("control_characters", "lines with control characters"),
    ("replacement_characters", "lines with U+FFFD replacement characters"),
]


def _clip(text: str, width: int = 70) -> str:
    """The first `width` characters; shown with !r, which writes a control character once as \\x07."""
    return text if len(text) <= width else text[: width - 1] + "…"


def _lines(count: int) -> str:
    return f"{count:,} line{'' if count == 1 else 's'}"


def _example(key: str, item) -> str:
    if key.startswith("duplicate_pairs"):
        return "lines " + " = ".join(str(n) for n in item[:6]) + (" = …" if len(item) > 6 else "")
    if key == "length_ratio":
        return f"line {item['line']}: {_clip(item['source'], 40)!r} / {_clip(item['target'], 40)!r}"
    where = f"line {item['line']}" + (f" ({item['side']}" + (f", {item['script']}" if "script" in item else "")
                                      + ")" if "side" in item else "")
    return f"{where}: {_clip(item['text'])!r}"


def _split_lines(name: str, split: dict, show: int) -> list[str]:
    out = [f"{name}: {_lines(split['lines'])} ({' / '.join(split['files'])})"]
    found = split["findings"]
    majority = found.get("wrong_script", {}).get("majority", {})
    if majority:
        out.append(f"  majority script: source {majority.get('source')}, target {majority.get('target')}")
    for key, title in FINDINGS:
        entry = found.get(key)
        if not entry or not entry["count"]:
            continue
        out.append(f"  {title}: {entry['count']:,}")
        out += [f"    {_example(key, item)}" for item in entry["examples"][:show]]
    return out


def _overlap_lines(title: str, overlap: dict, show: int) -> list[str]:
    held, other = title.split(" in ")
    out = [f"{held} sources in {other}: {overlap['count']:,} ({overlap['exact']:,} exact, "
           f"{overlap['count'] - overlap['exact']:,} only once normalised)"]
    for item in overlap["lines"][:show]:
        mark = "" if item["exact"] else " (normalised)"
        out.append(f"    {held} line {item['line']} = {other} line {item['other_line']}{mark}: {_clip(item['text'])!r}")
    if overlap["count"] > show:
        out.append(f"    … {overlap['count'] - show:,} more (all in --json)")
    return out


def report_text(report: dict, show: int = 5) -> str:
    lines = []
    for title, overlap in report["overlap"].items():
        lines += _overlap_lines(title, overlap, show)
    for name, split in report["splits"].items():
        lines += _split_lines(name, split, show)
    clean = not any(o["count"] for o in report["overlap"].values()) and not any(
        e["count"] for s in report["splits"].values() for e in s["findings"].values())
    t = report["thresholds"]
    lines.append("no findings" if clean else
                 f"(normalised: NFKC, case folded, punctuation and symbols dropped, whitespace collapsed; length "
                 f"ratio > {t['length_ratio']:g} in characters where the longer side has >= {t['length_min_chars']})")
    return "\n".join(lines)
