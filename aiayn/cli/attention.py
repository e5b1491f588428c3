"""The attention command: one sentence's attention maps (weights, or value-norm contributions) as PNG, HTML,
NPZ, JSON or a hard alignment. Wiring and printing only."""

import sys

from aiayn.cli.common import BEAM_HELP, MODEL_HELP


def add_parsers(sub) -> None:
    p = sub.add_parser("attention", help="attention maps of a sentence as PNG, HTML, NPZ or JSON")
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("sentence")
    p.add_argument("--target", help="teacher-forced target (default: the model's own beam search output)")
    p.add_argument("--layer", type=int, help="only this layer, counted from 1 as in the paper and every picture "
                   "(default: all)")
    p.add_argument("--head", type=int, help="only this head, counted from 1 (default: all)")
    p.add_argument("--kind", default="cross", choices=["cross", "encoder_self", "decoder_self", "all"],
                   help="which attention; selects what every format holds (default: cross; all = every kind)")
    p.add_argument("--measure", default="weights", choices=["weights", "contributions"],
                   help="what the maps hold: weights (the attention weights alpha) or contributions (the value-norm "
                   "maps ||alpha_ij f(x_j)||, how much each key's value vector moves, with each row normalised to "
                   "sum to 1 so the colour scale matches the weights'; the figure's title says so; Transformer "
                   "models) (default: weights)")
    p.add_argument("--merge-words", action="store_true", help="merge subwords into words (default: off)")
    p.add_argument("--out", required=True, help="file: .png (grid), .html (offline page), .npz / .json (data), "
                   ".align (hard alignment i-j from cross-attention; default last layer, all heads)")
    p.add_argument("--beam", type=int, default=None, help=BEAM_HELP)


def cmd_attention(args) -> int:
    from aiayn.cli.common import check_before_loading
    from aiayn.decoding.options import DecodeOptions
    from aiayn.decoding.translator import Translator
    from aiayn.inspect.contributions.maps import contribution_maps
    from aiayn.inspect.maps.capture import capture, merge_subwords
    from aiayn.inspect.maps.checks import InspectError
    from aiayn.inspect.maps.files import write_maps
    from aiayn.io import check_output_file

    # what needs no model first: the output path, the beam and --layer/--head against config.yaml
    check_output_file(args.out, model_dirs=[args.model])
    cfg = check_before_loading(args, DecodeOptions(beam=args.beam), [args.sentence], paths=[args.model])
    if args.measure == "contributions" and not cfg.model.multi_head:
        raise InspectError("--measure contributions needs a Transformer's layers of heads; this model's one "
                           "attention map has weights only: drop --measure")
    if cfg.model.multi_head:  # an RNN's one map per kind: write_maps names what it has
        shapes = [cfg.model.attention_shape(kind) for kind in ("encoder_self", "decoder_self", "cross")
                  if args.kind in (kind, "all")]
        _index(args.layer, "layer", [s[0] for s in shapes])
        _index(args.head, "head", [s[1] for s in shapes])
    translator = Translator.from_pretrained(args.model)
    translator.resolve(beam=args.beam)
    check_output_file(args.out, model_dirs=[args.model, translator.model_dir])
    maps = capture(translator, args.sentence, args.target, beam=args.beam)
    if args.measure == "contributions":  # measured on the subwords, merged after like the weights
        maps = contribution_maps(translator, maps)
    if args.merge_words:
        maps = merge_subwords(maps)
    if maps.truncated:
        print(f"warning: the sentence is longer than the model's maximum source length "
              f"({translator.max_positions} subword tokens); these maps are of its beginning", file=sys.stderr)
    shapes = [m.shape for kind, m in maps.maps.items() if args.kind in (kind, "all")]  # (L, H, Q, K) each
    layer, head = _index(args.layer, "layer", [s[0] for s in shapes]), _index(args.head, "head", [s[1] for s in shapes])
    path = write_maps(maps, args.out, kind=args.kind, layer=layer, head=head)
    label = "target" if args.target else "translation"  # a given target is not the model's translation
    print(f"{label}: {maps.translation}\nwrote {path}")
    return 0


def _index(value: int | None, name: str, sizes: list[int]) -> int | None:
    """--layer / --head count from 1, as the paper and the titles do -> the maps' 0-based index (None: all)."""
    from aiayn.inspect.maps.checks import InspectError

    if value is None or not sizes:  # no maps of the kind: write_maps says so
        return None
    size = min(sizes)
    if not 1 <= value <= size:
        raise InspectError(f"--{name} {value} out of range: the model has {size} {name}s, numbered 1 to {size}")
    return value - 1


COMMANDS = {"attention": cmd_attention}
