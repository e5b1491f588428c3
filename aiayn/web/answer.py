"""The page's translation answer (POST /api/translate with maps): the model's own translation, or the maps
of a given target (teacher forcing, as `aiayn attention --target`); the word groups of every token list
(aiayn.inspect.maps.capture.word_groups: the page merges words with them, it has no rule of its own); the
probability of every output token; the word alignment of the maps (aiayn.web.alignment, what `aiayn
translate --alignment` prints); and warnings, each a code and its numbers, which the page words in its own
language."""

import torch

from aiayn.decoding.batches import encode_sources
from aiayn.errors import AiaynError
from aiayn.inspect.maps.capture import capture, maps_of, word_groups
from aiayn.inspect.quality.warnings import input_warnings
from aiayn.web.alignment import DEFAULT_HEAD, AlignmentHead, alignment_json


class CodedError(AiaynError):
    """A user error the page words itself: `code` names it, `params` holds its numbers."""

    def __init__(self, message: str, code: str, **params):
        super().__init__(message)
        self.code, self.params = code, params


def _search_or_force(translator, text, options, target, target_prefix):
    """-> (AttentionMaps, source ids, score, stopped at the length limit, source cut)."""
    tok = translator.tokenizer
    if target.strip():  # teacher forcing, as `aiayn attention --target`
        if target_prefix:
            raise AiaynError("give a target (its maps) or a target prefix (a translation that starts with it), "
                             "not both")
        return capture(translator, text, target=target), encode_sources(tok, [text])[0], None, False, False
    result = translator.translate([text], options=options, target_prefix=[target_prefix])[0]
    src_ids = [tok.source_piece_to_id(p) for p in result.src_tokens]
    return maps_of(result, translator), src_ids, result.score, result.stopped_at_limit, result.truncated


def page_result(translator, text: str, options, target: str, target_prefix: str, langs=(None, None),
                alignment: AlignmentHead = DEFAULT_HEAD) -> tuple[dict, dict]:
    """-> (the answer's fields, the maps {kind: (L, H, Q, K)}). langs: the model's (source, target);
    alignment: the head the word alignment comes from."""
    tok = translator.tokenizer
    maps, src_ids, score, stopped, cut = _search_or_force(translator, text, options, target, target_prefix)
    target_ids = [tok.piece_to_id(p) for p in maps.target_tokens]
    groups = {name: word_groups(tokens) for name, tokens in (
        ("source", maps.source_tokens), ("target", maps.target_tokens), ("target_input", maps.target_input_tokens))}
    fields = {"translation": maps.translation, "arch": translator.arch, "teacher_forced": bool(target.strip()),
              "source_tokens": maps.source_tokens, "target_tokens": maps.target_tokens,
              "target_input_tokens": maps.target_input_tokens, "source_ids": src_ids,
              "target_input_ids": [tok.bos_id] + target_ids[:-1], "score": score, "stopped_at_limit": stopped,
              "token_probs": token_probs(translator.model, tok.bos_id, src_ids, target_ids), "words": groups,
              "alignment": alignment_json(maps, alignment),
              "warnings": warnings(translator, maps.source_tokens, text, stopped, cut, langs)}
    return fields, maps.maps


@torch.no_grad()
def token_probs(model, bos_id: int, src_ids: list[int], target_ids: list[int]) -> list[float]:
    """p(y_t | y_<t, x) of every target token (</s> included), teacher-forced: the model's own numbers."""
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([[bos_id] + target_ids[:-1]], device=device)
    log_probs = torch.log_softmax(model(src, tgt_in).float(), dim=-1)[0]
    picked = log_probs[torch.arange(len(target_ids)), torch.tensor(target_ids, device=device)]
    return [round(float(p), 6) for p in picked.exp()]


def warnings(translator, source_tokens: list[str], text: str, stopped: bool, cut: bool, langs) -> list[dict]:
    return input_warnings(translator.tokenizer, source_tokens, text, stopped=stopped, cut=cut,
                          max_positions=translator.max_positions, langs=langs)
