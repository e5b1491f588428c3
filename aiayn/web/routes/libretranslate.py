"""LibreTranslate's API at the server's root (aiayn.web.libretranslate), for the clients written for it:
- POST /translate {"q": text or [texts], "source": "en" or "auto", "target": "de", "format": "text" or "html",
  "alternatives": 0, "api_key": ignored} -> {"translatedText": text or [texts]} (+ "detectedLanguage" for
  "auto", + "alternatives" when asked); JSON, form or query values, as LibreTranslate reads them;
- GET /languages -> [{"code", "name", "targets"}]: the model's source language (its target as the one
  target) and its target language;
- POST /detect {"q"} -> [{"confidence", "language"}]: the model's two languages, the likelier first.
A refusal is 400 {"error": "..."} in LibreTranslate's words; the server's own bounds answer as on /api/ (503
busy or out of time, 413 a body too large). Translations go through the batcher with the plain ones of
/api/translate. As LibreTranslate's, these answers carry CORS headers that let pages of any origin call them."""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from aiayn.web.libretranslate import (
    Job,
    Refused,
    answer_json,
    detect_text,
    detections,
    is_json,
    language_list,
    named_pair,
    request_values,
    translate_job,
)
from aiayn.web.limits import MAX_BEAM, DecodingControls
from aiayn.web.plain import plain_results
from aiayn.web.respond import answer, dumps, error
from aiayn.web.served import Served
from aiayn.web.shapes import (
    Detection,
    DetectRequest,
    Language,
    LibreTranslateAnswer,
    LibreTranslateRequest,
    responses,
)

# LibreTranslate lets pages of every origin call it (its after_request), and the pages and browser extensions
# written for it count on that; the /api/ routes stay same-origin
CORS = {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Headers": "Authorization, Content-Type",
        "Access-Control-Allow-Methods": "GET, POST", "Access-Control-Max-Age": str(20 * 24 * 3600)}


class OpenToPages(APIRoute):
    """A route whose every answer carries CORS."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def answered(request: Request) -> Response:
            response = await handler(request)
            response.headers.update(CORS)
            return response

        return answered


def _body(model) -> dict:
    """openapi_extra of a route that reads its own body: `model`'s schema under each content type it takes."""
    schema = model.model_json_schema()
    return {"requestBody": {"required": True, "content": {kind: {"schema": schema} for kind in (
        "application/json", "application/x-www-form-urlencoded", "multipart/form-data")}}}


def router(served: Served) -> APIRouter:
    routes = APIRouter(route_class=OpenToPages)
    translator, limits, langs = served.translator, served.limits, served.langs

    async def translated(job: Job) -> bytes:
        n_best = job.alternatives + 1
        # the model's beam, wide enough for the alternatives and within the server's (None: the model's own)
        beam = max(n_best, min(translator.decode_cfg.beam, MAX_BEAM)) if job.alternatives else None
        controls = DecodingControls(beam=beam, n_best=n_best)
        segments = job.segments
        results = await plain_results(served.batcher, translator, limits, controls, segments, [""] * len(segments),
                                      where=job.where, blank_ok=False)
        return dumps(answer_json(job, results)).encode()

    @routes.post("/translate", responses=responses(LibreTranslateAnswer, 400, 503, 500),
                 openapi_extra=_body(LibreTranslateRequest))
    async def translate(request: Request):
        """LibreTranslate's translate: one text or a list, with the model's language pair."""
        try:
            values = await request_values(request)
            job = translate_job(values, langs, from_json=is_json(request.headers.get("content-type", "")))
        except Refused as err:
            return error(400, str(err))
        return await answer(request, limits.time_limit_s, translated(job))

    @routes.get("/languages", responses=responses(list[Language]))
    async def languages():
        """LibreTranslate's languages: the model's source and target language."""
        return JSONResponse(language_list(langs))

    @routes.post("/detect", responses=responses(list[Detection], 400), openapi_extra=_body(DetectRequest))
    async def detect(request: Request):
        """LibreTranslate's detect: the model's two languages, the likelier first (from their common words)."""
        try:
            values = await request_values(request)
            return JSONResponse(detections(detect_text(values), named_pair(langs)))
        except Refused as err:
            return error(400, str(err))

    @routes.options("/translate", include_in_schema=False)
    @routes.options("/languages", include_in_schema=False)
    @routes.options("/detect", include_in_schema=False)
    async def preflight():
        """A browser's question before a cross-origin request: CORS says yes."""
        return Response(status_code=204)

    return routes
