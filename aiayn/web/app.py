"""FastAPI app: POST /api/translate, POST /api/translate_batch, POST /api/step, GET /api/health, GET /api/info
(the model panel), GET / (one static page) and GET /static/NAME (its scripts and style: only the files in
static/).

Endpoints:
- POST /api/translate {"text", "beam": 4, "attention": true}: with attention (the default, the page's
  request) every attention map, the subwords and their ids, and the word alignment `aiayn translate
  --alignment` prints for those maps, from the head of `aiayn serve --alignment-head` (aiayn.web.alignment);
  with "attention": false the plain answer {"translation", "score", "source_tokens", "target_tokens"} (target
  subwords without </s>);
- POST /api/translate_batch {"texts": [up to MAX_BATCH_TEXTS], "beam": 4} -> {"translations":
  [{"translation", "score"}, ...]} in input order; a blank text translates to "" (score 0);
- both translate requests take the decoding controls of DecodingControls (n_best in plain mode, min_length,
  no_repeat_ngram_size, a target prefix, or sampling instead of beam search); in plain mode also
  "constraints" (/api/translate: phrases the translation must contain; /api/translate_batch: one list per
  text), and /api/translate takes "trace": true for the beam search step by step (Translator.trace; plain
  mode, native engine; one job through the admission gate, like maps);
- POST /api/step: one attention row step by step (the page's step view).
- POST /api/alternatives {"source_ids", "target_input_ids", "k"}: post-editing, the top-k next tokens at one
  position and the text prefix each makes (aiayn.web.postedit); GET /api/timeline and GET
  /api/timeline/STEP?sentence=I: the maps the model's run kept at its validations (aiayn.web.timeline).
- POST /api/score {"sources": [...], "targets": [...], "alpha", "length_penalty_form"} -> {"scores": [{"score",
  "log_prob", "tokens", "token_log_probs"}, ...]}: given translations scored by teacher forcing (Translator.score),
  as many pairs as /api/translate_batch has texts, within the source and output bounds; a job on the model's
  thread, through the admission gate like maps and steps.
Plain translations are batched (aiayn.web.batching): the sentences of concurrent requests with the same
beam are decoded in one Translator.translate call of at most MAX_BATCH sentences and MAX_BATCH_WORK source
subwords x beam, after waiting MAX_WAIT_S for company when the model was idle, or REJOIN_S after a batch
while others wait (for the next requests of the clients it answered). Requests with maps, and /api/step,
stay single jobs (one map set is megabytes of JSON; the page sends one at a time).
Engines: with the native engine, everything; with ct2 (`aiayn serve --engine ct2`), the plain endpoints,
/api/health and /api/info; maps and /api/step answer 400 naming --engine native, and GET / is a 404 note.

Built to hold under load and abuse (every bound is a constant below):
- a body over MAX_BODY bytes (MAX_BATCH_BODY for /api/translate_batch) is refused with 413 while it
  arrives, chunked ones too (guards.BodyLimit);
- requests are strictly typed (422 for "4" or true where a number is due) and bounded in size;
- the model runs on MAX_RUNNING worker thread(s). Requests with maps and /api/step pass an admission gate
  with MAX_WAITING places in its queue; plain translations queue for the batcher, at most MAX_QUEUED
  sentences. When either is full the answer is 503 with Retry-After, at once. /api/health never waits;
- a client that leaves while its request waits in a queue costs no decoding (its job is withdrawn);
- a translation gets at most MAX_OUTPUT_TOKENS decoder steps and TIME_LIMIT_S seconds (past it: 503). A
  batch gets the same TIME_LIMIT_S as one request (its work is bounded by MAX_BATCH_WORK); one that runs
  out is decoded again one sentence at a time, each with its own TIME_LIMIT_S, so a request fails for time
  only when it alone runs past it, as without batching (the failed batch cost the queue TIME_LIMIT_S);
- one sentence's user error (AiaynError) reaches only its own request: texts are checked before they are
  queued, and a batch whose call fails is decoded again one sentence at a time;
- a source is at most MAX_SOURCE_TOKENS subwords, so the answer is bounded: every attention map of the
  model, rounded to DECIMALS places, at most max_response_bytes(model) (about 2.4 MB for the 2+2-layer,
  4-head demo model); a step answer (/api/step) holds one head's q, K and V: about (2 K + 1) d_k + d_model
  + 6 K numbers of at most 5 decimals (the K weights 8) for K <= MAX_SOURCE_TOKENS keys (under 0.5 MB for d_k = 64);
- only aiayn's user errors (AiaynError) reach the client; anything else is logged and answered with a
  generic 500;
- with worker processes (aiayn serve --workers N), a worker that dies (the out-of-memory killer) is
  replaced by the next plain request, which is then translated as usual (aiayn.decoding.workers);
  /api/health says {"status": "degraded", "workers": {"alive": k, "of": N}} until then. Workers that die
  too often are not replaced: plain requests get 503 naming the cause, and /api/health a 503 "down";
- while the app is served, the GIL switch interval is GIL_SWITCH_S, so the event loop waits less for it.
No file path ever comes from a request: the model is fixed when the app is created."""

import asyncio
import json
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from aiayn.decoding.options import DecodeOptions
from aiayn.decoding.sampling import SamplingOptions
from aiayn.decoding.workers import WorkersDown
from aiayn.errors import AiaynError, BudgetExceeded
from aiayn.inspect.steps.layer_step import layer_step
from aiayn.inspect.steps.qkv import attention_step
from aiayn.inspect.steps.rnn_step import rnn_step
from aiayn.web.alignment import DEFAULT_HEAD, AlignmentHead, alignment_head
from aiayn.web.answer import CodedError, page_result
from aiayn.web.batching import Batcher
from aiayn.web.diagnosed import plain_diagnosed, with_diagnostics
from aiayn.web.guards import Admission, BodyLimit, Busy
from aiayn.web.info import model_info
from aiayn.web.positions import positions_panel
from aiayn.web.postedit import AlternativesRequest, alternatives_json
from aiayn.web.scoring import score_json
from aiayn.web.timeline import find_timeline, timeline_index, timeline_snapshot

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}

MAX_TEXT = 500  # characters of one request's text
MAX_CONSTRAINTS = 8  # phrases a translation must contain (lexical constraints), per text
MAX_BEAM = 8
MAX_BODY = 16_384  # bytes of a request body; the largest valid /api/step request is under 2 KB
MAX_SOURCE_TOKENS = 128  # subwords of the source, </s> included (Multi30k sentences: about 20)
MAX_OUTPUT_TOKENS = 128  # decoder steps of one translation, </s> included
TIME_LIMIT_S = 5.0  # decoding time of one translation (the heaviest takes 0.3-0.8 s with the demo-size model)
MAX_RUNNING = 1  # decoding jobs at once: one model on 2 cores, a second job would only share them
MAX_WAITING = 4  # jobs with maps or steps queued behind it: such a client waits at most (1 + 4) x TIME_LIMIT_S
MAX_BATCH_TEXTS = 64  # texts of one /api/translate_batch request
# every text at its longest with every character escaped as \uXXXX (6 bytes; one outside the BMP is 12, so
# a batch of such texts may get 413), its quotes and comma, and 1 KB for the rest: 193,216 bytes
MAX_BATCH_BODY = MAX_BATCH_TEXTS * (6 * MAX_TEXT + 3) + 1024
MAX_BATCH = 64  # sentences of one batched translate call (the Translator's own batch size)
MAX_BATCH_WORK = 64 * 32 * 4  # source subwords x beam of one batch: 64 sentences of 32 subwords at beam 4
#   (Multi30k's are about 20), or 8 of the longest (128) at MAX_BEAM, so a batch fits one TIME_LIMIT_S: 8 of
#   the longest at beam 8, 128 steps, 0.85 s (demo size); the 64 longest Multi30k test sentences, 2.7 s
MAX_WAIT_S = 0.002  # for more requests after the first, when the model was idle: requests sent together join
#   one batch, and a lone request waits 2 ms (in trial runs 5 ms made batches no larger, 0 made them smaller)
REJOIN_S = 0.015  # after a batch, while others wait: for its clients' next requests (batching.Batcher);
#   32 clients on 2 cores: batches of 3 and 29 alternating without it, 28-32 with it (BENCHMARKS.md)
MAX_QUEUED = 256  # plain sentences queued or decoding: 4 batches of MAX_BATCH; then 503
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
    queued: int = MAX_QUEUED
    max_batch: int = MAX_BATCH
    max_wait_s: float = MAX_WAIT_S
    rejoin_s: float = REJOIN_S


class SamplingRequest(BaseModel):
    """aiayn.decoding.sampling.SamplingOptions over JSON (the Translator checks them once more)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    temperature: float = Field(1.0, gt=0, le=100)
    top_k: int = Field(0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int | None = Field(None, ge=0, lt=2**63)


@dataclass(frozen=True)
class BatchKey:
    """What every sentence of one batched call shares: its options. A seeded sample is drawn alone (`alone`:
    an object of its own): in a batch, one generator draws for every row, so its result would depend on its
    neighbours."""

    options: DecodeOptions
    alone: object | None = None


class DecodingControls(BaseModel):
    """The decoding controls of both translate endpoints over JSON (types and this server's bounds);
    the rules of their values and combinations are DecodeOptions'."""

    model_config = ConfigDict(extra="forbid", strict=True)  # strict: "4" or true is no beam size
    beam: int | None = Field(None, ge=1, le=MAX_BEAM)  # None: the model's decode.beam
    n_best: int = Field(1, ge=1, le=MAX_BEAM)  # hypotheses per text (plain mode), at most the beam
    min_length: int = Field(0, ge=0, le=MAX_OUTPUT_TOKENS)  # output subwords before </s> may end it
    no_repeat_ngram_size: int = Field(0, ge=0, le=MAX_OUTPUT_TOKENS)  # 0: off
    early_stopping: bool | None = None  # done at `beam` finished hypotheses (None: the model's default)
    sampling: SamplingRequest | None = None  # one sampled translation instead of beam search (plain only)

    def options(self, limits: "Limits", *, attention: bool = False) -> DecodeOptions:
        sampling = None if self.sampling is None else SamplingOptions(**self.sampling.model_dump())
        return DecodeOptions(beam=self.beam, n_best=self.n_best, min_length=self.min_length,
                             no_repeat_ngram_size=self.no_repeat_ngram_size, early_stopping=self.early_stopping,
                             sampling=sampling, return_attention=attention, max_output_len=limits.max_output_tokens,
                             time_limit=limits.time_limit_s, spread=False)

    def batch_key(self, limits: "Limits") -> BatchKey:
        options = self.options(limits)
        return BatchKey(options, object() if options.sampling is not None and options.sampling.seed is not None
                        else None)


class TranslateRequest(DecodingControls):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    attention: bool = True  # false: the plain translation, without maps (batched with other requests)
    target_prefix: str = Field("", max_length=MAX_TEXT)  # the translation starts with it ("" for none)
    target: str = Field("", max_length=MAX_TEXT)  # maps of this target, teacher-forced ("" for the model's own)
    constraints: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field([], max_length=MAX_CONSTRAINTS)
    trace: bool = False  # plain mode: also the beam search, step by step (aiayn.decoding.beam_trace)
    diagnostics: bool = False  # flags and signals of the translation (aiayn.web.diagnosed); native engine


class TranslateBatchRequest(DecodingControls):
    texts: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field(min_length=1, max_length=MAX_BATCH_TEXTS)
    # one per text ("" for none); the body limit MAX_BATCH_BODY leaves room for texts only: prefixes are short
    target_prefixes: list[Annotated[str, Field(max_length=MAX_TEXT)]] | None = None
    # one list of phrases per text ([] for none): lexical constraints
    constraints: list[Annotated[list[Annotated[str, Field(max_length=MAX_TEXT)]],
                                Field(max_length=MAX_CONSTRAINTS)]] | None = None


class ScoreRequest(BaseModel):
    """POST /api/score: the log-probability of each target given its source (aiayn.web.scoring)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    sources: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field(min_length=1, max_length=MAX_BATCH_TEXTS)
    targets: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field(min_length=1, max_length=MAX_BATCH_TEXTS)
    alpha: float | None = Field(None, ge=0, le=10)  # None: the model's length penalty, as beam search
    length_penalty_form: Literal["gnmt", "hf"] | None = None


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
    if model.arch == "transformer":  # encoder self (S x S), decoder self (T x T), cross (T x S)
        heads = model.encoder_layers[0].self_attn.n_heads
        n_enc, n_dec = heads * len(model.encoder_layers), heads * len(model.decoder_layers)
        n_values, n_rows = n_enc * S * S + n_dec * (T * T + T * S), n_enc * S + n_dec * 2 * T
    else:  # RNN: one cross-attention map, L = H = 1
        n_values, n_rows = T * S, T
    tok = translator.tokenizer
    pieces = tok.id_to_piece(list(range(tok.tgt_vocab_size))) + tok.source_id_to_piece(list(range(tok.src_vocab_size)))
    longest = max(len(piece) for piece in pieces)
    text = (S + 3 * T) * (6 * longest + 3)  # source, target, target input subwords; the translation
    links = len(f"{S}-{T} ") * T  # the word alignment: at most one link per output word
    return VALUE_BYTES * n_values + 2 * n_rows + text + 8 * (S + T) + links + 1024


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


def _source_length(tokenizer, text: str, blank_ok: bool = False, where: str = "") -> int:
    """The checks of a text before it is decoded -> its number of source subwords, </s> included."""
    if not text.strip() and not blank_ok:
        raise CodedError(f"{where}the text is empty; give some text to translate", "empty")
    n_source = len(tokenizer.encode_source([text])[0]) + 1  # with </s>
    if n_source > MAX_SOURCE_TOKENS:
        raise CodedError(f"{where}the text is {n_source} subword tokens (with </s>); this server takes at most "
                         f"{MAX_SOURCE_TOKENS}: shorten it", "too_many_tokens", n=n_source, max=MAX_SOURCE_TOKENS)
    return n_source


def _translate(translator, limits: Limits, req: TranslateRequest, langs=(None, None),
               alignment: AlignmentHead = DEFAULT_HEAD) -> bytes:
    """One translation (or the maps of req.target) within the budget -> the JSON the page needs
    (aiayn.web.answer). Serialised here, on the worker thread: megabytes of floats serialised on the event
    loop would stall every other request."""
    _source_length(translator.tokenizer, req.text)
    if req.sampling is not None:
        raise AiaynError("sampling gives plain translations: send \"attention\": false")
    fields, maps = page_result(translator, req.text, req.options(limits, attention=True), req.target,
                               req.target_prefix, langs, alignment)
    if req.diagnostics:
        fields = with_diagnostics(translator, req.text, fields)
    return f'{_dumps(fields)[:-1]},"maps":{_maps_json(maps)}}}'.encode()


def _step(translator, req: StepRequest) -> bytes:
    tok = translator.tokenizer
    for what, ids, vocab in (("source_ids", req.source_ids, tok.src_vocab_size),
                             ("target_input_ids", req.target_input_ids, tok.tgt_vocab_size)):
        if any(not 0 <= i < vocab for i in ids):
            raise AiaynError(f"{what}: token ids must be in [0, {vocab})")
    if translator.arch == "rnn":  # the RNN step: score -> alpha -> context -> tanh(W_c[a; s]) -> outputs
        return _dumps(rnn_step(translator.model, tok, req.source_ids, req.target_input_ids, req.query,
                                        req.kind, req.layer, req.head)).encode()
    step = attention_step(translator.model, req.source_ids, req.target_input_ids, req.kind, req.layer, req.head,
                          req.query)
    rest = layer_step(translator.model, tok, req.source_ids, req.target_input_ids, req.kind, req.layer, req.query)
    return _dumps({**step, "layer_step": rest}).encode()


def _decode_plain(translator, model_pool, key: BatchKey, items: list[tuple[str, str]]) -> list:
    """A batch of plain translations (the batcher's decode, on a batch thread): one Translator call, each
    batch of a pooled translator on one worker. items: (text, target prefix, constraints). model_pool: where
    this process's model runs when the batch threads are others (else None); sampling runs there, in turn
    with the maps and steps."""
    texts, prefixes, wanted = [i[0] for i in items], [i[1] for i in items], [list(i[2]) for i in items]
    decode = partial(translator.translate, texts, options=key.options,
                     target_prefix=prefixes if any(prefixes) else None, constraints=wanted if any(wanted) else None)
    if key.options.sampling is None or model_pool is None:
        return decode()
    return model_pool.submit(decode).result()


async def _translate_plain(batcher: Batcher, translator, limits: Limits, req: DecodingControls, texts: list[str],
                           prefixes: list[str], batch: bool, constraints: list[list[str]] | None = None) -> bytes:
    """Plain translations of `texts` through the batcher -> the JSON of /api/translate (one text,
    attention false) or of /api/translate_batch. Every text is checked before any is queued."""
    if req.sampling is not None and (getattr(req, "attention", False) or any(prefixes)):
        raise AiaynError("sampling draws one plain translation per text: send \"attention\": false and no "
                         "target prefix")
    key = req.batch_key(limits)
    translator.resolve(key.options)  # refused here, not in a batch (e.g. ct2 with early_stopping false)
    tokenizer = translator.tokenizer
    where = (lambda i: f"texts[{i}]: ") if batch else (lambda i: "")
    lengths = [_source_length(tokenizer, text, blank_ok=batch, where=where(i)) for i, text in enumerate(texts)]
    if len(prefixes) != len(texts):
        raise AiaynError(f"target_prefixes has {len(prefixes)} entries for {len(texts)} texts: give one per text "
                         f"(\"\" for none)")
    for i, prefix in enumerate(prefixes):
        if len(tokenizer.encode_target([prefix])[0]) >= limits.max_output_tokens:
            raise AiaynError(f"{where(i)}the target prefix is longer than this server's outputs "
                             f"({limits.max_output_tokens} subwords with </s>): shorten it")
    beam = 1 if req.sampling is not None else (req.beam or translator.decode_cfg.beam)
    constraints = _checked_constraints(translator, key, texts, prefixes, constraints)
    results = await batcher.translate(key, list(zip(texts, prefixes, constraints)), [n * beam for n in lengths])
    if batch:
        return _dumps({"translations": [_plain_json(r, req.n_best) for r in results]}).encode()
    r = results[0]
    return _dumps({**_plain_json(r, req.n_best), "source_tokens": r.src_tokens, "target_tokens": r.tokens}).encode()


def _plain_diagnosed(translator, limits: Limits, req: TranslateRequest) -> bytes:
    """A plain translation and its diagnostics (searched with maps, on the model's thread)."""
    _source_length(translator.tokenizer, req.text)
    r = plain_diagnosed(translator, req.text, req.options(limits), req.target_prefix)
    return _dumps({**_plain_json(r, req.n_best), "source_tokens": r.src_tokens, "target_tokens": r.tokens,
                   "diagnostics": r.diagnostics}).encode()


def _checked_constraints(translator, key: BatchKey, texts, prefixes, constraints) -> list[tuple[str, ...]]:
    """Per text its constraints as a tuple (() for none), checked before the texts are queued (the checks of
    Translator.translate: each phrase writable, all fitting the server's outputs, an engine that has them)."""
    if constraints is None or not any(constraints):
        return [()] * len(texts)
    if len(constraints) != len(texts):
        raise AiaynError(f"constraints has {len(constraints)} entries for {len(texts)} texts: give one list per text "
                         f"([] for none)")
    options = translator.resolve(key.options)
    translator.check_constraints(texts, constraints, prefixes, options)
    return [tuple(c) for c in constraints]


def _trace_json(translator, limits: Limits, req: TranslateRequest) -> bytes:
    """/api/translate with "trace": the translation and its beam search step by step."""
    _source_length(translator.tokenizer, req.text)
    trace = translator.trace(req.text, req.options(limits), target_prefix=req.target_prefix or None,
                             constraints=req.constraints or None)
    best = trace.replay()[0]
    return _dumps({"translation": best.text, "score": best.score, "trace": trace.to_dict()}).encode()


def _plain_json(result, n_best: int) -> dict:
    """translation and score; with n_best > 1 also "n_best": [[text, score], ...], best first."""
    plain = {"translation": result.text, "score": result.score}
    return plain if n_best == 1 else {**plain, "n_best": [list(pair) for pair in result.n_best]}


def _error(status: int, message: str, headers: dict | None = None, code: str = "", params=None) -> JSONResponse:
    """{"error": message} (and the page's "code" and "params" to word it in its language, when it has them)."""
    coded = {"code": code, "params": params or {}} if code else {}
    return JSONResponse({"error": message, **coded}, status_code=status, headers=headers)


class ClientLeft(Exception):
    """The client closed the connection before its answer was ready."""


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


async def _answer(request: Request, limits: Limits, work) -> Response:
    """Await a model job (a coroutine -> the answer's JSON bytes); its result or its error as a response."""
    try:
        return Response(await _unless_client_leaves(request, work), media_type="application/json")
    except ClientLeft:
        return Response(status_code=499)  # "client closed request" (nginx's code): nobody reads it
    except Busy:
        return _error(503, "the server is busy with other translations; retry in a moment",
                      {"Retry-After": str(RETRY_AFTER_S)})
    except BudgetExceeded as err:
        # 503, not 4xx: the request is valid; whether it fits the wall-clock budget depends on this
        # server's speed and load. No Retry-After: the same request would likely run out again.
        return _error(503, f"{err} ({limits.time_limit_s:g} s per request on this server); shorten the "
                           "text or use a smaller beam")
    except WorkersDown as err:  # not the request's fault: the server's decoding processes are gone
        return _error(503, str(err))
    except CodedError as err:  # the user's mistake, with a code the page words in its language
        return _error(400, str(err), code=err.code, params=err.params)
    except AiaynError as err:  # the user's mistake, in words meant for the user
        return _error(400, str(err))
    except Exception:  # a bug: its text may hold paths or internals, so it goes to the log only
        log.exception("request failed")
        return _error(500, "internal server error (details are in the server's log)")


NATIVE_ONLY = ("attention maps and the step view need the native engine, and this server runs --engine ct2 "
               "(CTranslate2 gives no per-layer, per-head maps): send \"attention\": false for a plain translation, "
               "or serve with --engine native")
NO_PAGE = ("no page here: this server runs --engine ct2, and the page shows attention maps, which need "
           "--engine native. The JSON API answers POST /api/translate with \"attention\": false and POST "
           "/api/translate_batch")


def create_app(translator, limits: Limits = Limits(), alignment: str | None = None) -> FastAPI:
    """alignment: the head of the word alignment the page overlays (--alignment-head's forms; None: the last
    layer's mean), resolved here, once ("best" ranks the heads)."""
    engine = getattr(translator, "engine", "native")  # ct2: the plain endpoints only (no maps, no page)
    if alignment and engine != "native":
        raise AiaynError("--alignment-head chooses the head of the page's word alignment, which needs the maps "
                         "of --engine native: drop it, or serve with --engine native")
    aligned_by = alignment_head(translator, alignment) if engine == "native" else DEFAULT_HEAD
    # one thread for every job on this process's model: maps, steps, sampling, and plain batches when the
    # model decodes here; they take turns on it
    pool = ThreadPoolExecutor(max_workers=limits.running, thread_name_prefix="aiayn-decode")
    admission = Admission(pool, limits.running + limits.waiting)
    # Plain batches go to the translator's worker processes (or CTranslate2's inter_threads) when it has
    # several: one batch each, from threads of their own that only wait; what needs this process's model
    # (sampling) still takes its turn on `pool`.
    in_flight = translator.parallel_batches
    batch_pool = pool if in_flight == 1 else ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="aiayn-batch")
    batcher = Batcher(partial(_decode_plain, translator, None if batch_pool is pool else pool), batch_pool,
                      max_batch=limits.max_batch, max_work=MAX_BATCH_WORK, max_wait_s=limits.max_wait_s,
                      rejoin_s=limits.rejoin_s, capacity=limits.queued, in_flight=in_flight)
    health_info = {"status": "ok", "arch": translator.arch, "engine": engine,
                   "model": Path(translator.model_dir or "").name}

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
            for executor in {pool, batch_pool}:
                executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="aiayn", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY, per_path={"/api/translate_batch": MAX_BATCH_BODY,
                                                                "/api/score": 2 * MAX_BATCH_BODY})
    app.state.admission, app.state.batcher = admission, batcher  # tests watch their queues

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        # FastAPI's own 422 echoes each field's input, and a lone surrogate in it (valid JSON: "\ud800")
        # cannot be encoded as UTF-8: the answer became a 500 with a traceback. The errors without their
        # input, ASCII-escaped, say what and where all the same.
        errors = [{key: error[key] for key in ("type", "loc", "msg") if key in error} for error in exc.errors()]
        return Response(json.dumps({"detail": errors}, ensure_ascii=True, default=str), status_code=422,
                        media_type="application/json")

    worker_pool = getattr(translator, "pool", None)  # worker processes (aiayn serve --workers N), or None

    @app.get("/api/health")
    async def health():  # async, and never waits for the model or its thread
        if worker_pool is None:
            return health_info
        # a worker that died is replaced by the next plain request (WorkerPool.search); until then, or for
        # good when they died too often (then plain requests get 503), fewer than all are alive
        alive, of = worker_pool.alive(), worker_pool.workers
        state = {**health_info, "status": "down" if worker_pool.down else "ok" if alive == of else "degraded",
                 "workers": {"alive": alive, "of": of}}
        return JSONResponse(state, status_code=503 if worker_pool.down else 200)

    @app.post("/api/translate")
    async def translate(req: TranslateRequest, request: Request):
        if req.n_best != 1 and req.attention:
            return _error(400, "n_best is for plain translations: send \"attention\": false")
        if req.diagnostics and not req.attention:
            return await _answer(request, limits, admission.run(partial(_plain_diagnosed, translator, limits, req)))
        if req.trace:
            if req.attention or engine != "native":
                return _error(400, "trace shows the native engine's beam search in plain mode: send \"attention\": "
                                   "false" if req.attention else NATIVE_ONLY)
            return await _answer(request, limits, admission.run(partial(_trace_json, translator, limits, req)))
        if req.constraints and req.attention:
            return _error(400, "constraints are for plain translations: send \"attention\": false")
        if not req.attention or req.sampling is not None:  # sampling with attention: refused in there
            return await _answer(request, limits, _translate_plain(
                batcher, translator, limits, req, [req.text], [req.target_prefix], batch=False,
                constraints=[req.constraints]))
        if engine != "native":
            return _error(400, NATIVE_ONLY)
        return await _answer(request, limits, admission.run(partial(_translate, translator, limits, req, langs,
                                                                     aligned_by)))

    @app.post("/api/translate_batch")
    async def translate_batch(req: TranslateBatchRequest, request: Request):
        prefixes = req.target_prefixes if req.target_prefixes is not None else [""] * len(req.texts)
        return await _answer(request, limits, _translate_plain(batcher, translator, limits, req, req.texts,
                                                               prefixes, batch=True, constraints=req.constraints))

    @app.post("/api/score")
    async def score(req: ScoreRequest, request: Request):
        work = partial(score_json, translator, req.sources, req.targets, alpha=req.alpha,
                       length_penalty_form=req.length_penalty_form, max_source_tokens=MAX_SOURCE_TOKENS,
                       max_output_tokens=limits.max_output_tokens, batch_size=limits.max_batch)
        return await _answer(request, limits, admission.run(work))

    @app.post("/api/step")
    async def step(req: StepRequest, request: Request):
        if engine != "native":
            return _error(400, NATIVE_ONLY)
        return await _answer(request, limits, admission.run(partial(_step, translator, req)))

    info = {**model_info(translator, MAX_SOURCE_TOKENS, MAX_TEXT), "engine": engine}
    langs = (info.get("src_lang"), info.get("tgt_lang"))
    positions = positions_panel(translator.model)

    @app.get("/api/info")
    async def model_panel():
        return info  # computed once, like health_info

    @app.get("/api/positions")
    async def positions_table():  # the positional-encoding panel; computed once
        return positions

    @app.post("/api/alternatives")  # post-editing: the top-k next tokens at one position (aiayn.web.postedit)
    async def next_tokens(req: AlternativesRequest, request: Request):
        if engine != "native":
            return _error(400, NATIVE_ONLY)
        return await _answer(request, limits, admission.run(partial(alternatives_json, translator, req)))

    timeline_dir = find_timeline(translator.model_dir)  # the run's stored maps, if any (aiayn.web.timeline)

    @app.get("/api/timeline")
    def timeline_steps():
        return timeline_index(timeline_dir, translator.tokenizer)

    @app.get("/api/timeline/{step}")
    def timeline_maps(step: int, sentence: int = 0):
        try:
            return timeline_snapshot(timeline_dir, step, sentence)
        except AiaynError as err:
            return _error(404, str(err))

    if engine != "native":
        @app.get("/")
        def no_page():
            return _error(404, NO_PAGE)

        return app

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
