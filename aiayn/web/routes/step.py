"""POST /api/step: one attention row step by step (the page's step view): one head's q, K, V, the scores,
the softmax and the weighted sum, and the rest of its layer (aiayn.inspect.steps.qkv, layer_step); for the RNN its
own step (aiayn.inspect.steps.rnn_step). A job on the model's thread, through the admission gate; served beside
the page, so with an engine that gives attention maps (the native engine)."""

from functools import partial

from fastapi import APIRouter, Request

from aiayn.errors import AiaynError
from aiayn.inspect.steps.layer_step import layer_step
from aiayn.inspect.steps.qkv import attention_step
from aiayn.inspect.steps.rnn_step import rnn_step
from aiayn.web.limits import StepRequest
from aiayn.web.respond import NATIVE_ONLY, answer, dumps, error
from aiayn.web.served import Served
from aiayn.web.shapes import AttentionStep, RnnStep, responses


def router(served: Served) -> APIRouter:
    routes = APIRouter()

    @routes.post("/api/step", responses=responses(AttentionStep | RnnStep, 400, 422, 503, 500))
    async def step(req: StepRequest, request: Request):
        if not served.capabilities.attention_maps:
            return error(400, NATIVE_ONLY)
        return await answer(request, served.limits.time_limit_s,
                            served.admission.run(partial(step_json, served.translator, req)))

    return routes


def step_json(translator, req: StepRequest) -> bytes:
    tok = translator.tokenizer
    for what, ids, vocab in (("source_ids", req.source_ids, tok.src_vocab_size),
                             ("target_input_ids", req.target_input_ids, tok.tgt_vocab_size)):
        if any(not 0 <= i < vocab for i in ids):
            raise AiaynError(f"{what}: token ids must be in [0, {vocab})")
    if not translator.model.multi_head:  # the RNN step: score -> alpha -> context -> tanh(W_c[a; s]) -> outputs
        return dumps(rnn_step(translator.model, tok, req.source_ids, req.target_input_ids, req.query,
                              req.kind, req.layer, req.head)).encode()
    step = attention_step(translator.model, req.source_ids, req.target_input_ids, req.kind, req.layer, req.head,
                          req.query)
    rest = layer_step(translator.model, tok, req.source_ids, req.target_input_ids, req.kind, req.layer, req.query,
                      temperature=req.temperature)
    return dumps({**step, "layer_step": rest}).encode()
