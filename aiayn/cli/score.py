"""aiayn score: the log-probability of given translations under a model (or an ensemble), by teacher
forcing. Wiring and printing only: the logic is Translator.score (aiayn.decoding.scoring)."""

import json
import sys

from aiayn.cli.common import ALPHA_HELP, DEVICE_HELP, LP_FORM_HELP, add_engine, add_models, load_translator

FORMATS = ("jsonl", "tsv")


def add_parsers(sub) -> None:
    p = sub.add_parser("score", help="score given translations: their log-probability under the model")
    add_models(p)
    p.add_argument("--src", required=True, help="source file, one sentence per line")
    p.add_argument("--tgt", required=True, help="target file, one translation per line of --src (a blank line: "
                   "the empty translation, scored as </s> alone)")
    p.add_argument("--alpha", type=float, default=None, help=ALPHA_HELP + "; the score is log_prob / lp(|Y|), "
                   "as beam search scores a hypothesis")
    p.add_argument("--length-penalty-form", choices=["gnmt", "hf"], default=None, help=LP_FORM_HELP)
    p.add_argument("--batch-size", type=int, default=64, help="pairs per batch (default: 64)")
    p.add_argument("--max-tokens", type=int, help="batches of at most this many source + target tokens, padding "
                   "included, as well as at most --batch-size pairs (default: pairs only)")
    p.add_argument("--format", choices=FORMATS, default="jsonl", help="jsonl: one JSON object per line (score, "
                   "log_prob, tokens, token_log_probs); tsv: score<TAB>log_prob<TAB>tokens<TAB>token_log_probs, "
                   "the lists space-separated (default: jsonl)")
    p.add_argument("--output", help="write the scores here, atomically (default: stdout)")
    p.add_argument("--device", default="cpu", help=DEVICE_HELP)
    add_engine(p)


def render(score, fmt: str) -> str:
    if fmt == "jsonl":
        return json.dumps(score.as_dict(), ensure_ascii=False)
    return "\t".join([f"{score.score:.6f}", f"{score.log_prob:.6f}", " ".join(score.tokens),
                      " ".join(f"{x:.6f}" for x in score.token_log_probs)])


def cmd_score(args) -> int:
    from aiayn.data.corpus import read_lines
    from aiayn.decoding.options import DecodeOptions
    from aiayn.errors import AiaynError
    from aiayn.io import check_output_file, write_output_file

    options = DecodeOptions(alpha=args.alpha, length_penalty_form=args.length_penalty_form,
                            batch_size=args.batch_size, max_tokens=args.max_tokens)  # checked before loading
    sources, targets = read_lines(args.src, allow_empty=True), read_lines(args.tgt, allow_empty=True)
    if len(sources) != len(targets):
        raise AiaynError(f"--src {args.src} has {len(sources)} lines but --tgt {args.tgt} has {len(targets)}: give "
                         f"one translation per source line")
    if args.output:  # before a model is loaded
        check_output_file(args.output, inputs=[args.src, args.tgt], model_dirs=[*args.model])
    translator = load_translator(args, args.model, args.weights)
    scores = translator.score(sources, targets, options)
    text = "".join(render(s, args.format) + "\n" for s in scores)
    if args.output:
        write_output_file(args.output, text, inputs=[args.src, args.tgt], model_dirs=[*args.model])
    else:
        sys.stdout.write(text)
    return 0


COMMANDS = {"score": cmd_score}
