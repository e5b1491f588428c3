"""Capture the attention maps of one sentence, teacher-forced on a given target or along the model's own
beam-search output (captured while decoding with the KV cache).

Schema (AttentionMaps; the same fields go to NPZ and JSON):
  source_tokens        S source subwords (ending in </s>)
  target_tokens        T output subwords, one per decoder step (ending in </s> when the output ended)
  target_input_tokens  T decoder inputs (<s> y_1 .. y_{T-1}; <pad> for <s> in Marian models): the keys of
                       decoder self-attention
  maps[kind]           float32 (L, H, queries, keys); kinds: encoder_self (L, H, S, S),
                       decoder_self (L, H, T, T), cross (L, H, T, S). RNN models: cross only, L = H = 1.
  Every row is a distribution over the keys (sums to 1).
Files (.json, .npz; aiayn.inspect.maps.files, schema_version 2) hold the kinds, layers and heads chosen with
--kind / --layer / --head (default: cross attention, every layer and head), still shaped (L', H', Q, K);
`selection[kind]` = {"layers": [...], "heads": [...]} gives the model's index of each row kept.
Subword-to-word merging (merge_words=True): for the KEYS (the attended pieces) the weights of a word's
pieces are summed, so rows still sum to 1; for the QUERIES (the attending pieces) a word's row is the
mean of its pieces' rows. A word starts at a piece beginning with "▁" (SentencePiece).
"""

import numpy as np
import torch

from aiayn.decoding.batches import encode_sources
from aiayn.inspect.maps.attention_maps import AttentionMaps
from aiayn.inspect.maps.checks import InspectError, check_index


def capture(translator, sentence: str, target: str | None = None, beam: int | None = None,
            merge_words: bool = False) -> AttentionMaps:
    if not sentence.strip():
        raise InspectError("the sentence is empty; give some text to translate")
    if target is not None and not target.strip():
        raise InspectError("--target is empty; give the target sentence, or leave --target out to see the "
                           "model's own translation")
    maps = _teacher_forced(translator, sentence, target) if target is not None else \
        _from_search(translator, sentence, beam)
    return merge_subwords(maps) if merge_words else maps


def start_and_end(tokenizer) -> tuple[str, str]:
    """The pieces of the decoder's start token (<s>; <pad> for Marian models) and of </s>."""
    return tuple(tokenizer.id_to_piece([tokenizer.bos_id, tokenizer.eos_id]))


def _from_search(translator, sentence, beam) -> AttentionMaps:
    return maps_of(translator.translate([sentence], beam=beam, return_attention=True)[0], translator)


def word_alignment(result, translator) -> str:
    """Pharaoh "i-j" pairs between the source's and the output's words (subwords merged: hard_alignment on
    merge_subwords' maps), from a Translation made with return_attention; "" for a blank line."""
    if result.attention is None:
        return ""
    return hard_alignment(merge_subwords(maps_of(result, translator)))


def maps_of(result, translator) -> AttentionMaps:
    """The maps of a Translation made with return_attention (its best hypothesis, as searched)."""
    steps = result.attention["cross"].shape[-2]
    start, end = start_and_end(translator.tokenizer)
    target = result.tokens + [end] if steps == len(result.tokens) + 1 else list(result.tokens)
    return AttentionMaps(result.src_tokens, target, [start] + target[:-1], result.text, translator.arch,
                         {k: v.astype(np.float32) for k, v in result.attention.items()}, score=result.score,
                         truncated=result.truncated, multi_head=translator.model.multi_head)


@torch.no_grad()
def _teacher_forced(translator, sentence, target) -> AttentionMaps:
    tok, model = translator.tokenizer, translator.model
    src_ids = encode_sources(tok, [sentence])[0]
    tgt_ids = tok.encode_target([target])[0]
    limit = translator.max_positions  # the model's positions (teacher forcing cannot cut the target)
    for what, ids in (("the sentence", src_ids), ("--target", [tok.bos_id] + tgt_ids)):
        if len(ids) > limit:
            raise InspectError(f"{what} has {len(ids)} subword tokens (with <s> or </s>), more than the model's "
                               f"{limit} positions (model.max_len); shorten it")
    src = torch.tensor([src_ids], device=translator.device)
    tgt_in = torch.tensor([[tok.bos_id] + tgt_ids], device=translator.device)
    _, maps = model(src, tgt_in, return_attention=True)
    pieces, (start, end) = tok.id_to_piece(tgt_ids), start_and_end(tok)
    return AttentionMaps(tok.source_id_to_piece(src_ids), pieces + [end], [start] + pieces, target, translator.arch,
                         {k: v[0].float().cpu().numpy() for k, v in maps.items()}, multi_head=model.multi_head)


def word_groups(tokens: list[str]) -> tuple[list[str], list[list[int]]]:
    """Pieces -> (words, piece indices of each word). Special tokens stay words of their own."""
    words, groups = [], []
    for i, piece in enumerate(tokens):
        special = piece in ("<s>", "</s>", "<pad>", "<unk>")
        if not groups or piece.startswith("▁") or special or words[-1] in ("<s>", "</s>", "<pad>"):
            words.append(piece.lstrip("▁") if not special else piece)
            groups.append([i])
        else:
            words[-1] += piece
            groups[-1].append(i)
    return words, groups


def _merge(matrix: np.ndarray, query_groups, key_groups) -> np.ndarray:
    # (L, H, Q, K): keys summed per word, queries averaged per word
    keys = np.stack([matrix[..., g].sum(-1) for g in key_groups], axis=-1)
    return np.stack([keys[..., g, :].mean(-2) for g in query_groups], axis=-2)


def merge_subwords(maps: AttentionMaps) -> AttentionMaps:
    src_words, src_groups = word_groups(maps.source_tokens)
    tgt_words, tgt_groups = word_groups(maps.target_tokens)
    in_words, in_groups = word_groups(maps.target_input_tokens)
    plan = {"encoder_self": (src_groups, src_groups), "decoder_self": (tgt_groups, in_groups),
            "cross": (tgt_groups, src_groups)}
    merged = {k: _merge(v, *plan[k]).astype(np.float32) for k, v in maps.maps.items()}
    return AttentionMaps(src_words, tgt_words, in_words, maps.translation, maps.arch, merged, True, maps.score,
                         maps.truncated, maps.multi_head, maps.measure)


def hard_alignment(maps: AttentionMaps, layer: int | None = None, heads: list[int] | None = None) -> str:
    """Pharaoh "i-j" pairs (source i, target j, 0-based): each target token (not </s>) aligned to the
    source token (not </s>) with the largest cross-attention, averaged over the chosen heads of the chosen
    layer (default: the last layer, all heads)."""
    cross = maps.maps["cross"]
    layer = cross.shape[0] - 1 if layer is None else layer
    check_index(layer, cross.shape[0], "layer")
    for head in heads or ():
        check_index(head, cross.shape[1], "head")
    weights = cross[layer][heads if heads else slice(None)].mean(0)  # (T, S)
    n_src = len(maps.source_tokens) - (maps.source_tokens[-1] == "</s>")
    n_tgt = len(maps.target_tokens) - (maps.target_tokens[-1] == "</s>")
    return " ".join(f"{int(weights[j, :n_src].argmax())}-{j}" for j in range(n_tgt))
