"""POST /api/score: the log-probability of given translations (Translator.score, teacher forcing) within the
server's bounds: at most as many pairs as a translate_batch request has texts, each source within the
server's source subwords and each target (with </s>) within its output subwords."""

import json

from aiayn.decoding.options import DecodeOptions
from aiayn.errors import AiaynError


def score_json(translator, sources: list[str], targets: list[str], *, alpha: float | None,
               length_penalty_form: str | None, max_source_tokens: int, max_output_tokens: int,
               batch_size: int) -> bytes:
    """{"scores": [{"score", "log_prob", "tokens", "token_log_probs"}, ...]} in input order."""
    if len(sources) != len(targets):
        raise AiaynError(f"{len(sources)} sources but {len(targets)} targets: give one target per source")
    tok = translator.tokenizer
    for i, (source, target) in enumerate(zip(sources, targets)):
        n_source = len(tok.encode_source([source])[0]) + 1
        if n_source > max_source_tokens:
            raise AiaynError(f"sources[{i}]: {n_source} subword tokens with </s>; this server takes at most "
                             f"{max_source_tokens}: shorten it")
        n_target = len(tok.encode_target([target])[0]) + 1
        if n_target > max_output_tokens:
            raise AiaynError(f"targets[{i}]: {n_target} subword tokens with </s>; this server scores at most "
                             f"{max_output_tokens}: shorten it")
    options = DecodeOptions(alpha=alpha, length_penalty_form=length_penalty_form, batch_size=batch_size)
    scores = translator.score(sources, targets, options)
    return json.dumps({"scores": [s.as_dict() for s in scores]}, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()
