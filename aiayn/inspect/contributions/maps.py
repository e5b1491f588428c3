"""Captured attention maps with the weights replaced by what each key contributes: the value-norm maps
||alpha^h_ij f_h(x_j)|| (Kobayashi et al. 2020; aiayn.inspect.contributions.decompose) of every kind, layer
and head, teacher-forced on the maps' own tokens (the searched output, or --target). Each row is normalised
to sum to 1, so the maps keep the weights' scale and every reader of attention maps (the PNG and HTML grids,
the files, the hard alignment) reads them unchanged."""

from dataclasses import replace

import numpy as np
import torch

from aiayn.inspect.contributions.measure import measure_contributions
from aiayn.inspect.maps.attention_maps import AttentionMaps
from aiayn.inspect.maps.checks import InspectError

MEASURES = ("weights", "contributions")


def normalised_rows(norms: torch.Tensor) -> np.ndarray:
    """(..., Q, K) value norms -> float32 rows summing to 1 (a row of zeros, a fully masked query, stays 0)."""
    total = norms.sum(dim=-1, keepdim=True)
    return (norms / total.clamp(min=torch.finfo(norms.dtype).tiny)).float().cpu().numpy()


def contribution_maps(translator, maps: AttentionMaps) -> AttentionMaps:
    """Subword maps (not merged) of one sentence -> the same maps, measure "contributions": each kind's
    (L, H, Q, K) value-norm maps with rows normalised to sum to 1."""
    if maps.merged:
        raise InspectError("contributions are measured on subword maps: merge the words after")
    tok, model = translator.tokenizer, translator.model
    device = next(model.parameters()).device
    src = torch.tensor([[tok.source_piece_to_id(p) for p in maps.source_tokens]], device=device)  # (1, S)
    # the decoder inputs: <s> (whatever its piece) then the output's tokens but the last, (1, T)
    tgt_in = torch.tensor([[tok.bos_id] + [tok.piece_to_id(p) for p in maps.target_input_tokens[1:]]],
                          device=device)
    found = measure_contributions(model, src, tgt_in).value_norms  # kind -> (1, L, H, Q, K)
    return replace(maps, maps={kind: normalised_rows(found[kind][0]) for kind in maps.maps},
                   measure="contributions")
