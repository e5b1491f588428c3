"""The shapes of the server's answers as pydantic models, declared on each route (`responses=`) so that
/openapi.json and the generated REST reference (docs/reference/rest.md) describe every answer and its status
codes. They describe, they do not serialise: the routes write their JSON as before (the maps one matrix at a
time, aiayn.web.answer), and tests/web validate real answers against these schemas. Fields that depend on the
model (a Transformer's or an RNN's) or on the request are optional; an answer may carry more fields than named
(extra="allow"), as its producers grow."""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from aiayn.inspect.ablation import HEAD_KINDS


class Shape(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(Shape):
    """Every refusal but 422: what was wrong, in words; `code` and `params` where the page words it itself."""

    error: str
    code: str | None = None
    params: dict[str, Any] | None = None


class FieldError(Shape):
    type: str
    loc: list[str | int]
    msg: str


class InvalidRequest(Shape):
    """422: the request does not fit its model; each error names its field (loc) and the rule (msg)."""

    detail: list[FieldError]


class Workers(Shape):
    alive: int
    of: int


class HealthAnswer(Shape):
    status: str  # ok, degraded (a worker process is down) or down (503)
    arch: str
    engine: str
    model: str
    workers: Workers | None = None  # with worker processes (aiayn serve --workers N)


class PageWarning(Shape):
    code: str
    params: dict[str, Any] | None = None


class Alignment(Shape):
    links: str  # "i-j" pairs, as `aiayn translate --alignment` prints them
    layer: int | None = None
    head: int | None = None
    chosen: str | None = None


class Words(Shape):
    source: list[list[Any]]
    target: list[list[Any]]
    target_input: list[list[Any]]


class Signal(Shape):
    value: Any
    threshold: Any
    rule: str
    flag: str
    flagged: bool


class Diagnostics(Shape):
    flags: list[str]
    signals: dict[str, Signal]
    uncovered_words: list[Any]


class PageAnswer(Shape):
    """POST /api/translate with "attention": true (the page's request): every attention map."""

    translation: str
    arch: str
    teacher_forced: bool
    source_tokens: list[str]
    target_tokens: list[str]
    target_input_tokens: list[str]
    source_ids: list[int]
    target_input_ids: list[int]
    score: float | None  # None for a given (teacher-forced) target
    stopped_at_limit: bool
    token_probs: list[float]
    words: Words
    alignment: Alignment | None
    warnings: list[PageWarning]
    diagnostics: Diagnostics | None = None  # with "diagnostics": true
    # with "measure": "contributions" only: the maps are value-norm contributions, rows summing to 1
    measure: Literal["contributions"] | None = None
    maps: dict[str, list[list[list[list[float]]]]]  # {kind: [layer][head][query][key]}


class PlainAnswer(Shape):
    """POST /api/translate with "attention": false."""

    translation: str
    score: float
    source_tokens: list[str] | None = None
    target_tokens: list[str] | None = None
    n_best: list[list[Any]] | None = None  # [translation, score] pairs, with "n_best" > 1
    diagnostics: Diagnostics | None = None  # with "diagnostics": true


class TraceAnswer(Shape):
    """POST /api/translate with "trace": true: the beam search step by step."""

    translation: str
    score: float
    trace: dict[str, Any]


class RemovedHead(Shape):
    kind: Literal[HEAD_KINDS]
    layer: int  # counted from 0
    head: int


class EveryHead(Shape):
    """The translation with every head (as a plain translation)."""

    translation: str
    score: float
    log_prob: float | None = None
    target_tokens: list[str]
    n_best: list[list[Any]] | None = None


class WithoutHeadsAnswer(EveryHead):
    """POST /api/translate with "without_heads": the translation with those heads taken out, and the one with
    every head beside it."""

    source_tokens: list[str]
    with_every_head: EveryHead
    without_heads: list[RemovedHead]  # each once, in model order


class BatchItem(Shape):
    translation: str
    score: float
    n_best: list[list[Any]] | None = None


class BatchAnswer(Shape):
    translations: list[BatchItem]


class Scored(Shape):
    score: float
    log_prob: float
    tokens: list[str]
    token_log_probs: list[float]


class ScoreAnswer(Shape):
    scores: list[Scored]


class LayerStep(Shape):
    norm_first: bool
    n_heads: int
    d_ff: int
    heads: list[list[float]]
    concat: list[float]
    projected: list[float]
    residual_sum: list[float]
    after_attention: list[float]
    after_cross: list[float] | None
    ffn_input: list[float]
    ffn_hidden: list[float]
    ffn_output: list[float]
    layer_output: list[float]
    last_decoder_layer: bool


class AttentionStep(Shape):
    """A Transformer's step: one head's q, K, V, scores, softmax and sum, and the rest of its layer."""

    arch: str
    kind: str
    layer: int
    head: int
    query: int
    d_model: int
    d_k: int
    x_vector: list[float]
    query_vector: list[float]
    keys: list[list[float]]
    values: list[list[float]]
    mask: list[bool]
    dots: list[float | None]
    scores: list[float | None]
    max_score: float
    exps: list[float]
    exp_sum: float
    weights: list[float]
    unscaled_weights: list[float]
    output: list[float]
    value_norms: list[float]  # ||f(x_j)|| = ||v_j W^O_h|| per key
    contributions: list[float]  # alpha_j ||f(x_j)||, the row normalised to sum to 1
    layer_step: LayerStep


class RnnStep(Shape):
    """An RNN's step: score -> alpha -> context -> tanh(W_c[a; s]) -> outputs."""

    arch: str
    query: int
    decoder: str
    d_model: int
    query_vector: list[float]
    keys: list[list[float]]
    mask: list[bool]
    scores: list[float | None]
    weights: list[float]
    context: list[float]
    output_vector: list[float]


class Decode(Shape):
    beam: int
    alpha: float
    length_penalty_form: str


class InfoAnswer(Shape):
    """The model panel: its size, languages, training facts and examples."""

    arch: str
    name: str
    multi_head: bool
    attention_kinds: list[str]
    d_model: int
    parameters: int
    src_vocab_size: int
    tgt_vocab_size: int
    unk_piece: str
    max_source_tokens: int
    max_text: int
    examples: list[Any]
    steps: int | None
    dev_bleu: float | None
    decode: Decode
    engine: str


class PositionsAnswer(Shape):
    kind: str
    d_model: int
    max_len: int
    table: list[list[float]]
    dots: list[list[float]]


class Alternative(Shape):
    id: int
    piece: str
    prob: float
    prefix: str
    exact: bool
    pickable: bool


class AlternativesAnswer(Shape):
    position: int
    alternatives: list[Alternative]


class TimelineSentence(Shape):
    source_tokens: list[str]
    target_input_tokens: list[str]


class TimelineAnswer(Shape):
    steps: list[int]
    sentences: list[TimelineSentence]


class TimelineMaps(Shape):
    step: int
    sentence: int
    maps: dict[str, list[list[list[list[float]]]]]  # {kind: [layer][head][query][key]}


class LibreTranslateRequest(BaseModel):
    """POST /translate, as LibreTranslate takes it: a JSON object, or the same fields form-encoded (urlencoded or
    multipart) or in the query. A refusal is LibreTranslate's: 400 with {"error"}."""

    # read by aiayn.web.libretranslate in LibreTranslate's order and words: this model describes, it validates nothing

    q: str | list[str]  # one text, or a list of texts (JSON only)
    source: str  # the model's source language, or "auto"
    target: str  # the model's target language
    format: Literal["text", "html"] = "text"  # html: the text between tags is translated, the markup kept
    alternatives: int = 0  # other translations per text, from the beam's n-best (text format, one line)
    api_key: str | None = None  # accepted and ignored: this server has no keys


class DetectRequest(BaseModel):
    """POST /detect, as LibreTranslate takes it (JSON, form or query)."""

    q: str | list[str]
    api_key: str | None = None


class Detection(Shape):
    confidence: float  # 0-100
    language: str


class LibreTranslateAnswer(Shape):
    """POST /translate: translatedText is one text or a list, as q was."""

    translatedText: str | list[str]
    detectedLanguage: Detection | list[Detection] | None = None  # with "source": "auto"
    alternatives: list[str] | list[list[str]] | None = None  # with "alternatives" > 0


class Language(Shape):
    """An entry of GET /languages: a language and the languages it translates into."""

    code: str
    name: str
    targets: list[str]


REFUSED = {400: "the request cannot be served (its words say why)",
           404: "no such step or sentence",
           422: "the request does not fit its model",
           503: "the server is busy (Retry-After), out of time for this request, or without its workers",
           500: "a fault of the server (details in its log)"}


def responses(answer, *refusals: int) -> dict:
    """FastAPI's `responses=` of a route: `answer` (a model, or a union of models) for 200, ErrorBody (422:
    InvalidRequest) for each status in `refusals`."""
    declared = {200: {"model": answer, "description": "the answer"}}
    for status in refusals:
        declared[status] = {"model": InvalidRequest if status == 422 else ErrorBody, "description": REFUSED[status]}
    return declared
