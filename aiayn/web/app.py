"""FastAPI app: POST /api/translate, POST /api/step, GET /api/health, GET /api/info (the model panel),
GET / (one static page) and GET /static/NAME (its scripts and style: only the files in static/).

Built to hold under load and abuse (every bound is a constant below):
- a body over MAX_BODY bytes is refused with 413 while it arrives, chunked ones too (guards.BodyLimit);
- requests are strictly typed (422 for "4" or true where a number is due) and bounded in size;
- the model runs on MAX_RUNNING worker thread(s) behind an admission gate with MAX_WAITING places in its
  queue; when they are taken the answer is 503 with Retry-After, at once. /api/health never waits for it;
- a translation gets at most MAX_OUTPUT_TOKENS decoder steps and TIME_LIMIT_S seconds (past it: 503), and
  its source at most MAX_SOURCE_TOKENS subwords, so the answer is bounded: every attention map of the
  model, rounded to DECIMALS places, at most max_response_bytes(model) (about 2.4 MB for the 2+2-layer,
  4-head demo model); a step answer (/api/step) holds one head's q, K and V: about (2 K + 1) d_k + d_model
  + 6 K numbers of at most 5 decimals for K <= MAX_SOURCE_TOKENS keys (under 0.5 MB for d_k = 64);
- only aiayn's user errors (AiaynError) reach the client; anything else is logged and answered with a
  generic 500;
- while the app is served, the GIL switch interval is GIL_SWITCH_S, so the event loop waits less for it.
No file path ever comes from a request: the model is fixed when the app is created."""

import json
import logging
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Literal

import numpy as np
from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from aiayn.errors import AiaynError, BudgetExceeded
from aiayn.inspect.capture import start_and_end
from aiayn.inspect.qkv import attention_step
from aiayn.inspect.rnn_step import rnn_step
from aiayn.web.guards import Admission, BodyLimit, Busy
from aiayn.web.info import model_info

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}

MAX_TEXT = 500  # characters of one request's text
MAX_BEAM = 8
MAX_BODY = 16_384  # bytes of a request body; the largest valid /api/step request is under 2 KB
MAX_SOURCE_TOKENS = 128  # subwords of the source, </s> included (Multi30k sentences: about 20)
MAX_OUTPUT_TOKENS = 128  # decoder steps of one translation, </s> included
TIME_LIMIT_S = 5.0  # decoding time of one translation (the heaviest takes 0.3-0.8 s with the demo-size model)
MAX_RUNNING = 1  # decoding jobs at once: one model on 2 cores, a second job would only share them
MAX_WAITING = 4  # jobs queued behind it: a client waits at most (1 + 4) x TIME_LIMIT_S
RETRY_AFTER_S = 2  # the Retry-After of a 503 when the queue is full: a few requests' time
DECIMALS = 3  # of each attention weight sent: enough for the heatmap and its 3-decimal tooltips
VALUE_BYTES = len("0.123,")  # the longest a rounded weight is in the JSON (1 is written "1.0")
GIL_SWITCH_S = 0.001  # sys.setswitchinterval while serving (Python's default: 0.005), see create_app


@dataclass(frozen=True)
class Limits:
    """The server's bounds that tests and the load benchmark may lower (defaults: the constants)."""

    running: int = MAX_RUNNING
    waiting: int = MAX_WAITING
    time_limit_s: float = TIME_LIMIT_S
    max_output_tokens: int = MAX_OUTPUT_TOKENS


class TranslateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # strict: "4" or true is no beam size
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    beam: int = Field(4, ge=1, le=MAX_BEAM)


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    source_ids: list[int] = Field(min_length=1, max_length=MAX_SOURCE_TOKENS)
    target_input_ids: list[int] = Field(min_length=1, max_length=MAX_OUTPUT_TOKENS)
    kind: Literal["encoder_self", "decoder_self", "cross"]
    layer: int = Field(ge=0)
    head: int = Field(ge=0)
    query: int = Field(ge=0)


def max_response_bytes(translator, max_output_tokens: int = MAX_OUTPUT_TOKENS) -> int:
    """An upper bound of a /api/translate answer's size: every map at its largest (S = MAX_SOURCE_TOKENS,
    T = max_output_tokens), every weight at its longest, each row's brackets; the subwords and the
    translation at the vocabulary's longest subword, 6 bytes a character (an escaped one); ids; 1 KB."""
    S, T, model = MAX_SOURCE_TOKENS, max_output_tokens, translator.model
    if hasattr(model, "encoder_layers"):  # Transformer: encoder self (S x S), decoder self (T x T), cross (T x S)
        heads = model.encoder_layers[0].self_attn.n_heads
        n_enc, n_dec = heads * len(model.encoder_layers), heads * len(model.decoder_layers)
        n_values, n_rows = n_enc * S * S + n_dec * (T * T + T * S), n_enc * S + n_dec * 2 * T
    else:  # RNN: one cross-attention map, L = H = 1
        n_values, n_rows = T * S, T
    tok = translator.tokenizer
    pieces = tok.id_to_piece(list(range(tok.tgt_vocab_size))) + tok.source_id_to_piece(list(range(tok.src_vocab_size)))
    longest = max(len(piece) for piece in pieces)
    text = (S + 3 * T) * (6 * longest + 3)  # source, target, target input subwords; the translation
    return VALUE_BYTES * n_values + 2 * n_rows + text + 8 * (S + T) + 1024


def _dumps(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _rounded(weights: np.ndarray) -> list:
    # float64 first: a rounded float32 prints as 0.12300000339746475, not 0.123
    return np.asarray(weights, dtype=np.float64).round(DECIMALS).tolist()


def _maps_json(maps: dict) -> str:
    """{kind: [layer][head][query][key]}, serialised one (query x key) matrix at a time: json.dumps holds
    the GIL until it returns, and short holds (about 2 ms for 128 x 128) let the event loop answer
    /api/health in between; the whole answer at once holds it for tens of milliseconds."""
    kinds = []
    for kind, array in maps.items():  # (L, H, Q, K)
        layers = ["[" + ",".join(_dumps(_rounded(matrix)) for matrix in layer) + "]" for layer in array]
        kinds.append(f"{_dumps(kind)}:[{','.join(layers)}]")
    return "{" + ",".join(kinds) + "}"


def _translate(translator, limits: Limits, text: str, beam: int) -> bytes:
    """One translation within the budget -> the JSON the page needs. Serialised here, on the worker
    thread: megabytes of floats serialised on the event loop would stall every other request."""
    tok = translator.tokenizer
    if not text.strip():
        raise AiaynError("the text is empty; give some text to translate")
    n_source = len(tok.encode_source([text])[0]) + 1  # with </s>
    if n_source > MAX_SOURCE_TOKENS:
        raise AiaynError(f"the text is {n_source} subword tokens (with </s>); this server takes at most "
                         f"{MAX_SOURCE_TOKENS}: shorten it")
    result = translator.translate([text], beam=beam, return_attention=True,
                                  max_output_len=limits.max_output_tokens, time_limit=limits.time_limit_s)[0]
    # as aiayn.inspect.capture: one target token per decoder step, </s> included when the output ended
    steps = result.attention["cross"].shape[-2]
    start, end = start_and_end(tok)  # <s> (<pad> for Marian models) and </s>
    target = result.tokens + [end] if steps == len(result.tokens) + 1 else list(result.tokens)
    target_input = [start] + target[:-1]
    head = _dumps({"translation": result.text, "arch": translator.arch,
                   "source_tokens": result.src_tokens, "target_tokens": target, "target_input_tokens": target_input,
                   "source_ids": [tok.source_piece_to_id(p) for p in result.src_tokens],
                   "target_input_ids": [tok.bos_id] + [tok.piece_to_id(p) for p in target_input[1:]],
                   "score": result.score})
    return f'{head[:-1]},"maps":{_maps_json(result.attention)}}}'.encode()


def _step(translator, req: StepRequest) -> bytes:
    tok = translator.tokenizer
    for what, ids, vocab in (("source_ids", req.source_ids, tok.src_vocab_size),
                             ("target_input_ids", req.target_input_ids, tok.tgt_vocab_size)):
        if any(not 0 <= i < vocab for i in ids):
            raise AiaynError(f"{what}: token ids must be in [0, {vocab})")
    if translator.arch == "rnn":  # seed 002's step: score -> alpha -> context -> tanh(W_c[a; s]) -> outputs
        return _dumps(rnn_step(translator.model, tok, req.source_ids, req.target_input_ids, req.query,
                                        req.kind, req.layer, req.head)).encode()
    return _dumps(attention_step(translator.model, req.source_ids, req.target_input_ids, req.kind, req.layer,
                                 req.head, req.query)).encode()


def _error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _answer(admission: Admission, limits: Limits, job) -> Response:
    """Run a model job behind the admission gate; its result or its error as a response."""
    try:
        return Response(await admission.run(job), media_type="application/json")
    except Busy:
        return _error(503, "the server is busy with other translations; retry in a moment",
                      {"Retry-After": str(RETRY_AFTER_S)})
    except BudgetExceeded as err:
        # 503, not 4xx: the request is valid; whether it fits the wall-clock budget depends on this
        # server's speed and load. No Retry-After: the same request would likely run out again.
        return _error(503, f"{err} ({limits.time_limit_s:g} s per request on this server); shorten the "
                           "text or use a smaller beam")
    except AiaynError as err:  # the user's mistake, in words meant for the user
        return _error(400, str(err))
    except Exception:  # a bug: its text may hold paths or internals, so it goes to the log only
        log.exception("request failed")
        return _error(500, "internal server error (details are in the server's log)")


def create_app(translator, limits: Limits = Limits()) -> FastAPI:
    if getattr(translator, "engine", "native") != "native":  # the page is built on the maps
        raise AiaynError("the web app shows attention maps, which only the native engine gives: serve a "
                         "Translator made with engine='native' (aiayn serve --engine native)")
    admission = Admission(limits.running, limits.waiting)
    health_info = {"status": "ok", "arch": translator.arch, "model": Path(translator.model_dir or "").name}

    @asynccontextmanager
    async def lifespan(app):
        # The decoding thread holds the GIL between torch calls; the event loop waits up to one switch
        # interval per hand-over. Measured with heavy requests in flight (bench/load_test.py): /api/health
        # max 17-21 ms at 1 ms against 61-73 ms at the default 5 ms, with the same decoding throughput.
        previous = sys.getswitchinterval()
        sys.setswitchinterval(GIL_SWITCH_S)
        try:
            yield
        finally:
            sys.setswitchinterval(previous)
            admission.shutdown()

    app = FastAPI(title="aiayn", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY)
    app.state.admission = admission  # tests watch its queue

    @app.get("/api/health")
    async def health():
        return health_info  # async and computed once: never waits for the model or its thread

    @app.post("/api/translate")
    async def translate(req: TranslateRequest):
        return await _answer(admission, limits, partial(_translate, translator, limits, req.text, req.beam))

    @app.post("/api/step")
    async def step(req: StepRequest):
        return await _answer(admission, limits, partial(_step, translator, req))

    info = model_info(translator, MAX_SOURCE_TOKENS, MAX_TEXT)

    @app.get("/api/info")
    async def model_panel():
        return info  # computed once, like health_info

    @app.get("/")
    def index():
        return FileResponse(STATIC / "index.html", media_type="text/html")

    static_files = {p.name: p for p in STATIC.iterdir() if p.suffix in STATIC_TYPES}  # fixed at start

    @app.get("/static/{name}")
    def static(name: str):
        if name not in static_files:
            return _error(404, "no such file")
        return FileResponse(static_files[name], media_type=STATIC_TYPES[static_files[name].suffix],
                            headers={"Cache-Control": "no-cache"})

    return app


def _repeated(tokenizer, word: str) -> str:
    """The longest repetition of `word` the server takes (MAX_TEXT characters, MAX_SOURCE_TOKENS subwords)."""
    text = word
    while len(longer := f"{text} {word}") <= MAX_TEXT and len(tokenizer.encode([longer])[0]) + 1 <= MAX_SOURCE_TOKENS:
        text = longer
    return text


def heaviest_text(tokenizer, words=("nine", "x")) -> str:
    """The request the server works hardest on: the most source subwords it takes. With the number-task
    tokenizer "x" is two subwords: "x x ... x" is 127 with </s> in 125 characters; "nine" stops at 101
    in 499 (MAX_TEXT)."""
    return max((_repeated(tokenizer, w) for w in words), key=lambda t: (len(tokenizer.encode([t])[0]), len(t)))
