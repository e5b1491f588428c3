"""Which head a word alignment comes from (`translate --alignment --alignment-head`), and the data a model
is ranked on by default: the built-in number task's held-out pairs with their exact gold alignments."""

import json
from pathlib import Path

from aiayn.inspect.alignment.gold import Gold, parse_links
from aiayn.inspect.maps.attention_maps import AttentionMaps
from aiayn.inspect.maps.capture import hard_alignment, maps_of, merge_subwords
from aiayn.inspect.maps.checks import InspectError

HEAD_FORMS = "L:H (layer L, head H, counted from 1), L:mean (layer L's mean over heads), best, or a JSON file of " \
             "`aiayn heads --json` (its best head)"


def model_config(translator):
    from aiayn.checkpoint import load_config_file

    return load_config_file(Path(translator.model_dir))


def builtin_pairs(data) -> list[tuple[str, str]] | None:
    """The number task's test pairs (never trained on) for a model trained on it; None for another model."""
    if data.dataset != "synthetic":
        return None
    from aiayn.data.synthetic import number_task

    return number_task(data.synthetic_train, data.synthetic_valid, data.synthetic_valid,
                       data.synthetic_seed)["test"]


def builtin_golds(pairs) -> list[Gold]:
    from aiayn.data.synthetic import gold_alignments

    return [parse_links(line, "built-in gold") for line in gold_alignments(pairs)]


def head_counts(cfg) -> tuple[int, int]:
    """(decoder layers, heads) whose cross-attention can be chosen; an RNN has one map."""
    return cfg.model.attention_shape("cross")


def parse_head(text: str, n_layers: int, n_heads: int) -> tuple[int, int | None]:
    layer, sep, head = text.partition(":")
    if not (sep and layer.isdigit() and (head.isdigit() or head == "mean")):
        raise InspectError(f"--alignment-head {text!r}: give {HEAD_FORMS}")
    layer_n, head_n = int(layer), None if head == "mean" else int(head)  # counted from 1
    if not 1 <= layer_n <= n_layers or (head_n is not None and not 1 <= head_n <= n_heads):
        raise InspectError(f"--alignment-head {text}: no such head; the model has {n_layers} decoder layers "
                           f"(1 to {n_layers}) of {n_heads} heads (1 to {n_heads})")
    return layer_n - 1, None if head_n is None else head_n - 1


def _best_from_file(path: Path) -> str:
    if not path.is_file():
        raise InspectError(f"--alignment-head {path}: no such file; write it with `aiayn heads --model M --json "
                           f"> {path.name}`, or give L:H")
    try:
        heads = json.loads(path.read_text(encoding="utf-8"))["heads"]
        return heads[0]["name"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError):
        raise InspectError(f"--alignment-head {path}: not a ranking written by `aiayn heads --json`") from None


def _builtin_or_refuse(cfg) -> list[tuple[str, str]]:
    pairs = builtin_pairs(cfg.data)
    if pairs is None:
        raise InspectError("--alignment-head best ranks the heads on the built-in task's gold alignments, "
                           "and this model was not trained on it: run `aiayn heads --model M --gold FILE "
                           "--src FILE --tgt FILE --json > heads.json`, then --alignment-head heads.json")
    return pairs


def check_head(text: str, cfg) -> None:
    """--alignment-head's value checked against the model's config alone, before the model is loaded (or
    compiled): the form, the head's range, the ranking file; `best` only asks that the model has a gold."""
    if text == "best":
        _builtin_or_refuse(cfg)
        return
    n_layers, n_heads = head_counts(cfg)
    parse_head(_best_from_file(Path(text)) if text.endswith(".json") else text, n_layers, n_heads)


def choose_head(text: str, translator) -> tuple[int, int | None]:
    """--alignment-head's value -> (layer, head or None for the layer mean), checked against the model."""
    cfg = model_config(translator)
    n_layers, n_heads = head_counts(cfg)
    if text == "best":
        pairs = _builtin_or_refuse(cfg)
        from aiayn.inspect.alignment.heads import rank_heads

        text = rank_heads(translator, pairs, builtin_golds(pairs))[0][0].name
    elif text.endswith(".json"):
        text = _best_from_file(Path(text))
    return parse_head(text, n_layers, n_heads)


def maps_alignment(maps: AttentionMaps, layer: int | None, head: int | None) -> str:
    """Pharaoh "i-j" pairs between the words of captured maps (subwords merged), from one head or a layer's
    mean (head None; layer None: the last layer's mean, --alignment's default): what `translate --alignment`
    prints, and the links the explorer outlines on its cross-attention heatmap."""
    return hard_alignment(merge_subwords(maps), layer, None if head is None else [head])


def head_alignment(result, translator, layer: int | None, head: int | None, measure: str = "weights") -> str:
    """Pharaoh "i-j" pairs of a Translation made with return_attention, from one head (or a layer mean) of
    its cross-attention weights, or (measure "contributions") of its value-norm maps, rows normalised
    (aiayn.inspect.contributions.maps)."""
    if result.attention is None:
        return ""
    maps = maps_of(result, translator)
    if measure == "contributions":
        from aiayn.inspect.contributions.maps import contribution_maps

        maps = contribution_maps(translator, maps)
    return maps_alignment(maps, layer, head)
