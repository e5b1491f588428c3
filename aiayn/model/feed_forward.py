"""Position-wise feed-forward network (§3.3): FFN(x) = max(0, x W1 + b1) W2 + b2.

The activation is ReLU in the paper; GELU and SiLU (x * sigmoid(x), "swish", the OPUS-MT/Marian default)
are departures chosen by the model config."""

import torch
from torch import nn

ACTIVATIONS = {"relu": nn.functional.relu, "gelu": nn.functional.gelu, "silu": nn.functional.silu}


class PositionwiseFeedForward(nn.Module):
    def __init__(self, *, d_model: int, d_ff: int, activation: str = "relu", activation_dropout: float = 0.0):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        # The paper applies dropout only to sublayer outputs; inner dropout is an explicit departure.
        self.activation_dropout = activation_dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # (B, T, D) -> (B, T, d_ff) -> (B, T, D)
        hidden = self.activation(self.w_1(x))  # §3.3 max(0, xW1 + b1)
        if self.training and self.activation_dropout > 0:
            hidden = nn.functional.dropout(hidden, self.activation_dropout, True)
        return self.w_2(hidden)  # §3.3 (...)W2 + b2
