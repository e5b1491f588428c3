"""The page's translation answer (POST /api/translate with maps): the model's own translation, or the maps
of a given target (teacher forcing, as `aiayn attention --target`); the word groups of every token list
(aiayn.inspect.maps.capture.word_groups: the page merges words with them, it has no rule of its own); the
probability of every output token; the word alignment of the maps (aiayn.web.alignment, what `aiayn
translate --alignment` prints); and warnings, each a code and its numbers, which the page words in its own
language. With "measure": "contributions" the maps (and the alignment read from them) are the value-norm maps
||alpha_ij f(x_j)|| with rows normalised to sum to 1, as `aiayn attention --measure contributions` draws them,
and the answer says so ("measure"); a weights answer has no "measure" field. Written as JSON on the model's
thread, the maps one matrix at a time."""

import numpy as np
import torch

from aiayn.decoding.batches import encode_sources
from aiayn.errors import AiaynError
from aiayn.inspect.contributions.maps import contribution_maps
from aiayn.inspect.maps.capture import capture, maps_of, word_groups
from aiayn.inspect.quality.warnings import input_warnings
from aiayn.web.alignment import DEFAULT_HEAD, AlignmentHead, alignment_json
from aiayn.web.diagnosed import with_diagnostics
from aiayn.web.limits import DECIMALS, MAX_OUTPUT_TOKENS, MAX_SOURCE_TOKENS, VALUE_BYTES, Limits, TranslateRequest
from aiayn.web.plain import source_length
from aiayn.web.respond import dumps


def _search_or_force(translator, text, options, target, target_prefix):
    """-> (AttentionMaps, source ids, score, stopped at the length limit, source cut)."""
    tok = translator.tokenizer
    if target.strip():  # teacher forcing, as `aiayn attention --target`
        if target_prefix:
            raise AiaynError("give a target (its maps) or a target prefix (a translation that starts with it), "
                             "not both")
        return capture(translator, text, target=target), encode_sources(tok, [text])[0], None, False, False
    result = translator.translate([text], options=options, target_prefix=[target_prefix])[0]
    src_ids = [tok.source_piece_to_id(p) for p in result.src_tokens]
    return maps_of(result, translator), src_ids, result.score, result.stopped_at_limit, result.truncated


def page_result(translator, text: str, options, target: str, target_prefix: str, langs=(None, None),
                alignment: AlignmentHead = DEFAULT_HEAD, measure: str = "weights") -> tuple[dict, dict]:
    """-> (the answer's fields, the maps {kind: (L, H, Q, K)}). langs: the model's (source, target);
    alignment: the head the word alignment comes from; measure: "weights" or "contributions" (the maps'
    and the alignment's)."""
    tok = translator.tokenizer
    maps, src_ids, score, stopped, cut = _search_or_force(translator, text, options, target, target_prefix)
    if measure == "contributions":
        maps = contribution_maps(translator, maps)
    target_ids = [tok.piece_to_id(p) for p in maps.target_tokens]
    groups = {name: word_groups(tokens) for name, tokens in (
        ("source", maps.source_tokens), ("target", maps.target_tokens), ("target_input", maps.target_input_tokens))}
    fields = {"translation": maps.translation, "arch": translator.arch, "teacher_forced": bool(target.strip()),
              "source_tokens": maps.source_tokens, "target_tokens": maps.target_tokens,
              "target_input_tokens": maps.target_input_tokens, "source_ids": src_ids,
              "target_input_ids": [tok.bos_id] + target_ids[:-1], "score": score, "stopped_at_limit": stopped,
              "token_probs": token_probs(translator.model, tok.bos_id, src_ids, target_ids), "words": groups,
              "alignment": alignment_json(maps, alignment),
              "warnings": warnings(translator, maps.source_tokens, text, stopped, cut, langs)}
    if measure == "contributions":
        fields["measure"] = measure
    return fields, maps.maps


@torch.no_grad()
def token_probs(model, bos_id: int, src_ids: list[int], target_ids: list[int]) -> list[float]:
    """p(y_t | y_<t, x) of every target token (</s> included), teacher-forced: the model's own numbers."""
    device = next(model.parameters()).device
    src = torch.tensor([src_ids], device=device)
    tgt_in = torch.tensor([[bos_id] + target_ids[:-1]], device=device)
    log_probs = torch.log_softmax(model(src, tgt_in).float(), dim=-1)[0]
    picked = log_probs[torch.arange(len(target_ids)), torch.tensor(target_ids, device=device)]
    return [round(float(p), 6) for p in picked.exp()]


def warnings(translator, source_tokens: list[str], text: str, stopped: bool, cut: bool, langs) -> list[dict]:
    return input_warnings(translator.tokenizer, source_tokens, text, stopped=stopped, cut=cut,
                          max_positions=translator.max_positions, langs=langs)


def translate_json(translator, limits: Limits, req: TranslateRequest, langs=(None, None),
                   alignment: AlignmentHead = DEFAULT_HEAD) -> bytes:
    """One translation (or the maps of req.target) within the budget -> the JSON the page needs.
    Serialised here, on the worker thread: megabytes of floats serialised on the event loop would stall
    every other request."""
    source_length(translator.tokenizer, req.text)
    if req.sampling is not None:
        raise AiaynError("sampling gives plain translations: send \"attention\": false")
    if req.measure == "contributions" and not translator.model.multi_head:
        raise AiaynError("measure \"contributions\" needs a Transformer's layers of heads; this model's one "
                         "attention map has weights only: leave measure out")
    fields, maps = page_result(translator, req.text, req.options(limits, attention=True), req.target,
                               req.target_prefix, langs, alignment, req.measure)
    if req.diagnostics:
        fields = with_diagnostics(translator, req.text, fields)
    return f'{dumps(fields)[:-1]},"maps":{_maps_json(maps)}}}'.encode()


def _rounded(weights: np.ndarray) -> list:
    # float64 first: a rounded float32 prints as 0.12300000339746475, not 0.123
    return np.asarray(weights, dtype=np.float64).round(DECIMALS).tolist()


def _maps_json(maps: dict) -> str:
    """{kind: [layer][head][query][key]}, serialised one (query x key) matrix at a time: json.dumps holds
    the GIL until it returns, and short holds (about 2 ms for 128 x 128) let the event loop answer
    /api/health in between; the whole answer at once holds it for tens of milliseconds."""
    kinds = []
    for kind, array in maps.items():  # (L, H, Q, K)
        layers = ["[" + ",".join(dumps(_rounded(matrix)) for matrix in layer) + "]" for layer in array]
        kinds.append(f"{dumps(kind)}:[{','.join(layers)}]")
    return "{" + ",".join(kinds) + "}"


def max_response_bytes(translator, max_output_tokens: int = MAX_OUTPUT_TOKENS) -> int:
    """An upper bound of a /api/translate answer's size: every map at its largest (S = MAX_SOURCE_TOKENS,
    T = max_output_tokens), every weight at its longest, each row's brackets; the subwords and the
    translation at the vocabulary's longest subword, 6 bytes a character (an escaped one); ids; 1 KB."""
    S, T, model = MAX_SOURCE_TOKENS, max_output_tokens, translator.model
    n_values = n_rows = 0
    for kind in model.attention_kinds:  # encoder self (S x S), decoder self (T x T), cross (T x S)
        layers, heads = model.attention_shape(kind)
        queries, keys = (S, S) if kind == "encoder_self" else (T, T) if kind == "decoder_self" else (T, S)
        n_values += layers * heads * queries * keys
        n_rows += layers * heads * queries
    tok = translator.tokenizer
    pieces = tok.id_to_piece(list(range(tok.tgt_vocab_size))) + tok.source_id_to_piece(list(range(tok.src_vocab_size)))
    longest = max(len(piece) for piece in pieces)
    text = (S + 3 * T) * (6 * longest + 3)  # source, target, target input subwords; the translation
    links = len(f"{S}-{T} ") * T  # the word alignment: at most one link per output word
    return VALUE_BYTES * n_values + 2 * n_rows + text + 8 * (S + T) + links + 1024
