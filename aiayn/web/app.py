"""The FastAPI app: the served model (aiayn.web.served) behind its queues, and its routes, one module per group
(aiayn.web.routes): health, translate (and batch, score), step, the model panel (info, positions),
post-editing (alternatives), the training timeline, and the page (GET / and /static/NAME).

Engines: the routes ask the engine's capabilities (aiayn.decoding.engines.Capabilities), never its name. With
the native engine, everything; with one without attention maps (ct2, `aiayn serve --engine ct2`), the plain
endpoints, /api/health and /api/info; maps, /api/step, /api/alternatives and traces answer 400 naming
--engine native, and GET / is a 404 note.
Every bound of the server is a constant of aiayn.web.limits (names that clients of the app use are
exported here too); no file path ever comes from a request: the model is fixed when the app is created."""

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from aiayn.web.answer import max_response_bytes
from aiayn.web.guards import BodyLimit
from aiayn.web.limits import (
    BODY_LIMITS,
    DEFAULT_LIMITS,
    GIL_SWITCH_S,
    MAX_BATCH_BODY,
    MAX_BATCH_TEXTS,
    MAX_BEAM,
    MAX_BODY,
    MAX_OUTPUT_TOKENS,
    MAX_RUNNING,
    MAX_SOURCE_TOKENS,
    MAX_TEXT,
    MAX_WAITING,
    TIME_LIMIT_S,
    Limits,
    heaviest_text,
)
from aiayn.web.respond import invalid_request, unreadable_body
from aiayn.web.routes import health, libretranslate, model, page, postedit, step, timeline, translate
from aiayn.web.served import serve

__all__ = ["create_app", "Limits", "heaviest_text", "max_response_bytes", "GIL_SWITCH_S", "MAX_BATCH_BODY",
           "MAX_BATCH_TEXTS", "MAX_BEAM", "MAX_BODY", "MAX_OUTPUT_TOKENS", "MAX_RUNNING", "MAX_SOURCE_TOKENS",
           "MAX_TEXT", "MAX_WAITING", "TIME_LIMIT_S"]

# in this order: the paths of the API reference (docs/reference/rest.md) follow it
ROUTES = (health, translate, step, model, postedit, timeline, libretranslate, page)


def create_app(translator, limits: Limits = DEFAULT_LIMITS, alignment: str | None = None) -> FastAPI:
    """alignment: the head of the word alignment the page overlays (--alignment-head's forms; None: the last
    layer's mean), resolved here, once ("best" ranks the heads)."""
    served = serve(translator, limits, alignment)
    app = FastAPI(title="aiayn", docs_url=None, redoc_url=None, lifespan=served.lifespan)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY, per_path=BODY_LIMITS)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(StarletteHTTPException, unreadable_body)
    app.state.admission, app.state.batcher = served.admission, served.batcher  # tests watch their queues
    for routes in ROUTES:
        app.include_router(routes.router(served))
    return app
