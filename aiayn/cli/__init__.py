"""The `aiayn` command line: argparse subcommands that wire library pieces together (no logic here)."""

import argparse
import logging
import os
import signal
import sys
from pathlib import Path

from aiayn import __version__

DEMO_CONFIG = Path(__file__).parent / "configs" / "demo.yaml"


def _train_args(sub):
    p = sub.add_parser("train", help="train a model (no CONFIG: the built-in number-words task)")
    p.add_argument("config", nargs="?", help="YAML experiment config (see configs/)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set train.max_steps=200 (repeatable)")
    p.add_argument("--out", required=True, help="new or empty output directory; an existing run of the same "
                   "experiment there is resumed")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--data-dir", help="local Multi30k directory (default: $AIAYN_MULTI30K_DIR, else download)")
    p.add_argument("--init-from", metavar="DIR", help="fine-tune: start from the weights, model config and "
                   "vocabulary of this model directory (an aiayn checkpoint or training output, or an import-hf "
                   "import), with a fresh optimizer, schedule and step count; the config's model section is "
                   "not used (default: none, a new model as the config says)")


def _demo_args(sub):
    p = sub.add_parser("demo", help="train the built-in task end to end, translate held-out examples")
    p.add_argument("--out", default="runs/demo", help="output directory (default: runs/demo)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value of configs/demo.yaml (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiayn", description="Attention Is All You Need: train, translate, "
                                     "evaluate and look inside Transformer and RNN attention models")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details (default: off)")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error (also: AIAYN_DEBUG=1)")
    parser.add_argument("--version", action="version", version=f"aiayn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _train_args(sub)
    _demo_args(sub)
    from aiayn import cli_decode, cli_interop

    cli_decode.add_parsers(sub)
    cli_interop.add_parsers(sub)
    return parser


def bleu_factory(tokenizer, valid_pairs, cfg):
    """Dev BLEU by greedy decoding: the callback the trainer calls at validation."""
    from aiayn.decoding.translate_batch import greedy_translate
    from aiayn.evaluation import corpus_bleu

    pairs = valid_pairs[: cfg.train.bleu_sentences]
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]

    def dev_bleu(model) -> float:
        hyps = greedy_translate(model, tokenizer, sources, cfg.decode)
        return corpus_bleu(hyps, refs, lowercase=cfg.data.lowercase).score  # a lowercasing model: scored as -lc

    return dev_bleu


def _existing(out: Path, names) -> str:
    return "  ".join(f"{out / n}" for n in names if (out / n).exists())


def cmd_train(args) -> int:
    from aiayn.config import load_config
    from aiayn.device import limit_primitive_cache
    from aiayn.training.run import prepare_run

    limit_primitive_cache()  # memory that grew with every step (BENCHMARKS.md, training memory)
    cfg = load_config(args.config or DEMO_CONFIG, args.overrides)
    if args.data_dir:  # a path, taken as it is (through --set it would be parsed as YAML)
        cfg.data.data_dir = args.data_dir
    trainer = prepare_run(cfg, args.out, bleu_factory, args.device, init_from=args.init_from,
                          overrides=args.overrides)
    main_process = trainer.dist.is_main
    if main_process and trainer.resumed_from is not None:
        print(f"resuming from {trainer.resumed_from} (step {trainer.progress.step})")
    try:
        out = trainer.train()
    except KeyboardInterrupt:
        print(f"stopped at once (second signal); resume with the same command (checkpoint in {args.out}/checkpoints)")
        return 130
    if not main_process:
        return 0
    p = trainer.progress
    print(f"stopped at step {p.step} (epoch {p.epoch}): {trainer.stop_reason}")
    if trainer.stopped_by_signal:
        print(f"resume with the same command (checkpoint in {args.out}/checkpoints)")
        return 128 + int(getattr(signal, trainer.stopped_by_signal, signal.SIGINT))
    if p.best_step:
        print(f"best dev BLEU {p.best_bleu:.2f} at step {p.best_step}" if p.best_bleu >= 0 else
              f"best validation loss {p.best_valid_loss:.3f} at step {p.best_step}")
    print(f"model directories: {_existing(out, ('average', 'best', 'checkpoints'))}")
    return 0


def cmd_demo(args) -> int:
    from aiayn.config import load_config
    from aiayn.data.synthetic import number_task
    from aiayn.decoding.translator import Translator
    from aiayn.training.run import prepare_run

    cfg = load_config(DEMO_CONFIG, args.overrides)
    print(f"training the built-in task (English number words -> German) into {args.out} ...")
    trainer = prepare_run(cfg, args.out, bleu_factory)
    trainer.train()
    if trainer.stopped_by_signal:
        print(f"{trainer.stop_reason}; run `aiayn demo --out {args.out}` again to resume")
        return 128 + int(getattr(signal, trainer.stopped_by_signal))
    model_dir = Path(args.out) / "average"
    model_dir = model_dir if model_dir.exists() else Path(args.out) / "best"
    translator = Translator.from_pretrained(model_dir)
    test = number_task(cfg.data.synthetic_train, cfg.data.synthetic_valid, cfg.data.synthetic_valid,
                       cfg.data.synthetic_seed)["test"][:8]
    results = translator.translate([s for s, _ in test], beam=cfg.decode.beam)
    print("\nheld-out examples (never seen in training):")
    for (src, ref), res in zip(test, results):
        mark = "ok " if res.text == ref else "ERR"
        print(f"  [{mark}] {src}\n        -> {res.text}\n           (reference: {ref})")
    print(f"\nmodel: {model_dir}")
    print(f"try:   aiayn translate --model {model_dir}")
    print(f"       aiayn attention --model {model_dir} \"{test[0][0]}\" --out attention.png")
    return 0


COMMANDS = {"train": cmd_train, "demo": cmd_demo}


def _user_message(err: BaseException) -> str | None:
    """One line for the known families of user mistakes; None for anything else, which is a bug and
    keeps its traceback."""
    from aiayn.errors import AiaynError

    if isinstance(err, AiaynError):
        return str(err)
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}; check the path and its permissions"
    return None


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    from aiayn import cli_decode, cli_interop

    handler = COMMANDS.get(args.command) or {**cli_decode.COMMANDS, **cli_interop.COMMANDS}[args.command]
    debug = args.debug or os.environ.get("AIAYN_DEBUG", "") not in ("", "0")
    try:
        return handler(args) or 0
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"aiayn {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (e.g. `| head -1`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except Exception as err:
        message = _user_message(err)
        if message is None or debug:
            raise
        print(f"aiayn {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
