"""One decoder step of an RNN seq2seq model with attention, as the posts on RNN attention teach it:

    e^t = [score(s_t, h_1), ..., score(s_t, h_N)]   the score function the model was built with
    alpha^t = softmax(e^t)                          the attention distribution
    a_t = sum_i alpha_i^t h_i                       the attention value (context vector)
    s~_t = tanh(W_c [a_t; s_t] + b_c)               Luong; Bahdanau: tanh(W_o [s_t; a_t; y_{t-1}])
    y^_t = softmax(W_y s~_t + b_y)                  the top output tokens

Teacher-forced on the given decoder inputs: steps 0..query-1 run as the model runs them, then step
`query` is computed piece by piece with the model's own modules (the same numbers as its forward pass).
Luong attends with the new state s_t = h_t; Bahdanau attends from the previous state s_{t-1}."""

import torch

from aiayn.inspect.maps.checks import InspectError
from aiayn.inspect.steps.qkv import WEIGHT_DECIMALS, _round
from aiayn.model.scores import attention_distribution, context_vector

TOP = 5  # output tokens listed


def _score_doc(score) -> tuple[str, str]:
    """(name, formula) from the score class's first docstring line, "dot (Luong 2015): score(s, h_i) = ..."."""
    line = (type(score).__doc__ or type(score).__name__).strip().splitlines()[0]
    name, _, formula = line.partition(":")
    return name.strip(), formula.split(";")[0].strip()  # the formula, not the implementation note


@torch.no_grad()
def rnn_step(model, tokenizer, src_ids: list[int], tgt_in_ids: list[int], query: int, kind: str = "cross",
             layer: int = 0, head: int = 0) -> dict:
    if model.multi_head:
        raise InspectError("this step view is for RNN models with attention")
    if (kind, layer, head) != ("cross", 0, 0):
        raise InspectError(f"an RNN model has one attention map: kind cross, layer 0, head 0 (not {kind}, "
                           f"layer {layer}, head {head})")
    if not 0 <= query < len(tgt_in_ids):
        raise InspectError(f"query={query} out of range [0, {len(tgt_in_ids)})")
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([tgt_in_ids], device=device)
    state = model.init_state(model.encode(src)[0], src)
    dec = model.decoder
    for t in range(query):
        dec.step(tgt_in[:, t], state)
    emb = dec.embedding(tgt_in[:, query])
    luong = dec.attention_kind == "luong"
    if luong:  # input feeding, then attend with the new state h_t (the posts' s_t)
        s = dec._run_rnn(torch.cat([emb, state.input_feed], dim=-1), state)
    else:  # Bahdanau attends from s_{t-1}
        s = state.hidden[-1]
    e = dec.score.score(s, state.prepared_keys)  # e^t (1, S)
    alpha = attention_distribution(e, state.src_mask)  # alpha^t
    a = context_vector(alpha, state.memory)  # a_t
    if luong:
        out = torch.tanh(dec.W_c(torch.cat([a, s], dim=-1)))  # s~_t = tanh(W_c[a_t; s_t] + b_c)
        formula = "s̃_t = tanh(W_c [a_t; s_t] + b_c)"
    else:
        s_new = dec._run_rnn(torch.cat([emb, a], dim=-1), state)
        out = torch.tanh(dec.W_o(torch.cat([s_new, a, emb], dim=-1)))
        formula = "t_t = tanh(W_o [s_t; a_t; y_(t-1)] + b_o)"
    probs = torch.softmax(dec.generator(out).float(), dim=-1)[0]
    top = probs.topk(min(TOP, probs.numel()))
    name, score_formula = _score_doc(dec.score)
    mask = state.src_mask[0]
    return {"arch": "rnn", "query": query, "decoder": "luong" if luong else "bahdanau",
            "rnn_cell": type(dec.rnn).__name__, "score_name": name, "score_formula": score_formula,
            "query_name": "s_t" if luong else "s_(t-1)", "output_formula": formula,
            "d_model": s.size(-1), "query_vector": _round(s[0].float()),
            "keys": _round(state.memory[0].float()), "mask": mask.tolist(),
            "scores": [v if m else None for v, m in zip(_round(e[0].float()), mask.tolist())],
            "weights": _round(alpha[0].float(), WEIGHT_DECIMALS), "context": _round(a[0].float()),
            "output_vector": _round(out[0].float()),
            "top": [{"token": p, "prob": round(float(w), 4)}
                    for p, w in zip(tokenizer.id_to_piece(top.indices.tolist()), top.values)]}
