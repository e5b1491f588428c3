"""The word alignment the page outlines on its cross-attention heatmap: the links `aiayn translate --alignment`
prints for the same maps, made by the same function (aiayn.inspect.alignment.head_choice.maps_alignment) from the
head the server was started with (`aiayn serve --alignment-head`, the forms of translate's --alignment-head;
default: the last decoder layer's mean over its heads)."""

from dataclasses import dataclass

from aiayn.inspect.alignment.head_choice import choose_head, maps_alignment
from aiayn.inspect.maps.attention_maps import AttentionMaps


@dataclass(frozen=True)
class AlignmentHead:
    """Where the links come from, 0-based. layer None: the last decoder layer (the default); head None: the
    layer's mean over its heads. chosen: how, for the page's legend: "default", "given" (L:H or L:mean),
    "best" (the lowest AER on the built-in task's gold) or "ranking" (the best head of `aiayn heads --json`)."""

    layer: int | None = None
    head: int | None = None
    chosen: str = "default"


DEFAULT_HEAD = AlignmentHead()  # the last layer's mean, as `aiayn translate --alignment`


def alignment_head(translator, text: str | None) -> AlignmentHead:
    """--alignment-head's value (None: the default) -> the head, checked against the model once."""
    if not text:
        return DEFAULT_HEAD
    layer, head = choose_head(text, translator)
    return AlignmentHead(layer, head, "best" if text == "best" else "ranking" if text.endswith(".json") else "given")


def alignment_json(maps: AttentionMaps, choice: AlignmentHead) -> dict:
    """{"links": Pharaoh "i-j" (source word i, output word j, 0-based, </s> left out), "layer", "head" (0-based;
    head null: the layer's mean), "chosen"}. Words are those of aiayn.inspect.maps.capture.word_groups, the page's."""
    layer = maps.maps["cross"].shape[0] - 1 if choice.layer is None else choice.layer
    return {"links": maps_alignment(maps, choice.layer, choice.head), "layer": layer, "head": choice.head,
            "chosen": choice.chosen}
