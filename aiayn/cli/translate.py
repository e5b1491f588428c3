"""CLI subcommands that use trained models: translate, evaluate, average, attention, serve (wiring only)."""

import json
import sys
from pathlib import Path

MODEL_HELP = "checkpoint directory, or a training output directory (then average/, else best/, else latest)"
DEVICE_HELP = "cpu, cuda or cuda:N (default: cpu)"
BEAM_HELP = "beam size (default: the model's decode.beam, 4 in the paper)"
ALPHA_HELP = "length penalty alpha, >= 0 (default: the model's decode.length_penalty, 0.6 in the paper)"
ENGINE_HELP = ("native: aiayn's own beam search (attention maps); ct2: CTranslate2 on an export cached in "
               "MODEL/ct2/ (made or refreshed when missing or stale; needs aiayn[export]); scores with the hf "
               "length penalty |Y|^alpha (default: native)")
COMPUTE_HELP = ("with --engine ct2: CTranslate2's compute type, e.g. float32, int8, int8_float32, float16 "
                "(default: CTranslate2's default for the device)")
WORKERS_HELP = ("batches decoded side by side on CPU, each on one core: worker processes of one thread for the "
                "native engine (forked on Linux: they share the model's memory), CTranslate2's inter_threads for "
                "ct2; the cores are the usual choice for a file (default: 1, this process alone; interactive "
                "input decodes one line at a time, so more than one gains nothing there)")
COMPILE_HELP = ("native engine on CPU: beam search runs an encoder and decoding step compiled ahead of time by "
                "torch (AOTInductor; needs a C++ compiler). The first run of a model compiles for about 90 s, "
                "later ones load it from $AIAYN_CACHE/compiled (default ~/.cache/aiayn) in seconds; forked "
                "workers share it. Faster at every batch size, one sentence at a time above all (BENCHMARKS.md) "
                "(default: off)")
EARLY_HELP = ("end a sentence's beam search at beam-size finished hypotheses (fairseq's and CTranslate2's rule: "
              "fewer steps); --no-early-stopping goes on while a live hypothesis could still win (default: the "
              "model's decode.early_stopping, false; on with --engine ct2)")
LP_FORM_HELP = ("length penalty form: gnmt divides by ((5 + |Y|) / 6)^alpha, hf by |Y|^alpha as transformers "
                "does (default: the model's decode.length_penalty_form: gnmt, hf for imported Marian models)")


def _port(text: str) -> int:
    import argparse

    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def _add_engine(p) -> None:
    p.add_argument("--engine", choices=["native", "ct2"], default="native", help=ENGINE_HELP)
    p.add_argument("--compute-type", default=None, help=COMPUTE_HELP)
    p.add_argument("--workers", type=int, default=1, help=WORKERS_HELP)
    p.add_argument("--compile", action="store_true", help=COMPILE_HELP)


def add_parsers(sub) -> None:
    import argparse

    p = sub.add_parser("translate", help="translate lines (stdin, interactive, or --input FILE)")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--beam", type=int, default=None, help=BEAM_HELP)
    p.add_argument("--n-best", type=int, default=1, help="hypotheses per sentence, 1..beam (default: 1); "
                   "more than 1 prints 'rank<TAB>score<TAB>text' lines")
    p.add_argument("--alpha", type=float, default=None, help=ALPHA_HELP)
    p.add_argument("--length-penalty-form", choices=["gnmt", "hf"], default=None, help=LP_FORM_HELP)
    p.add_argument("--early-stopping", action=argparse.BooleanOptionalAction, default=None, help=EARLY_HELP)
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
    p.add_argument("--max-tokens", type=int, help="batches of at most this many source tokens, padding "
                   "included, as well as at most --batch-size sentences (default: sentences only)")
    p.add_argument("--alignment", action="store_true", help="also print word alignments after ' ||| ': Pharaoh "
                   "i-j (source word i, output word j, 0-based) from the last layer's cross-attention averaged "
                   "over heads, subwords merged into words (default: off; --n-best 1, native engine)")
    p.add_argument("--device", default="cpu", help=DEVICE_HELP)
    _add_engine(p)

    p = sub.add_parser("evaluate", help="translate a test set and score it with sacreBLEU")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--src", help="source file (with --ref)")
    p.add_argument("--ref", help="reference file (raw text)")
    p.add_argument("--dataset", choices=["multi30k"], help="instead of --src/--ref")
    p.add_argument("--pair", default="de-en", help="language pair for --dataset (default: de-en)")
    p.add_argument("--split", default="test_2016_flickr", help="split for --dataset (default: test_2016_flickr)")
    p.add_argument("--data-dir", help="local Multi30k directory (default: $AIAYN_MULTI30K_DIR, else download)")
    p.add_argument("--beam", type=int, default=None, help=BEAM_HELP)
    p.add_argument("--alpha", type=float, default=None, help=ALPHA_HELP)
    p.add_argument("--length-penalty-form", choices=["gnmt", "hf"], default=None, help=LP_FORM_HELP)
    p.add_argument("--early-stopping", action=argparse.BooleanOptionalAction, default=None, help=EARLY_HELP)
    p.add_argument("--bootstrap", type=int, default=1000,
                   help="bootstrap samples for the 95%% CI (default: 1000; 0 = off)")
    p.add_argument("--compare", help="a second model directory: paired significance test against it")
    p.add_argument("--hyp-out", help="also write the translations to this file (atomically)")
    p.add_argument("--json", action="store_true", help="machine-readable output (default: a table)")
    p.add_argument("--device", default="cpu", help=DEVICE_HELP)
    _add_engine(p)

    p = sub.add_parser("average", help="average the weights of several checkpoints")
    p.add_argument("checkpoints", nargs="+", help="checkpoint directories of one model")
    p.add_argument("--out", required=True, help="new or empty directory for the averaged checkpoint")
    p.add_argument("--force", action="store_true", help="replace an earlier average at --out (default: refuse)")

    p = sub.add_parser("attention", help="attention maps of a sentence as PNG, HTML, NPZ or JSON")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("sentence")
    p.add_argument("--target", help="teacher-forced target (default: the model's own beam search output)")
    p.add_argument("--layer", type=int, help="only this layer, 0-based (default: all)")
    p.add_argument("--head", type=int, help="only this head, 0-based (default: all)")
    p.add_argument("--kind", default="cross", choices=["cross", "encoder_self", "decoder_self", "all"],
                   help="which attention; selects what every format holds (default: cross; all = every kind)")
    p.add_argument("--merge-words", action="store_true", help="merge subwords into words (default: off)")
    p.add_argument("--out", required=True, help="file: .png (grid), .html (offline page), .npz / .json (data), "
                   ".align (hard alignment i-j from cross-attention; default last layer, all heads)")
    p.add_argument("--beam", type=int, default=None, help=BEAM_HELP)

    p = sub.add_parser("export", help="convert a Transformer to CTranslate2 (needs aiayn[export])")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--out", required=True, help="new or empty directory for the CTranslate2 model")
    p.add_argument("--force", action="store_true", help="replace an earlier export at --out (default: refuse)")

    p = sub.add_parser("serve", help="web page and JSON API (needs aiayn[web])")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine "
                   "only)")
    p.add_argument("--port", type=_port, default=8000, help="port, 1-65535 (default: 8000)")
    p.add_argument("--threads", type=int, default=1, help="torch threads for decoding; 0 = torch's default, one "
                   "per core (default: 1, which leaves a core to the server: BENCHMARKS.md measured 2.5x the "
                   "requests per second on 2 cores; --engine ct2 decodes on 1 CTranslate2 thread whatever this says)")
    p.add_argument("--engine", choices=["native", "ct2"], default="native",
                   help="native: the page, attention maps and the JSON API; ct2: CTranslate2 (an export cached in "
                        "MODEL/ct2/, needs aiayn[export]) for the plain JSON API only (/api/translate with "
                        "\"attention\": false, /api/translate_batch): no page, no maps (default: native)")
    p.add_argument("--compute-type", default=None, help=COMPUTE_HELP)
    p.add_argument("--workers", type=int, default=1, help="worker processes of one torch thread (forked on Linux: "
                   "they share the model's memory), each decoding a batch of concurrent plain requests of its own; "
                   "attention maps and sampling stay in the server's process; with --engine ct2, CTranslate2's "
                   "inter_threads (default: 1, the server's process alone)")
    p.add_argument("--compile", action="store_true", help=COMPILE_HELP)
    p.add_argument("--max-client-connections", type=int, default=None, help="connections one client address may "
                   "hold at once; 0 for no cap, e.g. behind a reverse proxy, where every client has the proxy's "
                   "address (default: 64)")


def _render(result, n_best: int, alignment: str | None = None) -> str:
    if alignment is not None:
        return f"{result.text} ||| {alignment}"
    if n_best == 1:
        return result.text
    return "\n".join(f"{i}\t{score:.4f}\t{text}" for i, (text, score) in enumerate(result.n_best))


def _warn_truncated(results, where: str) -> None:
    for number, result in enumerate(results, start=1):
        if result.truncated:
            print(f"warning: {where}:{number}: longer than the model's maximum source length; "
                  f"translated only its beginning", file=sys.stderr)


def _load_translator(args, path: str):
    from aiayn.decoding.translator import Translator

    return Translator.from_pretrained(path, args.device, engine=args.engine, compute_type=args.compute_type,
                                      workers=args.workers, compile=args.compile)


def _resolve_options(translator, options):
    """The options checked against the loaded model and engine (before any input is read), with a note
    where the ct2 engine scores with another length penalty form than the model's."""
    resolved = translator.resolve(options)
    model_form = translator.decode_cfg.length_penalty_form
    if (resolved.sampling is None and options.length_penalty_form is None
            and resolved.length_penalty_form != model_form and resolved.alpha != 0 and resolved.beam > 1):
        print(f"note: --engine ct2 scores with CTranslate2's length penalty |Y|^alpha (the hf form), not the "
              f"model's {model_form}; a few beam outputs may differ from --engine native", file=sys.stderr)
    return resolved


def cmd_translate(args) -> int:
    from aiayn.data.corpus import iter_stream_lines, read_lines
    from aiayn.decoding.options import options_from_args
    from aiayn.errors import AiaynError
    from aiayn.inspect.capture import word_alignment
    from aiayn.io import write_output_file

    options = options_from_args(args)  # option clashes first: before a model is loaded (or exported)
    if args.sample and args.target_prefix is not None:
        raise AiaynError("--sample draws one translation per sentence: drop --target-prefix")
    if args.alignment and args.n_best != 1:
        raise AiaynError(f"--alignment comes from the best hypothesis's attention: use it with --n-best 1, "
                         f"not {args.n_best}")
    if args.engine == "ct2" and (args.alignment or args.sample):
        raise AiaynError(f"{'--alignment' if args.alignment else '--sample'} needs the native engine "
                         f"(--engine native): CTranslate2 gives neither aiayn's attention maps nor its sampling")
    if args.workers > 1 and args.engine == "native" and (args.alignment or args.sample):
        raise AiaynError(f"{'--alignment' if args.alignment else '--sample'} decodes in this process (the maps and "
                         f"the samples come from its model): drop --workers {args.workers}")
    prefixes = read_lines(args.target_prefix) if args.target_prefix else None
    # with --compile a bad file fails before the model compiles (tens of seconds); else after a bad model
    lines = read_lines(args.input) if args.input and args.compile else None
    translator = _load_translator(args, args.model)
    options = _resolve_options(translator, options)  # before reading stdin

    def decode(lines: list[str], first_line: int = 0) -> list:
        """first_line: where `lines` start in the whole input (interactive mode decodes one at a time)."""
        prefix = None
        if prefixes is not None:
            if first_line + len(lines) > len(prefixes):
                raise AiaynError(f"--target-prefix {args.target_prefix} has {len(prefixes)} lines, fewer than the "
                                 f"input's {first_line + len(lines)}: give one line per input line")
            prefix = prefixes[first_line: first_line + len(lines)]
        return translator.translate(lines, options, target_prefix=prefix)

    def render(result) -> str:
        return _render(result, args.n_best, word_alignment(result, translator) if args.alignment else None)

    if args.input or args.output:  # whole input first: `--output f < f` must read f before replacing it
        if lines is None:
            lines = read_lines(args.input) if args.input else list(iter_stream_lines(sys.stdin.buffer))
        if prefixes is not None and len(prefixes) != len(lines):
            raise AiaynError(f"--target-prefix {args.target_prefix} has {len(prefixes)} lines for "
                             f"{len(lines)} input lines: give one line per input line (a blank one: no prefix)")
        results = decode(lines) if lines else []
        _warn_truncated(results, args.input or "<stdin>")
        text = "".join(render(r) + "\n" for r in results)
        if args.output:
            write_output_file(args.output, text, inputs=[args.input, args.target_prefix],
                         model_dirs=[args.model, translator.model_dir])
        else:
            sys.stdout.write(text)
        return 0
    if sys.stdin.isatty():
        print(f"model {translator.model_dir} loaded; type a sentence and press Enter "
              f"(Ctrl-D to end)", file=sys.stderr)
    try:
        for number, line in enumerate(iter_stream_lines(sys.stdin.buffer), start=1):  # answer each as it comes
            result = decode([line], number - 1)[0]
            _warn_truncated([result], f"<stdin> line {number}")
            print(render(result), flush=True)
    except KeyboardInterrupt:  # Ctrl-C ends the session like Ctrl-D, but says it was interrupted
        print("", file=sys.stderr)
        return 130
    return 0


def _test_set(args):
    from aiayn.data import multi30k
    from aiayn.data.corpus import read_lines, read_parallel
    from aiayn.evaluation import EvaluationError

    if args.dataset:
        src_lang, _, tgt_lang = args.pair.partition("-")
        pairs = read_parallel(*multi30k.pair_paths(args.split, src_lang, tgt_lang, args.data_dir))
        return [s for s, _ in pairs], [t for _, t in pairs]
    if not (args.src and args.ref):
        raise EvaluationError("give --src FILE --ref FILE, or --dataset multi30k --pair de-en --split NAME")
    src, ref = read_lines(args.src), read_lines(args.ref)
    if len(src) != len(ref):
        raise EvaluationError(f"{args.src} has {len(src)} lines but {args.ref} has {len(ref)}; they must be "
                              f"aligned")
    return src, ref


def _test_set_name(args) -> str:
    """Where the test set's sources come from, as warnings name them (with the sentence's number)."""
    return args.src if not args.dataset else f"{args.dataset} {args.split} {args.pair}"


def _warn_truncated_lines(results, where: str, shown: int = 10) -> list[int]:
    """The numbers (from 1) of the sources cut to the model's positions, each warned as translate warns it;
    past `shown` of them, one line with their count and the first numbers."""
    lines = [number for number, result in enumerate(results, start=1) if result.truncated]
    if len(lines) <= shown:
        _warn_truncated(results, where)
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
    from aiayn.evaluation import as_dicts, check_bootstrap, compare_systems, evaluate_corpus
    from aiayn.io import write_output_file

    check_bootstrap(args.bootstrap)  # before minutes of translation
    sources, refs = _test_set(args)
    options = options_from_args(args)
    translator = _load_translator(args, args.model)
    options = _resolve_options(translator, options)
    start = time.perf_counter()
    results = translator.translate(sources, options)
    seconds = time.perf_counter() - start
    hyps, truncated = [r.text for r in results], _warn_truncated_lines(results, _test_set_name(args))
    translator.close()  # its worker processes, if any: the comparison model may start its own
    if args.hyp_out:
        write_output_file(args.hyp_out, "".join(h + "\n" for h in hyps), inputs=[args.src, args.ref],
                     model_dirs=[args.model, args.compare, translator.model_dir])
    scores = evaluate_corpus(hyps, refs, args.bootstrap)
    report = {"model": str(translator.model_dir), "sentences": len(sources), "seconds": round(seconds, 1),
              "engine": translator.engine, "scores": as_dicts(scores), "truncated": truncated}
    if args.compute_type:
        report["compute_type"] = args.compute_type
    if translator.tokenizer.folds_case:
        report["lowercase_model"] = True  # trained with data.lowercase: only BLEU-lc compares with references
    if args.compare:
        other = _load_translator(args, args.compare)
        other_results = other.translate(sources, options_from_args(args))
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
    return 0


def cmd_average(args) -> int:
    from aiayn.checkpoint import average_checkpoints

    out = average_checkpoints([Path(p) for p in args.checkpoints], Path(args.out), force=args.force)
    count = len(args.checkpoints)
    print(f"averaged {count} checkpoint{'s' if count > 1 else ''} into {out} (listed in {out}/info.json)")
    return 0


def cmd_attention(args) -> int:
    from aiayn.decoding.translator import Translator
    from aiayn.inspect.capture import capture
    from aiayn.inspect.render import write_maps

    translator = Translator.from_pretrained(args.model)
    translator.resolve(beam=args.beam)
    from aiayn.io import check_output_file

    check_output_file(args.out, model_dirs=[args.model, translator.model_dir])
    maps = capture(translator, args.sentence, args.target, beam=args.beam, merge_words=args.merge_words)
    if maps.truncated:
        print(f"warning: the sentence is longer than the model's maximum source length "
              f"({translator.max_positions} subword tokens); these maps are of its beginning", file=sys.stderr)
    path = write_maps(maps, args.out, kind=args.kind, layer=args.layer, head=args.head)
    print(f"translation: {maps.translation}\nwrote {path}")
    return 0


def cmd_export(args) -> int:
    from aiayn.export import to_ctranslate2

    out = to_ctranslate2(args.model, args.out, force=args.force)
    print(f"wrote {out} (CTranslate2; source lines need a final </s> piece)")
    return 0


def cmd_serve(args) -> int:
    from aiayn.errors import AiaynError

    try:
        from aiayn.web.app import create_app
        from aiayn.web.server import MAX_CLIENT_CONNECTIONS, ConnectionLimits, guarded_server
    except ImportError as err:
        raise AiaynError(f"aiayn serve needs the web extra: pip install 'aiayn[web]' ({err})") from err
    import torch

    from aiayn.decoding.translator import Translator

    if not 0 <= args.threads <= 1024:
        raise AiaynError(f"--threads {args.threads}: give 0 (torch's default) or 1 to 1024")
    per_client = MAX_CLIENT_CONNECTIONS if args.max_client_connections is None else args.max_client_connections
    if per_client < 0:
        raise AiaynError(f"--max-client-connections {per_client}: give 0 (no cap) or more")
    if args.threads:
        torch.set_num_threads(args.threads)
    translator = Translator.from_pretrained(args.model, engine=args.engine, compute_type=args.compute_type,
                                            workers=args.workers, compile=args.compile)
    server = guarded_server(create_app(translator), host=args.host, port=args.port,
                            limits=ConnectionLimits(per_client=per_client))
    server.run()
    return 0 if server.started else 1  # why not: uvicorn's error line above (e.g. the port is in use)


COMMANDS = {"translate": cmd_translate, "evaluate": cmd_evaluate, "average": cmd_average,
            "attention": cmd_attention, "export": cmd_export, "serve": cmd_serve}
