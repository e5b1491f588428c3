"""POST /api/alternatives {"source_ids", "target_input_ids", "k"}: post-editing, the top-k next tokens at one
position and the text prefix each makes (aiayn.web.postedit). A job on the model's thread; one of the page's
tools, served beside it, so with an engine that gives attention maps (the native engine)."""

from functools import partial

from fastapi import APIRouter, Request

from aiayn.web.limits import AlternativesRequest
from aiayn.web.postedit import alternatives_json
from aiayn.web.respond import NATIVE_ONLY, answer, error
from aiayn.web.served import Served
from aiayn.web.shapes import AlternativesAnswer, responses


def router(served: Served) -> APIRouter:
    routes = APIRouter()

    # post-editing: the top-k next tokens at one position (aiayn.web.postedit)
    @routes.post("/api/alternatives", responses=responses(AlternativesAnswer, 400, 422, 503, 500))
    async def next_tokens(req: AlternativesRequest, request: Request):
        if not served.capabilities.attention_maps:
            return error(400, NATIVE_ONLY)
        return await answer(request, served.limits.time_limit_s,
                            served.admission.run(partial(alternatives_json, served.translator, req)))

    return routes
