"""What the rendered maps say about themselves (PNG and HTML, as the web page does): tokens without
SentencePiece's "▁", decoder rows named by the decoder input they come from and the token they predict,
panel titles in words, axis titles, and which cells the model masked."""

import numpy as np

from aiayn.heatmap import show_piece

KIND_NAMES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention (masked)",
              "cross": "encoder-decoder (cross) attention"}
# (query axis, key axis)
AXIS_TITLES = {"encoder_self": ("query: source token", "key: source token"),
               "decoder_self": ("query: decoder input → the token it predicts", "key: decoder input"),
               "cross": ("query: decoder input → the token it predicts", "key: source token")}
CONTRIBUTIONS_NOTE = " · contributions: value-norm maps ||α_ij f(x_j)||, each row normalised to sum to 1"
MASKED_NOTE = "hatched: masked (−∞ before the softmax, weight 0)"
WORD_RULE = ("words: a word starts at a piece beginning with ▁; its pieces' columns are summed and its "
             "rows averaged")


def axis_labels(maps, kind: str) -> tuple[list[str], list[str]]:
    """(row labels, column labels) of one kind. Decoder rows: "input → predicted" for subword pieces; for
    merged words (rows grouped by the predicted words) "→ word"."""
    show = (lambda w: w) if maps.merged else show_piece
    if kind == "encoder_self":
        labels = [show(p) for p in maps.source_tokens]
        return labels, labels
    keys = maps.target_input_tokens if kind == "decoder_self" else maps.source_tokens
    if maps.merged:
        rows = [f"→ {w}" for w in maps.target_tokens]
    else:
        rows = [f"{show_piece(i)} → {show_piece(o)}" for i, o in zip(maps.target_input_tokens, maps.target_tokens)]
    return rows, [show(p) for p in keys]


def panel_title(maps, kind: str, layer: int, head: int) -> str:
    """layer, head: 0-based indices into the maps; titles count from 1, as the paper and the page do."""
    if not maps.multi_head:  # one map: the decoder's attention over the encoder states
        return "RNN decoder attention over the encoder states"
    return f"{KIND_NAMES[kind]} · layer {layer + 1} · head {head + 1}"


def sentence_title(maps) -> str:
    """The sentence and its translation; a target given to the model (teacher forcing, `--target`: the
    maps have no search score) is named as such, so the picture is not read as the model's own output."""
    source = " ".join(show_piece(p) if not maps.merged else p for p in maps.source_tokens)
    if maps.score is None:
        title = f"{maps.arch}: “{source}” → given target “{maps.translation}” (teacher-forced, not the model's output)"
    else:
        title = f"{maps.arch}: “{source}” → “{maps.translation}”"
    return title + (CONTRIBUTIONS_NOTE if maps.measure == "contributions" else "")



def masked_cells(maps, kind: str, matrix: np.ndarray) -> np.ndarray | None:
    """(Q, K) bool, True where the model masked the key (None when it masks nothing here). Decoder
    self-attention masks the keys after the query (§3.2.3). Merged words: a cell whose pieces were all
    masked sums to exactly 0."""
    if kind != "decoder_self":
        return None
    if maps.merged:
        return matrix == 0.0
    return np.triu(np.ones(matrix.shape, dtype=bool), k=1)
