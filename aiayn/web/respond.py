"""How the routes answer: a model job's result or its error as a response, the error body, the 422 of a
request that does not fit its model, and the compact JSON every answer is written in.

Only aiayn's user errors (AiaynError) reach the client, with 400 (or 503 when the server, not the
request, is at fault); anything else is logged and answered with a generic 500."""

import asyncio
import json
import logging

from fastapi import Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from aiayn.decoding.workers import WorkersDown
from aiayn.errors import AiaynError, BudgetExceeded
from aiayn.web.guards import Busy
from aiayn.web.limits import RETRY_AFTER_S

log = logging.getLogger(__name__)

NATIVE_ONLY = ("attention maps and the step view need the native engine, and this server runs --engine ct2 "
               "(CTranslate2 gives no per-layer, per-head maps): send \"attention\": false for a plain translation, "
               "or serve with --engine native")
NO_PAGE = ("no page here: this server runs --engine ct2, and the page shows attention maps, which need "
           "--engine native. The JSON API answers POST /api/translate with \"attention\": false and POST "
           "/api/translate_batch")


class CodedError(AiaynError):
    """A user error the page words itself: `code` names it, `params` holds its numbers."""

    def __init__(self, message: str, code: str, **params):
        super().__init__(message)
        self.code, self.params = code, params


class ClientLeft(Exception):
    """The client closed the connection before its answer was ready."""


def dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def error(status: int, message: str, headers: dict | None = None, code: str = "", params=None) -> JSONResponse:
    """{"error": message} (and the page's "code" and "params" to word it in its language, when it has them)."""
    coded = {"code": code, "params": params or {}} if code else {}
    return JSONResponse({"error": message, **coded}, status_code=status, headers=headers)


async def _client_left(request: Request) -> None:
    """Returns when the client has gone. The body has been read, so the next ASGI message is
    http.disconnect, which comes when the connection closes (uvicorn, the test client and httpx's ASGI
    transport all hold it back until then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _unless_client_leaves(request: Request, work):
    """The result of the coroutine `work`; ClientLeft (and `work` cancelled, which withdraws a job still
    queued) when the client goes first: nobody would read the answer."""
    job, gone = asyncio.ensure_future(work), asyncio.ensure_future(_client_left(request))
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not job.done():  # the client left, or this request is cancelled
            job.cancel()
    if not job.done():
        raise ClientLeft()
    return job.result()


async def answer(request: Request, time_limit_s: float, work) -> Response:
    """Await a model job (a coroutine -> the answer's JSON bytes); its result or its error as a response.
    time_limit_s: the server's budget per request, named when a job runs past it."""
    try:
        return Response(await _unless_client_leaves(request, work), media_type="application/json")
    except ClientLeft:
        return Response(status_code=499)  # "client closed request" (nginx's code): nobody reads it
    except Busy:
        return error(503, "the server is busy with other translations; retry in a moment",
                     {"Retry-After": str(RETRY_AFTER_S)})
    except BudgetExceeded as err:
        # 503, not 4xx: the request is valid; whether it fits the wall-clock budget depends on this
        # server's speed and load. No Retry-After: the same request would likely run out again.
        return error(503, f"{err} ({time_limit_s:g} s per request on this server); shorten the "
                          "text or use a smaller beam")
    except WorkersDown as err:  # not the request's fault: the server's decoding processes are gone
        return error(503, str(err))
    except CodedError as err:  # the user's mistake, with a code the page words in its language
        return error(400, str(err), code=err.code, params=err.params)
    except AiaynError as err:  # the user's mistake, in words meant for the user
        return error(400, str(err))
    except Exception:  # a bug: its text may hold paths or internals, so it goes to the log only
        log.exception("request failed")
        return error(500, "internal server error (details are in the server's log)")


async def unreadable_body(request: Request, exc: StarletteHTTPException) -> Response:
    """FastAPI answers a body that json cannot read for a reason other than its syntax with 400 "There was an
    error parsing the body", whatever the reason (the error it caught is the exception's cause): that reason, in
    words. Every other HTTP error is answered as FastAPI answers it."""
    cause = exc.__cause__
    if isinstance(cause, RecursionError):
        return error(400, "the JSON body is nested too deeply to read (about 1,000 levels of [ or {); a request "
                          "is one flat object, such as {\"text\": \"...\"}")
    if isinstance(cause, UnicodeDecodeError):
        return error(400, f"the JSON body is not UTF-8 text (an invalid byte at {cause.start}); send it as UTF-8")
    return await http_exception_handler(request, exc)


async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
    """422 for a request its model refuses. FastAPI's own 422 echoes each field's input, and a lone surrogate
    in it (valid JSON: "\\ud800") cannot be encoded as UTF-8: the answer became a 500 with a traceback. The
    errors without their input, ASCII-escaped, say what and where all the same."""
    errors = [{key: error[key] for key in ("type", "loc", "msg") if key in error} for error in exc.errors()]
    return Response(json.dumps({"detail": errors}, ensure_ascii=True, default=str), status_code=422,
                    media_type="application/json")
