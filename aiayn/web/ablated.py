"""POST /api/translate with "without_heads": the sentence translated with some attention heads taken out
(aiayn.inspect.ablation.heads_removed: each head's output zeroed before W^O), beside its translation with every
head, so that a reader sees what one head does for this sentence: the words that change, the score that moves.

Both searches run on this process's model, one job on the model's thread (the admission gate): the heads are
taken out by hooks on that model for the length of the job, and the job has the thread to itself
(Limits.running is 1), so no other request decodes with them out. The searches ask for the maps
(return_attention), which every native engine decodes with the model in this process: a compiled step and
worker processes hold their own copies of the weights, which the hooks would not reach."""

from aiayn.errors import AiaynError
from aiayn.inspect.ablation import Head, attention_modules, heads_removed
from aiayn.web.limits import HeadOut, Limits, TranslateRequest
from aiayn.web.plain import plain_json, source_length
from aiayn.web.respond import dumps


def checked_heads(model, wanted: list[HeadOut]) -> list[Head]:
    """The heads of `wanted` that this model has, each once, in model order; AiaynError naming the first that
    it lacks (without_heads[i] and its field) and the model's bounds."""
    modules = attention_modules(model)  # refuses a model without layers of heads (an RNN)
    for i, h in enumerate(wanted):
        where = f"without_heads[{i}]"
        if h.kind not in modules or not modules[h.kind]:
            raise AiaynError(f"{where}.kind: this model has no {h.kind} attention; it has "
                             f"{', '.join(k for k in modules if modules[k])}")
        layers = modules[h.kind]
        if h.layer >= len(layers):
            raise AiaynError(f"{where}.layer: {h.layer} is past this model's {len(layers)} {h.kind} layers "
                             f"(counted from 0: 0 to {len(layers) - 1})")
        if h.head >= layers[h.layer].n_heads:
            raise AiaynError(f"{where}.head: {h.head} is past the {layers[h.layer].n_heads} heads of a layer "
                             f"(counted from 0: 0 to {layers[h.layer].n_heads - 1})")
    return sorted({Head(h.kind, h.layer, h.head) for h in wanted})


def _translate(translator, req: TranslateRequest, options):
    """One plain translation of req.text with the request's prefix and constraints (the Translator's result)."""
    return translator.translate([req.text], options=options,
                                target_prefix=[req.target_prefix] if req.target_prefix else None,
                                constraints=[req.constraints] if req.constraints else None)[0]


def _plain(result, n_best: int) -> dict:
    return {**plain_json(result, n_best), "log_prob": result.log_prob, "target_tokens": result.tokens}


def without_heads_json(translator, limits: Limits, req: TranslateRequest) -> bytes:
    """{"translation", "score", "log_prob", "source_tokens", "target_tokens"} with req.without_heads taken out,
    "with_every_head": the same fields of the translation with every head, and "without_heads": the heads
    taken out, each once, in model order."""
    source_length(translator.tokenizer, req.text)
    heads = checked_heads(translator.model, req.without_heads or [])
    options = req.options(limits, attention=True)  # this process's model: see the module's docstring
    every = _translate(translator, req, options)
    with heads_removed(translator.model, heads):
        without = _translate(translator, req, options)
    return dumps({**_plain(without, req.n_best), "source_tokens": without.src_tokens,
                  "with_every_head": _plain(every, req.n_best),
                  "without_heads": [{"kind": h.kind, "layer": h.layer, "head": h.head} for h in heads]}).encode()


def refusal(req: TranslateRequest, attention_maps: bool) -> str | None:
    """Why a request with without_heads cannot run here (one line), or None."""
    if not attention_maps:
        return ("without_heads takes heads out of the native engine's model, and this server runs --engine ct2: "
                "serve with --engine native")
    if req.attention:
        return "without_heads gives plain translations: send \"attention\": false"
    for name in ("trace", "diagnostics", "sampling"):
        if getattr(req, name) not in (False, None):
            return f"without_heads compares two beam searches: drop {name}"
    return None
