"""Plain translations (no maps): POST /api/translate with "attention": false, POST /api/translate_batch, and
the plain modes that run on the model's thread (a trace, diagnostics).

Plain translations are batched (aiayn.web.batching): the sentences of concurrent requests with the same
options are decoded in one Translator.translate call of at most MAX_BATCH sentences and MAX_BATCH_WORK
source subwords x beam. Every text is checked before any is queued, so one sentence's user error reaches
only its own request."""

from collections.abc import Callable
from functools import partial

from aiayn.decoding.translator import Translation
from aiayn.errors import AiaynError
from aiayn.web.batching import Batcher
from aiayn.web.diagnosed import plain_diagnosed
from aiayn.web.limits import MAX_SOURCE_TOKENS, BatchKey, DecodingControls, Limits, TranslateRequest
from aiayn.web.respond import CodedError, dumps


def source_length(tokenizer, text: str, blank_ok: bool = False, where: str = "") -> int:
    """The checks of a text before it is decoded -> its number of source subwords, </s> included."""
    if not text.strip() and not blank_ok:
        raise CodedError(f"{where}the text is empty; give some text to translate", "empty")
    n_source = len(tokenizer.encode_source([text])[0]) + 1  # with </s>
    if n_source > MAX_SOURCE_TOKENS:
        raise CodedError(f"{where}the text is {n_source} subword tokens (with </s>); this server takes at most "
                         f"{MAX_SOURCE_TOKENS}: shorten it", "too_many_tokens", n=n_source, max=MAX_SOURCE_TOKENS)
    return n_source


def decode_plain(translator, model_pool, key: BatchKey, items: list[tuple[str, str]]) -> list:
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


async def translate_plain(batcher: Batcher, translator, limits: Limits, req: DecodingControls, texts: list[str],
                          prefixes: list[str], batch: bool, constraints: list[list[str]] | None = None) -> bytes:
    """Plain translations of `texts` through the batcher -> the JSON of /api/translate (one text,
    attention false) or of /api/translate_batch. Every text is checked before any is queued."""
    where = (lambda i: f"texts[{i}]: ") if batch else (lambda i: "")
    results = await plain_results(batcher, translator, limits, req, texts, prefixes, where=where, blank_ok=batch,
                                  constraints=constraints)
    if batch:
        return dumps({"translations": [plain_json(r, req.n_best) for r in results]}).encode()
    r = results[0]
    return dumps({**plain_json(r, req.n_best), "source_tokens": r.src_tokens, "target_tokens": r.tokens}).encode()


async def plain_results(batcher: Batcher, translator, limits: Limits, req: DecodingControls, texts: list[str],
                        prefixes: list[str], *, where: Callable[[int], str], blank_ok: bool,
                        constraints: list[list[str]] | None = None) -> list[Translation]:
    """Plain translations of `texts` through the batcher, in order. Every text is checked before any is queued;
    where(i) names text i in an error ("texts[3]: "); blank_ok: a blank text translates to "" (else 400)."""
    if req.sampling is not None and (getattr(req, "attention", False) or any(prefixes)):
        raise AiaynError("sampling draws one plain translation per text: send \"attention\": false and no "
                         "target prefix")
    key = req.batch_key(limits)
    translator.resolve(key.options)  # refused here, not in a batch (e.g. ct2 with early_stopping false)
    tokenizer = translator.tokenizer
    lengths = [source_length(tokenizer, text, blank_ok=blank_ok, where=where(i)) for i, text in enumerate(texts)]
    if len(prefixes) != len(texts):
        raise AiaynError(f"target_prefixes has {len(prefixes)} entries for {len(texts)} texts: give one per text "
                         f"(\"\" for none)")
    for i, prefix in enumerate(prefixes):
        if len(tokenizer.encode_target([prefix])[0]) >= limits.max_output_tokens:
            raise AiaynError(f"{where(i)}the target prefix is longer than this server's outputs "
                             f"({limits.max_output_tokens} subwords with </s>): shorten it")
    beam = 1 if req.sampling is not None else (req.beam or translator.decode_cfg.beam)
    constraints = _checked_constraints(translator, key, texts, prefixes, constraints)
    return await batcher.translate(key, list(zip(texts, prefixes, constraints)), [n * beam for n in lengths])


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


def diagnosed_json(translator, limits: Limits, req: TranslateRequest) -> bytes:
    """A plain translation and its diagnostics (searched with maps, on the model's thread)."""
    source_length(translator.tokenizer, req.text)
    r = plain_diagnosed(translator, req.text, req.options(limits), req.target_prefix)
    return dumps({**plain_json(r, req.n_best), "source_tokens": r.src_tokens, "target_tokens": r.tokens,
                  "diagnostics": r.diagnostics}).encode()


def trace_json(translator, limits: Limits, req: TranslateRequest) -> bytes:
    """/api/translate with "trace": the translation and its beam search step by step."""
    source_length(translator.tokenizer, req.text)
    trace = translator.trace(req.text, req.options(limits), target_prefix=req.target_prefix or None,
                             constraints=req.constraints or None)
    best = trace.replay()[0]
    # "ranked": every finished hypothesis's [step, index] in the search's order: the page lists them so,
    # without a ranking rule of its own
    answer = {**trace.to_dict(), "ranked": [list(p) for p in trace.ranked()]}
    return dumps({"translation": best.text, "score": best.score, "trace": answer}).encode()


def plain_json(result, n_best: int) -> dict:
    """translation and score; with n_best > 1 also "n_best": [[text, score], ...], best first."""
    plain = {"translation": result.text, "score": result.score}
    return plain if n_best == 1 else {**plain, "n_best": [list(pair) for pair in result.n_best]}
