"""Token embeddings and positional encodings (§3.4, §3.5)."""

import math

import torch
from torch import nn


class TokenEmbedding(nn.Module):
    """Lookup table whose output is multiplied by sqrt(d_model) (§3.4)."""

    def __init__(self, *, vocab_size: int, d_model: int, pad_id: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.d_model = d_model
        self.pad_id = pad_id
        nn.init.normal_(self.weight, std=d_model**-0.5)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # (B, T) -> (B, T, D)
        return nn.functional.embedding(tokens, self.weight) * math.sqrt(self.d_model)  # §3.4


def sinusoid_table(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, D) table of §3.5:
    PE(pos, 2i) = sin(pos / 10000^(2i/d_model)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))."""
    position = torch.arange(max_len, dtype=torch.float64)[:, None]
    inv_freq = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * inv_freq)  # §3.5 even dims
    table[:, 1::2] = torch.cos(position * inv_freq)[:, : d_model // 2]  # §3.5 odd dims
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoids added to the embeddings (§3.5); no parameters."""

    kind = "sinusoidal"

    def __init__(self, *, d_model: int, max_len: int = 1024):
        super().__init__()
        self.register_buffer("table", sinusoid_table(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        # x (B, T, D); positions offset .. offset+T-1 (offset > 0 when decoding step by step)
        end = offset + x.size(1)
        if end > self.table.size(0):
            raise ValueError(f"sequence position {end} exceeds max_len={self.table.size(0)}; raise max_len")
        return x + self.table[offset:end].to(x.dtype)


class LearnedPositionalEmbedding(nn.Module):
    """Learned absolute positions, the alternative of §3.5 / Table 3 row (E)."""

    kind = "learned"

    def __init__(self, *, d_model: int, max_len: int = 1024):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, std=d_model**-0.5)

    @property
    def table(self) -> torch.Tensor:
        """The positions (max_len, D), as SinusoidalPositionalEncoding.table: what decoding reads for the
        longest input, the compiled decoder copies and the explorer draws."""
        return self.weight

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        end = offset + x.size(1)
        if end > self.weight.size(0):
            raise ValueError(f"sequence position {end} exceeds max_len={self.weight.size(0)}; raise max_len")
        return x + self.weight[offset:end].to(x.dtype)
