"""The commands that train: train (a config, or the built-in task) and demo (the built-in task end to end,
then held-out examples translated). Wiring and printing only."""

import signal
from pathlib import Path

DEMO_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "demo.yaml"


def _add_train(sub) -> None:
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


def _add_demo(sub) -> None:
    p = sub.add_parser("demo", help="train the built-in task end to end, translate held-out examples")
    p.add_argument("--out", default="runs/demo", help="output directory (default: runs/demo)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value of configs/demo.yaml (repeatable)")


def add_parsers(sub) -> None:
    _add_train(sub)
    _add_demo(sub)


def _existing(out: Path, names) -> str:
    return "  ".join(f"{out / n}" for n in names if (out / n).exists())


def _threads(cfg):
    """The run's torch threads, printed first (aiayn.threads says how they are chosen)."""
    from aiayn.threads import choose_threads

    choice = choose_threads(cfg.train.num_threads)
    print(choice.line(), flush=True)
    return choice


def _store_thresholds(out, device: str) -> None:
    """The model's own diagnostic thresholds, from its validation outputs (aiayn.inspect.quality.calibration),
    stored beside it; a run whose validation data cannot be translated keeps the defaults, with a line."""
    from aiayn.errors import AiaynError
    from aiayn.inspect.quality.calibration import calibrate_model

    try:
        path, calibration = calibrate_model(out, device=device)
    except (AiaynError, OSError) as err:  # the model is saved: its thresholds are an extra
        print(f"diagnostic thresholds not stored ({err}); the diagnostics use the defaults")
        return
    print(f"diagnostic thresholds of its {calibration['sentences']} validation outputs: {path}")


def cmd_train(args) -> int:
    from aiayn.cli import _exit_now
    from aiayn.config import load_config
    from aiayn.device import limit_primitive_cache
    from aiayn.evaluation import dev_bleu_factory
    from aiayn.training.distributed import shutdown
    from aiayn.training.run import prepare_run

    limit_primitive_cache()  # memory that grew with every step (BENCHMARKS.md, training memory)
    cfg = load_config(args.config or DEMO_CONFIG, args.overrides)
    if args.data_dir:  # a path, taken as it is (through --set it would be parsed as YAML)
        cfg.data.data_dir = args.data_dir
    trainer = prepare_run(cfg, args.out, dev_bleu_factory, args.device, init_from=args.init_from,
                          overrides=args.overrides, threads=_threads(cfg))
    main_process = trainer.dist.is_main
    if main_process and trainer.resumed_from is not None:
        print(f"resuming from {trainer.resumed_from} (step {trainer.progress.step})")
    if main_process and cfg.train.tensorboard:
        print(f"TensorBoard: tensorboard --logdir {Path(args.out) / 'tensorboard'}")
    try:
        out = trainer.train()
    except KeyboardInterrupt:
        print(f"stopped at once (second signal); resume with the same command (checkpoint in {args.out}/checkpoints)")
        return 130
    # every rank leaves the process group before the interpreter exits: left to exit, gloo's threads could
    # abort a rank ("terminate called without an active exception", exit -6) after a finished run
    shutdown(trainer.dist)
    if not main_process:
        # the other ranks have written all they write; leaving without the interpreter's teardown spares
        # them torch's native exit path, where a rank still aborted now and then after the process group
        # was destroyed ("terminate called without an active exception", exit -6, failing the job)
        _exit_now(0)
    p = trainer.progress
    print(f"stopped at step {p.step} (epoch {p.epoch}): {trainer.stop_reason}")
    if trainer.stopped_by_signal:
        print(f"resume with the same command (checkpoint in {args.out}/checkpoints)")
        return 128 + int(getattr(signal, trainer.stopped_by_signal, signal.SIGINT))
    if p.best_step:
        print(f"best dev BLEU {p.best_bleu:.2f} at step {p.best_step}" if p.best_bleu >= 0 else
              f"best validation loss {p.best_valid_loss:.3f} at step {p.best_step}")
    _store_thresholds(out, args.device)
    print(f"model directories: {_existing(out, ('average', 'best', 'checkpoints'))}")
    return 0


def cmd_demo(args) -> int:
    from aiayn.config import load_config
    from aiayn.data.synthetic import number_task
    from aiayn.decoding.translator import Translator
    from aiayn.evaluation import dev_bleu_factory
    from aiayn.run_dir import resolve_model_dir
    from aiayn.training.run import prepare_run

    cfg = load_config(DEMO_CONFIG, args.overrides)
    print(f"training the built-in task (English number words -> German) into {args.out} ...")
    trainer = prepare_run(cfg, args.out, dev_bleu_factory, threads=_threads(cfg))
    trainer.train()
    if trainer.stopped_by_signal:
        print(f"{trainer.stop_reason}; run `aiayn demo --out {args.out}` again to resume")
        return 128 + int(getattr(signal, trainer.stopped_by_signal))
    _store_thresholds(args.out, "cpu")
    model_dir = resolve_model_dir(args.out)  # average, else best, else the latest (a run shorter than eval_every)
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
    print(f"       aiayn serve --model {model_dir}   (the explorer: every attention map, at http://127.0.0.1:8000)")
    return 0


COMMANDS = {"train": cmd_train, "demo": cmd_demo}
