"""`aiayn calibrate`: a model's own diagnostic thresholds, from its outputs on its validation sources, stored
beside it (aiayn.inspect.quality.calibration); `aiayn translate --diagnostics` and the page then judge by
them. Training stores them at its end; this is for a model trained before, or on other data. Wiring and
printing only."""

CALIBRATE_DESCRIPTION = (
    "Translates the model's validation sources (its config's validation data, or --src), measures each "
    "diagnostic signal on its own outputs, and writes thresholds.json into the model directory: each signal's "
    "tail of those outputs, the largest (1.0%, 0.9%, ... 0.1%) that keeps at most 4% of them flagged; with "
    "it, a combined score (a logistic regression over the signals) fitted on those outputs and the outputs of "
    "slightly perturbed sources that stayed close, against hallucinations injected into them and the "
    "perturbed sources' own hallucinations, flagging above the same tail of its scores. Exits 2, "
    "with one line, when the model, the data or --src cannot be read.")


def _count(text: str) -> int:
    import argparse

    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of sentences (1 or more)")
    return int(text)


def add_parsers(sub) -> None:
    p = sub.add_parser("calibrate", help="compute a model's own diagnostic thresholds on its validation data "
                       "and store them with it (thresholds.json)", description=CALIBRATE_DESCRIPTION)
    p.add_argument("--model", required=True, help="checkpoint directory, or a training output directory (then "
                   "average/, else best/, else latest); thresholds.json is written into that checkpoint")
    p.add_argument("--data-dir", help="local Multi30k directory, for a model trained on Multi30k (default: the "
                   "model config's data.data_dir, else $AIAYN_MULTI30K_DIR)")
    p.add_argument("--src", metavar="FILE", help="validation sources, one a line, in place of the model "
                   "config's validation data (e.g. for an imported model)")
    # the default is the library's (CALIBRATION_SENTENCES), named here without importing it: the command line
    # must not load torch before it sets the threads' wait policy (aiayn.threads)
    p.add_argument("--limit", type=_count, help="the first N validation sentences (default: 500)")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")


def cmd_calibrate(args) -> int:
    from aiayn.inspect.quality.calibration import CALIBRATION_SENTENCES, calibrate_model

    path, calibration = calibrate_model(args.model, data_dir=args.data_dir, src_file=args.src,
                                        limit=args.limit or CALIBRATION_SENTENCES, device=args.device)
    values = ", ".join(f"{k} {v}" for k, v in calibration["thresholds"].items())
    print(f"{calibration['sentences']} validation outputs, each signal's {calibration['tail_percent']}% tail "
          f"({calibration['flagged_share']:.1%} of them flagged): {values}")
    combined = calibration.get("combined")
    if combined is None:
        print("combined score: not fitted (it needs two or more validation outputs and a hallucination injected "
              "into them or found on their perturbed sources)")
    else:
        print(f"combined score over {', '.join(combined['signals'])}: fitted on {combined['clean']} clean outputs "
              f"and {combined['hallucinations']} hallucinations (injected, and found on perturbed sources); flags "
              f"above {combined['threshold']}")
    print(f"wrote {path}")
    return 0


COMMANDS = {"calibrate": cmd_calibrate}
