"""The server's bounds (every one a constant here) and the request models that hold requests to them.

Built to hold under load and abuse:
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
  model, rounded to DECIMALS places, at most max_response_bytes(model) (aiayn.web.answer; about 2.4 MB for
  the 2+2-layer, 4-head demo model); a step answer (/api/step) holds one head's q, K and V: about
  (2 K + 1) d_k + d_model + 6 K numbers of at most 5 decimals (the K weights 8) for K <= MAX_SOURCE_TOKENS
  keys (under 0.5 MB for d_k = 64);
- only aiayn's user errors (AiaynError) reach the client; anything else is logged and answered with a
  generic 500 (aiayn.web.respond);
- with worker processes (aiayn serve --workers N), a worker that dies (the out-of-memory killer) is
  replaced by the next plain request, which is then translated as usual (aiayn.decoding.workers);
  /api/health says {"status": "degraded", "workers": {"alive": k, "of": N}} until then. Workers that die
  too often are not replaced: plain requests get 503 naming the cause, and /api/health a 503 "down";
- while the app is served, the GIL switch interval is GIL_SWITCH_S, so the event loop waits less for it.
No file path ever comes from a request: the model is fixed when the app is created."""

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from aiayn.decoding.options import DecodeOptions
from aiayn.decoding.sampling import SamplingOptions
from aiayn.inspect.ablation import HEAD_KINDS

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
# paths past MAX_BODY; /translate is LibreTranslate's, whose q may be a list like /api/translate_batch's texts
BODY_LIMITS = {"/api/translate_batch": MAX_BATCH_BODY, "/api/score": 2 * MAX_BATCH_BODY, "/translate": MAX_BATCH_BODY}
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
GIL_SWITCH_S = 0.001  # sys.setswitchinterval while serving (Python's default: 0.005), see Served.lifespan
MAX_K = 20  # alternatives per position (POST /api/alternatives)
MAX_HEADS_OUT = 64  # heads one request takes out ("without_heads"): every head of a 2+2-layer, 8-head model


@dataclass(frozen=True, kw_only=True)
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


DEFAULT_LIMITS = Limits()


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

    def options(self, limits: Limits, *, attention: bool = False) -> DecodeOptions:
        sampling = None if self.sampling is None else SamplingOptions(**self.sampling.model_dump())
        return DecodeOptions(beam=self.beam, n_best=self.n_best, min_length=self.min_length,
                             no_repeat_ngram_size=self.no_repeat_ngram_size, early_stopping=self.early_stopping,
                             sampling=sampling, return_attention=attention, max_output_len=limits.max_output_tokens,
                             time_limit=limits.time_limit_s, spread=False)

    def batch_key(self, limits: Limits) -> BatchKey:
        options = self.options(limits)
        return BatchKey(options, object() if options.sampling is not None and options.sampling.seed is not None
                        else None)


class HeadOut(BaseModel):
    """One attention head to take out (aiayn.inspect.ablation.Head), counted from 0 as /api/step counts them;
    the model's own bounds are checked when the request runs (aiayn.web.ablated)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    kind: Literal[HEAD_KINDS]
    layer: int = Field(ge=0)
    head: int = Field(ge=0)


class TranslateRequest(DecodingControls):
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    attention: bool = True  # false: the plain translation, without maps (batched with other requests)
    target_prefix: str = Field("", max_length=MAX_TEXT)  # the translation starts with it ("" for none)
    target: str = Field("", max_length=MAX_TEXT)  # maps of this target, teacher-forced ("" for the model's own)
    constraints: list[Annotated[str, Field(max_length=MAX_TEXT)]] = Field([], max_length=MAX_CONSTRAINTS)
    trace: bool = False  # plain mode: also the beam search, step by step (aiayn.decoding.beam_trace)
    # plain mode: the translation with these heads' outputs zeroed before W^O, beside the one with every head
    # (aiayn.web.ablated); [] takes none out
    without_heads: list[HeadOut] | None = Field(None, max_length=MAX_HEADS_OUT)
    diagnostics: bool = False  # flags and signals of the translation (aiayn.web.diagnosed); native engine
    # what the maps measure: the attention weights, or each key's contribution ||alpha_ij f(x_j)|| with rows
    # normalised to sum to 1 (aiayn.inspect.contributions.maps; Transformer models, with maps)
    measure: Literal["weights", "contributions"] = "weights"


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
    kind: Literal[HEAD_KINDS]
    layer: int = Field(ge=0)
    head: int = Field(ge=0)
    query: int = Field(ge=0)
    # the next-token distribution's temperature, softmax(logits / T), for the last decoder layer's row
    temperature: float = Field(1.0, gt=0, le=100)


class AlternativesRequest(BaseModel):
    """POST /api/alternatives: the answer's source_ids and its target_input_ids up to the position (<s> first)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    source_ids: list[int] = Field(min_length=1, max_length=MAX_SOURCE_TOKENS)
    target_input_ids: list[int] = Field(min_length=1, max_length=MAX_OUTPUT_TOKENS)
    k: int = Field(10, ge=1, le=MAX_K)


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
