"""The positional-encoding panel (GET /api/positions): the model's own position table (§3.5: the
sinusoids, or learned positions), its first POSITIONS rows, and the dot products of those positions with
each other, which for the sinusoids depend on the offset between them. None for an RNN model."""

import torch

POSITIONS = 50  # rows of the table sent (the page's heatmap); at d_model 512 about 25,000 numbers
DECIMALS = 6


def _table(positional) -> torch.Tensor:
    return positional.table if hasattr(positional, "table") else positional.weight


@torch.no_grad()
def positions_panel(model) -> dict | None:
    positional = getattr(model, "positional", None)
    if positional is None:
        return None
    table = _table(positional)[:POSITIONS].double().cpu()  # (P, D)
    return {"kind": "sinusoidal" if hasattr(positional, "table") else "learned",
            "d_model": table.size(1), "max_len": _table(positional).size(0),
            "table": table.round(decimals=DECIMALS).tolist(),
            "dots": (table @ table.T).round(decimals=4).tolist()}
