"""What several command groups share: option help texts, loading a Translator from the arguments, and the
warnings they print (wiring and printing only)."""

import argparse
import sys

MODEL_HELP = "checkpoint directory, or a training output directory (then average/, else best/, else latest)"
DEVICE_HELP = "cpu, cuda or cuda:N (default: cpu)"
BEAM_HELP = "beam size (default: the model's decode.beam, 4 in the paper)"
ALPHA_HELP = "length penalty alpha, >= 0 (default: the model's decode.length_penalty, 0.6 in the paper)"
ENGINE_HELP = ("native: aiayn's own beam search (attention maps); ct2: CTranslate2 on an export cached in "
               "MODEL/ct2/ (made or refreshed when missing or stale; needs aiayn[export]); scores with the hf "
               "length penalty |Y|^alpha (default: native)")
COMPUTE_HELP = ("precision of the products, as CTranslate2 spells it: native engine float32 (default), bfloat16 or "
                "int8 (CPU; attention maps as ever; docs/guides/translate-evaluate.md); with --engine ct2 any "
                "CTranslate2 compute type, e.g. int8, int8_float32 (default: CTranslate2's default for the device)")
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


def add_engine(p) -> None:
    # the names are checked by the engine registry (aiayn.decoding.registry), not here: no torch to parse flags
    p.add_argument("--engine", default="native", help=ENGINE_HELP)
    p.add_argument("--compute-type", default=None, help=COMPUTE_HELP)
    p.add_argument("--workers", type=int, default=1, help=WORKERS_HELP)
    p.add_argument("--compile", action="store_true", help=COMPILE_HELP)


def add_search(p) -> None:
    """The beam search options that translate and evaluate share."""
    p.add_argument("--beam", type=int, default=None, help=BEAM_HELP)
    p.add_argument("--alpha", type=float, default=None, help=ALPHA_HELP)
    p.add_argument("--length-penalty-form", choices=["gnmt", "hf"], default=None, help=LP_FORM_HELP)
    p.add_argument("--early-stopping", action=argparse.BooleanOptionalAction, default=None, help=EARLY_HELP)


def warn_truncated(results, where: str) -> None:
    for number, result in enumerate(results, start=1):
        if result.truncated:
            print(f"warning: {where}:{number}: longer than the model's maximum source length; "
                  f"translated only its beginning", file=sys.stderr)


def warn_input(translator, lines: list[str], results, where: str, first: int = 1) -> None:
    """A warning line for each sentence made mostly of pieces the model cannot read, or whose output stopped
    at its length limit (aiayn.inspect.quality.warnings; a cut source is warned by warn_truncated)."""
    from aiayn.inspect.quality.warnings import in_words, input_warnings

    for number, (line, result) in enumerate(zip(lines, results), start=first):
        if not line.strip():
            continue
        found = input_warnings(translator.tokenizer, result.src_tokens, line, stopped=result.stopped_at_limit,
                               cut=False, max_positions=translator.max_positions)
        for warning in found:
            print(f"warning: {where}:{number}: {in_words(warning)}", file=sys.stderr)


def add_models(p) -> None:
    """--model, repeatable (several: an ensemble), and --weights."""
    p.add_argument("--model", required=True, action="append", help=MODEL_HELP + "; give it again for an ensemble "
                   "(models of one shared vocabulary, their next-token probabilities averaged; native engine)")
    p.add_argument("--weights", type=float, nargs="+", metavar="W", help="with several --model: one weight per "
                   "model, > 0, normalized to sum to 1 (default: equal weights)")


def model_configs(paths) -> list:
    """Each model's config.yaml (--model: a checkpoint or run directory), read without loading the model."""
    from aiayn.checkpoint import load_config_file
    from aiayn.run_dir import resolve_model_dir

    return [load_config_file(resolve_model_dir(p)) for p in paths]


def check_before_loading(args, options, lines: list[str] | None = None, paths=None, configs=None):
    """What needs only the models' config.yaml, refused before a model is loaded or compiled (seconds; with
    --compile a minute and more): the options against the model (DecodeOptions.for_model: the beam against
    its vocabulary, lengths against its positions; the loaded model checks them again), and the search's
    memory by a lower bound: each word of `lines` (the input, when read already; else one sentence of one
    word) is at least one subword. paths: the models (default --model), or their configs (model_configs).
    Returns the first model's config."""
    from aiayn.decoding.registry import capabilities_of

    configs = configs or model_configs(paths or args.model)
    first = configs[0]
    positions = min(c.model.max_positions or 1024 for c in configs)  # Translator.max_positions' rule
    resolved = options.for_model(first.decode, vocab_size=first.model.tgt_vocab_size, max_positions=positions,
                                 capabilities=capabilities_of(getattr(args, "engine", "native")))
    _check_memory_lower_bound(first, resolved, lines, positions)  # the first model's alone: a lower bound
    return first


def _check_memory_lower_bound(cfg, options, lines, positions: int) -> None:
    """The search's cache and scores (aiayn.data.memory_budget.check_decoding) for two batches some input
    surely has: its longest sentence alone, and a full batch of its shortest (tokens: words + </s>)."""
    from aiayn.data.memory_budget import check_decoding

    words = sorted(len(line.split()) + 1 for line in (lines if lines is not None else ["x"]) if line.strip())
    if not words:
        return
    beam = 1 if options.sampling is not None else options.beam
    full = min(options.batch_size, len(words))
    if options.max_tokens is not None:
        full = max(1, min(full, options.max_tokens // words[0]))
    for sentences, source in ((1, min(words[-1], positions)), (full, min(words[0], positions))):
        output = max(min(options.max_output_len, int(source * cfg.decode.max_len_a + cfg.decode.max_len_b)),
                     options.min_length + 1)
        check_decoding(multi_head=cfg.model.multi_head, layers=cfg.model.n_decoder_layers,
                       d_model=cfg.model.d_model, vocab_size=cfg.model.tgt_vocab_size, beam=beam,
                       sentences=sentences, source_len=source, output_len=output)


def load_translator(args, path, weights=None):
    """path: a model directory, or a list of them (one: that model; several: an ensemble with `weights`)."""
    from aiayn.decoding.translator import Translator

    if isinstance(path, list) and len(path) == 1 and weights is None:
        path = path[0]
    return Translator.from_pretrained(path, args.device, engine=args.engine, compute_type=args.compute_type,
                                      workers=args.workers, compile=args.compile, weights=weights)


def resolve_options(translator, options):
    """The options checked against the loaded model and engine (before any input is read), with a note
    where the ct2 engine scores with another length penalty form than the model's."""
    resolved = translator.resolve(options)
    model_form = translator.decode_cfg.length_penalty_form
    if (resolved.sampling is None and options.length_penalty_form is None
            and resolved.length_penalty_form != model_form and resolved.alpha != 0 and resolved.beam > 1):
        print(f"note: --engine ct2 scores with CTranslate2's length penalty |Y|^alpha (the hf form), not the "
              f"model's {model_form}; a few beam outputs may differ from --engine native", file=sys.stderr)
    return resolved
