"""Attention masks. ONE convention everywhere in aiayn:

    mask is a bool tensor, True = "this query may attend to this key".

Masks broadcast against attention scores shaped (B, H, T, S): a padding mask is (B, 1, 1, S),
a causal mask is (1, 1, T, T). torch's own SDPA uses the same polarity for bool masks;
torch.nn.MultiheadAttention uses the opposite one (True = masked) and is converted only in tests.
A query row whose keys are all masked yields attention weights of zero (never NaN).
"""

import torch


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """(B, S) token ids -> (B, 1, 1, S) bool, True where the key is a real token."""
    if tokens.dim() != 2:
        raise ValueError(f"padding_mask expects token ids shaped (B, S), got shape {tuple(tokens.shape)}")
    return (tokens != pad_id)[:, None, None, :]


def causal_mask(size: int, device: torch.device | None = None) -> torch.Tensor:
    """(1, 1, T, T) bool, True on and below the diagonal: position t sees positions <= t (§3.2.3)."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()[None, None]


def check_mask(mask: torch.Tensor, batch: int, n_queries: int, n_keys: int) -> None:
    """Raise a clear error if `mask` cannot broadcast to (B, H, T, S) scores. Not while torch traces the
    model (aiayn/decoding/compiled.py): its tests of sizes against 1 would fix the traced sizes."""
    if torch.compiler.is_compiling():
        return
    if mask.dtype != torch.bool:
        raise TypeError(f"attention mask must be bool (True = may attend), got {mask.dtype}")
    if mask.dim() > 4:
        raise ValueError(f"attention mask has {mask.dim()} dims; expected at most 4 (B, H, T, S)")
    shape = (1,) * (4 - mask.dim()) + tuple(mask.shape)
    want = (batch, None, n_queries, n_keys)
    for axis, (got, need) in enumerate(zip(shape, want)):
        if need is not None and got not in (1, need):
            raise ValueError(
                f"attention mask shape {tuple(mask.shape)} does not broadcast to scores "
                f"(B={batch}, H, T={n_queries}, S={n_keys}): axis {axis} is {got}, expected 1 or {need}"
            )
