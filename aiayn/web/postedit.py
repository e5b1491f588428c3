"""Post-editing on the page (POST /api/alternatives): at one position of a translation, the model's top-k next
tokens given the source and the target before that position, p(y_t | y_<t, x) from one teacher-forced forward
pass (the softmax of the logits the search reads), each with the text prefix that picking it makes: the
pieces before the position and the picked one, decoded to text. A pick is re-decoded with that text as the
target prefix (POST /api/translate "target_prefix", as `aiayn translate --target-prefix`), so it is offered
only where the text encodes back to the same pieces ("exact"); </s> and the other special tokens are shown,
never offered (a text cannot end a translation)."""

import json

import torch

from aiayn.errors import AiaynError
from aiayn.web.limits import AlternativesRequest


def _check_ids(ids: list[int], size: int, what: str) -> None:
    bad = [i for i in ids if not 0 <= i < size]
    if bad:
        raise AiaynError(f"{what}: id {bad[0]} is outside this model's vocabulary (0..{size - 1}); send the ids "
                         f"of the translation's answer")


@torch.no_grad()
def next_token_probs(model, src_ids: list[int], target_input_ids: list[int]) -> torch.Tensor:
    """p(. | target_input_ids, source): the softmax of the last target position's logits, float32 (V,)."""
    device = next(model.parameters()).device
    logits = model(torch.tensor([src_ids], device=device), torch.tensor([target_input_ids], device=device))
    return torch.softmax(logits[0, -1].float(), dim=-1)


def alternatives(translator, src_ids: list[int], target_input_ids: list[int], k: int) -> dict:
    """{"position": t, "alternatives": [{"id", "piece", "prob", "prefix", "exact", "pickable"}, ...]}, best first;
    target_input_ids: <s> and the target's ids before position t."""
    tok = translator.tokenizer
    _check_ids(src_ids, tok.src_vocab_size, "source_ids")
    _check_ids(target_input_ids, tok.tgt_vocab_size, "target_input_ids")
    if target_input_ids[0] != tok.bos_id:
        raise AiaynError(f"target_input_ids must start with <s> (id {tok.bos_id}), as the answer's do")
    probs = next_token_probs(translator.model, src_ids, target_input_ids)
    top = torch.topk(probs, min(k, probs.numel()))
    special = {tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id}
    before = list(target_input_ids[1:])
    found = []
    for p, i in zip(top.values.tolist(), top.indices.tolist()):
        pieces = before + [i]
        prefix = tok.decode(pieces)
        exact = i not in special and tok.encode_target([prefix])[0] == pieces
        found.append({"id": i, "piece": tok.id_to_piece([i])[0], "prob": p, "prefix": prefix, "exact": exact,
                      "pickable": exact})
    return {"position": len(target_input_ids) - 1, "alternatives": found}


def alternatives_json(translator, req: AlternativesRequest) -> bytes:
    return json.dumps(alternatives(translator, req.source_ids, req.target_input_ids, req.k),
                      ensure_ascii=False).encode()
