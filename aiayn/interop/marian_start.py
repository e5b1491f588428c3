"""The decoder's first input, as Marian, CTranslate2 and aiayn see it, in an export of a joint vocabulary.

Marian models start the decoder from <pad>, the last vocabulary entry, whose embedding is zero;
CTranslate2's converter (ct2-transformers-converter) relies on both: it drops the last entry, which must be
named <pad>, with its weight rows, and starts the decoder from a zero vector. aiayn's joint-vocabulary
Transformer starts from the embedding of <s>, and its <pad> (id 0) has a trained row like any token. So the
export of such a model (`aiayn export-hf`) is written in a form that both read as aiayn's network, exactly:
- a token named <pad> is appended (id V): transformers' pad and decoder start token, with zero embedding
  rows and a logit bias of -1e9, so its probability is exactly 0 and the other V log-probabilities are
  aiayn's; CTranslate2 drops it, and its ids are then aiayn's;
- the decoder's position-0 row carries aiayn's first input: PE(0) + sqrt(d_model) * E[<s>], so that
  sqrt(d_model) * 0 + row 0 (transformers) and row 0 alone (CTranslate2) are aiayn's sum, bit for bit;
- aiayn's own padding piece keeps its id and rows and is named <aiayn-pad> in vocab.json (a name that
  SentencePiece never writes), and is never an output (bad_words_ids), as in aiayn.
config.json names aiayn's start and padding ids (aiayn_start_token_id, aiayn_pad_token_id), so that
`aiayn import-hf` reads the directory back to the model it came from.
"""

import math

import torch

START_FIELD, PAD_FIELD = "aiayn_start_token_id", "aiayn_pad_token_id"  # config.json keys
PAD_PIECE = "<pad>"  # the name CTranslate2 drops from the end of the vocabulary
RENAMED_PAD = "<aiayn-pad>"
NO_LOGIT = -1e9  # the appended token's logit bias: exp(-1e9 - max) is 0 in float32


def vocab_with_start(table: dict[str, int], pad_piece: str) -> dict[str, int]:
    """vocab.json of the export: aiayn's pieces and ids, <pad> (aiayn's) renamed, <pad> appended. (V+1 entries)"""
    renamed = {RENAMED_PAD if piece == pad_piece else piece: i for piece, i in table.items()}
    assert RENAMED_PAD in renamed and PAD_PIECE not in renamed, "the joint vocabulary has one <pad> piece"
    return {**renamed, PAD_PIECE: len(table)}


def vocab_without_start(table: dict[str, int], pad_piece: str) -> dict[str, int]:
    """The inverse of vocab_with_start: aiayn's piece table (V entries)."""
    return {pad_piece if piece == RENAMED_PAD else piece: i for piece, i in table.items() if piece != PAD_PIECE}


def append_start_rows(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """MarianMTModel's weights (V rows) -> with the appended token's rows: zero embeddings and output row,
    logit bias NO_LOGIT. Tied names keep one tensor between them, as transformers ties them."""
    grown: dict[int, torch.Tensor] = {}  # id of a V-row tensor -> its V+1-row form
    out = {}
    for name, w in weights.items():
        if name == "final_logits_bias":  # (1, V)
            out[name] = torch.cat([w, torch.full((1, 1), NO_LOGIT)], dim=1)
        elif name.endswith("embed_tokens.weight") or name in ("lm_head.weight", "model.shared.weight"):
            out[name] = grown.setdefault(id(w), torch.cat([w, w.new_zeros(1, w.size(1))]))  # (V+1, D)
        else:
            out[name] = w
    return out


def fold_start(positions: torch.Tensor, start_embedding: torch.Tensor) -> torch.Tensor:
    """The decoder's position table (max_len, D) with row 0 = E[start] * sqrt(D) + PE(0), the order of
    aiayn's sum (aiayn.model.embedding: token embedding times sqrt(d_model), then the position added)."""
    table = positions.clone()
    table[0] = start_embedding * math.sqrt(table.size(1)) + positions[0]
    return table


def unfold_start(positions: torch.Tensor, start_embedding: torch.Tensor, sinusoid_row0: torch.Tensor,
                 tolerance: float) -> torch.Tensor | None:
    """The decoder's position table with row 0 back to the sinusoid, or None when row 0 is not
    E[start] * sqrt(D) + PE(0) within `tolerance` per unit of size."""
    expected = start_embedding * math.sqrt(positions.size(1)) + sinusoid_row0
    if ((positions[0] - expected).abs() > tolerance * (1 + expected.abs())).any():
        return None
    table = positions.clone()
    table[0] = sinusoid_row0
    return table
