"""The positional-encoding panel (GET /api/positions): the model's own position table (§3.5: the
sinusoids, or learned positions), its first POSITIONS rows, and the dot products of those positions with
each other, which for the sinusoids depend on the offset between them. None for an RNN model."""

import torch

POSITIONS = 50  # rows of the table sent (the page's heatmap); at d_model 512 about 25,000 numbers
DECIMALS = 6


@torch.no_grad()
def positions_panel(model) -> dict | None:
    if model.positional_kind is None:
        return None
    positional = model.positional
    table = positional.table[:POSITIONS].double().cpu()  # (P, D)
    return {"kind": positional.kind, "d_model": table.size(1), "max_len": positional.table.size(0),
            "table": table.round(decimals=DECIMALS).tolist(),
            "dots": (table @ table.T).round(decimals=4).tolist()}
