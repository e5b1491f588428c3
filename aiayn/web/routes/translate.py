"""The translations and scores (the JSON API):
- POST /api/translate {"text", "beam": 4, "attention": true}: with attention (the default, the page's
  request) every attention map, the subwords and their ids, and the word alignment `aiayn translate
  --alignment` prints for those maps, from the head of `aiayn serve --alignment-head` (aiayn.web.answer);
  "measure": "contributions" (Transformer models) gives the value-norm maps instead of the weights, rows
  normalised (the alignment read from them), and the answer carries "measure";
  with "attention": false the plain answer {"translation", "score", "source_tokens", "target_tokens"} (target
  subwords without </s>);
- POST /api/translate_batch {"texts": [up to MAX_BATCH_TEXTS], "beam": 4} -> {"translations":
  [{"translation", "score"}, ...]} in input order; a blank text translates to "" (score 0);
- both translate requests take the decoding controls of DecodingControls (n_best in plain mode, min_length,
  no_repeat_ngram_size, a target prefix, or sampling instead of beam search); in plain mode also
  "constraints" (/api/translate: phrases the translation must contain; /api/translate_batch: one list per
  text), and /api/translate takes "trace": true for the beam search step by step (Translator.trace; plain
  mode, native engine; one job through the admission gate, like maps), and "without_heads": [{"kind",
  "layer", "head"}, ...] (counted from 0) for the translation with those heads taken out beside the one with
  every head (aiayn.web.ablated; plain mode, native engine, one job through the admission gate);
- POST /api/score {"sources": [...], "targets": [...], "alpha", "length_penalty_form"} -> {"scores": [{"score",
  "log_prob", "tokens", "token_log_probs"}, ...]}: given translations scored by teacher forcing (Translator.score),
  as many pairs as /api/translate_batch has texts, within the source and output bounds; a job on the model's
  thread, through the admission gate like maps and steps.
Plain translations are batched (aiayn.web.plain); requests with maps stay single jobs (one map set is
megabytes of JSON; the page sends one at a time). With an engine without maps (ct2), maps answer 400 naming
--engine native."""

from functools import partial

from fastapi import APIRouter, Request

from aiayn.web import ablated
from aiayn.web.answer import translate_json
from aiayn.web.limits import MAX_SOURCE_TOKENS, ScoreRequest, TranslateBatchRequest, TranslateRequest
from aiayn.web.plain import diagnosed_json, trace_json, translate_plain
from aiayn.web.respond import NATIVE_ONLY, answer, error
from aiayn.web.scoring import score_json
from aiayn.web.served import Served
from aiayn.web.shapes import (
    BatchAnswer,
    PageAnswer,
    PlainAnswer,
    ScoreAnswer,
    TraceAnswer,
    WithoutHeadsAnswer,
    responses,
)

REFUSALS = (400, 422, 503, 500)


def router(served: Served) -> APIRouter:
    routes = APIRouter()
    translator, limits, engine, admission = served.translator, served.limits, served.capabilities, served.admission
    time_limit_s = limits.time_limit_s

    @routes.post("/api/translate", responses=responses(PageAnswer | PlainAnswer | TraceAnswer | WithoutHeadsAnswer,
                                                       *REFUSALS))
    async def translate(req: TranslateRequest, request: Request):
        if req.n_best != 1 and req.attention:
            return error(400, "n_best is for plain translations: send \"attention\": false")
        if req.without_heads is not None:
            refused = ablated.refusal(req, engine.attention_maps)
            return error(400, refused) if refused else await answer(request, time_limit_s, admission.run(
                partial(ablated.without_heads_json, translator, limits, req)))
        if req.diagnostics and not req.attention:
            return await answer(request, time_limit_s, admission.run(partial(diagnosed_json, translator, limits, req)))
        if req.trace:
            if req.attention or not engine.traces:
                return error(400, "trace shows the native engine's beam search in plain mode: send \"attention\": "
                                  "false" if req.attention else NATIVE_ONLY)
            return await answer(request, time_limit_s, admission.run(partial(trace_json, translator, limits, req)))
        if req.measure != "weights" and not req.attention:
            return error(400, "measure is what the maps show: send \"attention\": true, or leave measure out")
        if req.constraints and req.attention:
            return error(400, "constraints are for plain translations: send \"attention\": false")
        if not req.attention or req.sampling is not None:  # sampling with attention: refused in there
            return await answer(request, time_limit_s, translate_plain(
                served.batcher, translator, limits, req, [req.text], [req.target_prefix], batch=False,
                constraints=[req.constraints]))
        if not engine.attention_maps:
            return error(400, NATIVE_ONLY)
        return await answer(request, time_limit_s, admission.run(partial(translate_json, translator, limits, req,
                                                                          served.langs, served.aligned_by)))

    @routes.post("/api/translate_batch", responses=responses(BatchAnswer, *REFUSALS))
    async def translate_batch(req: TranslateBatchRequest, request: Request):
        prefixes = req.target_prefixes if req.target_prefixes is not None else [""] * len(req.texts)
        return await answer(request, time_limit_s, translate_plain(
            served.batcher, translator, limits, req, req.texts, prefixes, batch=True, constraints=req.constraints))

    @routes.post("/api/score", responses=responses(ScoreAnswer, *REFUSALS))
    async def score(req: ScoreRequest, request: Request):
        work = partial(score_json, translator, req.sources, req.targets, alpha=req.alpha,
                       length_penalty_form=req.length_penalty_form, max_source_tokens=MAX_SOURCE_TOKENS,
                       max_output_tokens=limits.max_output_tokens, batch_size=limits.max_batch)
        return await answer(request, time_limit_s, admission.run(work))

    return routes
