"""The commands that translate text: translate (stdin, interactive, or a file) and evaluate (a test set scored
with sacreBLEU). Wiring and printing only."""

import json
import sys

from aiayn.cli import heads
from aiayn.cli.common import (
    DEVICE_HELP,
    add_engine,
    add_models,
    add_search,
    check_before_loading,
    load_translator,
    model_configs,
    resolve_options,
    warn_input,
    warn_truncated,
)
from aiayn.cli.trace import TraceWriter, add_trace, check_trace


def _add_translate(sub) -> None:
    p = sub.add_parser("translate", help="translate lines (stdin, interactive, or --input FILE)")
    add_models(p)
    add_search(p)
    p.add_argument("--n-best", type=int, default=1, help="hypotheses per sentence, 1..beam (default: 1); "
                   "more than 1 prints 'rank<TAB>score<TAB>text' lines")
    p.add_argument("--input", help="file with one sentence per line (default: stdin, answered line by line)")
    p.add_argument("--output", help="write translations here, atomically, after reading all input "
                   "(default: stdout)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: 64)")
    p.add_argument("--sample", action="store_true", help="sample one translation per sentence instead of beam "
                   "search (default: off)")
    p.add_argument("--temperature", type=float, help="with --sample: divides the log-probs, in (0, 100] "
                   "(default: 1.0)")
    p.add_argument("--top-k", type=int, help="with --sample: only the k likeliest tokens (default: 0 = all)")
    p.add_argument("--top-p", type=float, help="with --sample: only the smallest set of tokens whose probability "
                   "reaches p, in (0, 1] (default: 1.0 = all)")
    p.add_argument("--seed", type=int, help="with --sample: makes the samples repeatable (default: random)")
    p.add_argument("--min-length", type=int, default=0, help="output tokens (subwords) before </s> may end a "
                   "translation (default: 0)")
    p.add_argument("--no-repeat-ngram-size", type=int, default=0, help="no n-gram of this many subwords twice in "
                   "a translation (default: 0 = off)")
    p.add_argument("--target-prefix", metavar="FILE", help="one line per input line: each translation starts "
                   "with its line's text and the search continues after it (a blank line: no prefix)")
    p.add_argument("--constraints", metavar="FILE", help="one line per input line: phrases, tab-separated, that "
                   "its translation must contain (lexically constrained beam search, native engine; a blank line: "
                   "none)")
    p.add_argument("--max-tokens", type=int, help="batches of at most this many source tokens, padding "
                   "included, as well as at most --batch-size sentences (default: sentences only)")
    p.add_argument("--alignment", action="store_true", help="also print word alignments after ' ||| ': Pharaoh "
                   "i-j (source word i, output word j, 0-based) from the last layer's cross-attention averaged "
                   "over heads, subwords merged into words (default: off; --n-best 1, native engine)")
    heads.add_alignment_head(p)
    add_trace(p)
    p.add_argument("--device", default="cpu", help=DEVICE_HELP)
    add_engine(p)
    _add_diagnostics(p, "write one JSON object per line instead of the text: {\"translation\", \"diagnostics\": "
                     "{\"flags\": [...], \"signals\": {name: {value, threshold, rule, flag, flagged}}}} "
                     "(docs/guides/diagnostics.md)")


def _add_diagnostics(p, what: str) -> None:
    p.add_argument("--diagnostics", action="store_true", help=f"flag suspect translations (hallucination, low "
                   f"coverage, repetition, copy, length ratio, length limit, unknown input) from the cross-attention "
                   f"and log-probability; native engine, beam search: {what} (default: off)")


def _check_diagnostics(args) -> None:
    """--diagnostics reads the cross-attention maps: refused, in one line, where there are none."""
    from aiayn.decoding.registry import capabilities_of
    from aiayn.errors import AiaynError

    if args.diagnostics and len(args.model) > 1:
        raise AiaynError(f"--diagnostics reads one model's cross-attention maps, and an ensemble ({len(args.model)} "
                         f"--model) has none: give one --model")
    maps = capabilities_of(args.engine).attention_maps
    if args.diagnostics and (not maps or getattr(args, "sample", False)):
        raise AiaynError(f"--diagnostics reads aiayn's cross-attention maps, which "
                         f"{f'--engine {args.engine} does' if not maps else 'sampling (--sample) does'} not "
                         f"give: use --engine native and beam search")


def _add_evaluate(sub) -> None:
    p = sub.add_parser("evaluate", help="translate a test set and score it with sacreBLEU")
    add_models(p)
    p.add_argument("--src", help="source file (with --ref)")
    p.add_argument("--ref", help="reference file (raw text)")
    p.add_argument("--dataset", choices=["multi30k"], help="instead of --src/--ref")
    p.add_argument("--pair", default="de-en", help="language pair for --dataset (default: de-en)")
    p.add_argument("--split", default="test_2016_flickr", help="split for --dataset (default: test_2016_flickr)")
    p.add_argument("--data-dir", help="local Multi30k directory (default: $AIAYN_MULTI30K_DIR, else download)")
    add_search(p)
    p.add_argument("--bootstrap", type=int, default=1000,
                   help="bootstrap samples for the 95%% CI (default: 1000; 0 = off)")
    p.add_argument("--compare", help="a second model directory: paired significance test against it")
    p.add_argument("--hyp-out", help="also write the translations to this file (atomically)")
    p.add_argument("--json", action="store_true", help="machine-readable output (default: a table)")
    p.add_argument("--device", default="cpu", help=DEVICE_HELP)
    add_engine(p)
    _add_diagnostics(p, "the summary counts each flag over the test set")



def add_parsers(sub) -> None:
    _add_translate(sub)
    _add_evaluate(sub)


def _render(result, n_best: int, alignment: str | None = None) -> str:
    if alignment is not None:
        return f"{result.text} ||| {alignment}"
    if n_best == 1:
        return result.text
    return "\n".join(f"{i}\t{score:.4f}\t{text}" for i, (text, score) in enumerate(result.n_best))


def _json_line(result, n_best: int, alignment: str | None) -> str:
    """A --diagnostics output line: the translation, its n-best and alignment when asked, its diagnostics."""
    line = {"translation": result.text}
    if n_best > 1:
        line["n_best"] = [{"translation": text, "score": round(score, 4)} for text, score in result.n_best]
    if alignment is not None:
        line["alignment"] = alignment
    line["diagnostics"] = result.diagnostics
    return json.dumps(line, ensure_ascii=False)


def cmd_translate(args) -> int:
    from aiayn.data.corpus import iter_stream_lines, read_lines
    from aiayn.decoding.options import options_from_args
    from aiayn.errors import AiaynError
    from aiayn.inspect.quality.diagnostics import translate_diagnosed
    from aiayn.io import check_output_file, write_output_file

    options = options_from_args(args)  # option clashes first: before a model is loaded (or exported)
    _check_translate_flags(args, options)
    configs = model_configs(args.model)  # a wrong --model first, then the files
    heads.check_alignment_head(args, configs[0])  # the first model's maps give the links
    if args.alignment_from == "contributions" and not all(c.model.multi_head for c in configs):
        raise AiaynError("--alignment-from contributions reads the value vectors of a Transformer's heads; this "
                         "model's one attention map has weights only: drop --alignment-from")
    constraints = _read_constraints(args.constraints) if args.constraints else None
    prefixes = read_lines(args.target_prefix, allow_empty=True) if args.target_prefix else None
    # the input file, its companions' line counts and the output path before a model loads (or compiles)
    lines = read_lines(args.input, allow_empty=True) if args.input else None
    if lines is not None:
        _check_line_counts(args, lines, prefixes, constraints)
    if args.output:
        check_output_file(args.output, inputs=[args.input, args.target_prefix, args.constraints],
                          model_dirs=args.model)
    check_before_loading(args, options, lines, configs=configs)
    translator = load_translator(args, args.model, args.weights)
    options = resolve_options(translator, options)  # before reading stdin
    alignment_of = heads.alignment_function(args, translator)
    tracer = TraceWriter(args=args, translator=translator, options=options) if args.trace else None

    def decode(lines: list[str], first_line: int = 0) -> list:
        """first_line: where `lines` start in the whole input (interactive mode decodes one at a time)."""
        results = search(lines, first_line)
        if tracer is not None:
            tracer.add(lines, first_line, prefixes, constraints)
        return results

    def search(lines: list[str], first_line: int) -> list:
        prefix = None
        if prefixes is not None:
            if first_line + len(lines) > len(prefixes):
                raise AiaynError(f"--target-prefix {args.target_prefix} has {len(prefixes)} lines, fewer than the "
                                 f"input's {first_line + len(lines)}: give one line per input line")
            prefix = prefixes[first_line: first_line + len(lines)]
        if constraints is not None:
            return _constrained(translator, lines, options, prefix, constraints, first_line, args.constraints)
        if args.diagnostics:
            return translate_diagnosed(translator, lines, options, target_prefix=prefix)
        return translator.translate(lines, options=options, target_prefix=prefix)

    def render(result) -> str:
        alignment = alignment_of(result)
        if args.diagnostics:
            return _json_line(result, args.n_best, alignment)
        return _render(result, args.n_best, alignment)

    if args.input or args.output:  # whole input first: `--output f < f` must read f before replacing it
        if lines is None:  # an empty input, file or stdin alike, is an empty output
            lines = read_lines(args.input, allow_empty=True) if args.input else \
                list(iter_stream_lines(sys.stdin.buffer))
        _check_line_counts(args, lines, prefixes, constraints)
        results = decode(lines) if lines else []
        warn_truncated(results, args.input or "<stdin>")
        warn_input(translator, lines, results, args.input or "<stdin>")
        text = "".join(render(r) + "\n" for r in results)
        if args.output:
            write_output_file(args.output, text, inputs=[args.input, args.target_prefix, args.constraints],
                         model_dirs=[*args.model, translator.model_dir])
        else:
            sys.stdout.write(text)
        if tracer is not None:
            tracer.close()
        return 0
    code = _interactive(translator, decode, render)
    if tracer is not None:
        tracer.close()
    return code


def _check_line_counts(args, lines: list[str], prefixes, constraints) -> None:
    """--target-prefix and --constraints: one line per input line."""
    from aiayn.errors import AiaynError

    if prefixes is not None and len(prefixes) != len(lines):
        raise AiaynError(f"--target-prefix {args.target_prefix} has {len(prefixes)} lines for "
                         f"{len(lines)} input lines: give one line per input line (a blank one: no prefix)")
    if constraints is not None and len(constraints) != len(lines):
        raise AiaynError(f"--constraints {args.constraints} has {len(constraints)} lines for {len(lines)} input "
                         f"lines: give one line per input line (a blank one: no constraints)")


def _check_translate_flags(args, options) -> None:
    """The combinations of translate's flags that cannot work with each other or with --engine's capabilities,
    refused before a model is loaded (or exported): the flags that are not decoding options, then the decoding
    options' own check (DecodeOptions.check_engine, which Translator.translate makes again)."""
    from aiayn.decoding.registry import capabilities_of
    from aiayn.errors import AiaynError

    engine = capabilities_of(args.engine)
    _check_diagnostics(args)
    if args.sample and args.target_prefix is not None:
        raise AiaynError("--sample draws one translation per sentence: drop --target-prefix")
    if args.constraints is not None and (args.sample or not engine.constraints):
        raise AiaynError("--sample draws one translation per sentence: drop --constraints" if args.sample else
                         "--constraints needs the native engine (--engine native): CTranslate2 has no lexical "
                         "constraints, only a target prefix")
    if args.constraints is not None and args.diagnostics:
        raise AiaynError("--diagnostics reads the maps of an unconstrained search: drop --constraints or --diagnostics")
    if args.alignment_head and not args.alignment:
        raise AiaynError("--alignment-head chooses where --alignment's links come from: add --alignment")
    if args.alignment_from != "weights" and not args.alignment:
        raise AiaynError(f"--alignment-from {args.alignment_from} chooses what --alignment's links are read from: "
                         f"add --alignment")
    if args.alignment and args.n_best != 1:
        raise AiaynError(f"--alignment comes from the best hypothesis's attention: use it with --n-best 1, "
                         f"not {args.n_best}")
    if (args.alignment and not engine.attention_maps) or (args.sample and not engine.sampling):
        raise AiaynError(f"{'--alignment' if args.alignment else '--sample'} needs the native engine "
                         f"(--engine native): the {args.engine} engine gives neither aiayn's attention maps nor its "
                         f"sampling")
    if args.workers > 1 and not engine.maps_in_workers and (args.alignment or args.sample):
        raise AiaynError(f"{'--alignment' if args.alignment else '--sample'} decodes in this process (the maps and "
                         f"the samples come from its model): drop --workers {args.workers}")
    check_trace(args, engine)
    options.check_engine(engine)  # what the options themselves ask of the engine (translate checks it again)


def _interactive(translator, decode, render) -> int:
    """stdin answered line by line, each as it comes (decode(lines, first_line), render(result) -> its text)."""
    from aiayn.data.corpus import iter_stream_lines

    if sys.stdin.isatty():
        print(f"model {translator.model_dir} loaded; type a sentence and press Enter "
              f"(Ctrl-D to end)", file=sys.stderr)
    try:
        for number, line in enumerate(iter_stream_lines(sys.stdin.buffer), start=1):
            result = decode([line], number - 1)[0]
            warn_truncated([result], f"<stdin> line {number}")
            warn_input(translator, [line], [result], "<stdin>", first=number)
            print(render(result), flush=True)
    except KeyboardInterrupt:  # Ctrl-C ends the input like Ctrl-D, but says it was interrupted
        print("", file=sys.stderr)
        return 130
    return 0


def _constrained(translator, lines, options, prefix, constraints, first_line: int, path: str) -> list:
    """The translations of `lines` (from input line first_line + 1) with their lines of --constraints PATH;
    a warning for each that reached its length limit before it met them all."""
    from aiayn.errors import AiaynError

    if first_line + len(lines) > len(constraints):
        raise AiaynError(f"--constraints {path} has {len(constraints)} lines, fewer than the input's "
                         f"{first_line + len(lines)}: give one line per input line")
    results = translator.translate(lines, options=options, target_prefix=prefix,
                                   constraints=constraints[first_line: first_line + len(lines)])
    for number, result in enumerate(results, start=first_line + 1):
        if not result.constraints_met:
            print(f"warning: line {number}: the translation reached its length limit before it met all its "
                  f"constraints", file=sys.stderr)
    return results


def _read_constraints(path: str) -> list[list[str]]:
    """--constraints FILE: per line its tab-separated phrases (empty fields skipped; a blank line: none)."""
    from aiayn.data.corpus import read_lines

    return [[p.strip() for p in line.split("\t") if p.strip()] for line in read_lines(path, allow_empty=True)]


def _test_set_name(args) -> str:
    """Where the test set's sources come from, as warnings name them (with the sentence's number)."""
    return args.src if not args.dataset else f"{args.dataset} {args.split} {args.pair}"


def _warn_truncated_lines(results, where: str, shown: int = 10) -> list[int]:
    """The numbers (from 1) of the sources cut to the model's positions, each warned as translate warns it;
    past `shown` of them, one line with their count and the first numbers."""
    lines = [number for number, result in enumerate(results, start=1) if result.truncated]
    if len(lines) <= shown:
        warn_truncated(results, where)
    else:
        print(f"warning: {where}: {len(lines)} sources are longer than the model's maximum source length (lines "
              f"{', '.join(map(str, lines[:shown]))}, ...); translated only their beginnings, and scored so",
              file=sys.stderr)
    return lines


def _print_comparison(compare: str, result: dict) -> None:
    if result["identical"]:
        print(f"vs {compare}: the outputs are identical, sentence for sentence (p = 1.0)")
        return
    for metric, r in result.items():
        if isinstance(r, dict):
            print(f"vs {compare}: {metric} {r['baseline']:.2f} -> {r['candidate']:.2f}, p = {r['p_value']:.4f}")


def cmd_evaluate(args) -> int:
    import time

    from aiayn.decoding.options import options_from_args
    from aiayn.decoding.registry import capabilities_of
    from aiayn.evaluation import as_dicts, check_bootstrap, compare_systems, evaluate_corpus, load_test_set
    from aiayn.inspect.quality.diagnostics import flag_counts, translate_diagnosed
    from aiayn.io import check_output_file, write_output_file

    check_bootstrap(args.bootstrap)  # before minutes of translation
    _check_diagnostics(args)
    options = options_from_args(args)
    options.check_engine(capabilities_of(args.engine))  # before the test set is read or a model loaded
    sources, refs = load_test_set(src=args.src, ref=args.ref, dataset=args.dataset, pair=args.pair, split=args.split,
                                  data_dir=args.data_dir)
    if args.hyp_out:
        check_output_file(args.hyp_out, inputs=[args.src, args.ref], model_dirs=[*args.model, args.compare])
    check_before_loading(args, options, sources)
    if args.compare:  # loaded after the first model's translations: checked before them
        check_before_loading(args, options, sources, paths=[args.compare])
    translator = load_translator(args, args.model, args.weights)
    options = resolve_options(translator, options)
    start = time.perf_counter()
    results = translate_diagnosed(translator, sources, options) if args.diagnostics else \
        translator.translate(sources, options=options)
    seconds = time.perf_counter() - start
    hyps, truncated = [r.text for r in results], _warn_truncated_lines(results, _test_set_name(args))
    translator.close()  # its worker processes, if any: the comparison model may start its own
    if args.hyp_out:
        write_output_file(args.hyp_out, "".join(h + "\n" for h in hyps), inputs=[args.src, args.ref],
                     model_dirs=[*args.model, args.compare, translator.model_dir])
    scores = evaluate_corpus(hyps, refs, args.bootstrap)
    model = str(translator.model_dir) if len(args.model) == 1 else " + ".join(args.model)  # several: an ensemble
    report = {"model": model, "sentences": len(sources), "seconds": round(seconds, 1),
              "engine": translator.engine, "scores": as_dicts(scores), "truncated": truncated}
    if args.diagnostics:
        report["diagnostics"] = flag_counts(results)  # sentences raising each flag
    if args.compute_type:
        report["compute_type"] = args.compute_type
    if translator.tokenizer.folds_case:
        report["lowercase_model"] = True  # trained with data.lowercase: only BLEU-lc compares with references
    if args.compare:
        other = load_translator(args, args.compare)
        other_results = other.translate(sources, options=options_from_args(args))
        other.close()
        report["compare"] = {"baseline": str(other.model_dir),
                             "truncated": _warn_truncated_lines(other_results, f"{_test_set_name(args)} (--compare)"),
                             **compare_systems([r.text for r in other_results], hyps, refs)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['model']}: {len(sources)} sentences translated in {seconds:.1f}s")
    if translator.tokenizer.folds_case:
        print("this model writes lowercased text (trained with data.lowercase): read BLEU-lc; BLEU, chrF and TER "
              "count every capital of the references as an error")
    for s in scores:
        ci = f"  95% CI [{s.ci_low:.2f}, {s.ci_high:.2f}]" if s.ci_low is not None else ""
        print(f"{s.name:8s} {s.score:6.2f}{ci}  {s.signature}")
    if args.compare:
        _print_comparison(args.compare, report["compare"])
    if args.diagnostics:
        print("diagnostics (sentences flagged): " + ", ".join(f"{k} {v}" for k, v in report["diagnostics"].items()))
    return 0


COMMANDS = {"translate": cmd_translate, "evaluate": cmd_evaluate}
