"""AttentionMaps: one sentence's captured attention maps (the schema: aiayn.inspect.maps.capture), which
show themselves in Jupyter. The display (aiayn.inspect.maps.notebook) reads the maps without importing this
module, so the hook is an ordinary import, not a circle."""

from dataclasses import dataclass, field

import numpy as np

from aiayn.inspect.maps.notebook import view


@dataclass
class AttentionMaps:
    source_tokens: list[str]
    target_tokens: list[str]
    target_input_tokens: list[str]
    translation: str
    arch: str
    maps: dict[str, np.ndarray] = field(default_factory=dict)
    merged: bool = False
    score: float | None = None  # beam-search score of the translation (None when teacher-forced)
    truncated: bool = False  # the sentence was longer than the model's positions; its beginning was used
    # maps of layers of heads (the Transformer), or the one map of a recurrent decoder's attention (L = H = 1)
    multi_head: bool = True
    # "weights": the attention weights alpha; "contributions": value-norm maps ||alpha_ij f(x_j)|| with each
    # row normalised to sum to 1 (aiayn.inspect.contributions.maps), drawn on the same colour scale
    measure: str = "weights"

    def _repr_html_(self) -> str:
        """Jupyter: the last layer's cross-attention (aiayn.inspect.maps.notebook.view for any kind, layer, head)."""
        return view(self)._repr_html_()
