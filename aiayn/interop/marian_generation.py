"""The decode settings of an imported Marian model: every setting transformers' generate() would take from
the checkpoint's generation config (generation_config.json, or config.json in older directories) becomes
the model's own decode setting (config.yaml's decode section), or is named in one warning at import.

Applied (transformers' default where the config sets none):
- num_beams (1) -> decode.beam; length_penalty (1.0) -> decode.length_penalty, with the "hf" form |Y|^alpha;
  early_stopping (false) -> decode.early_stopping;
- max_new_tokens, else max_length (20) -> the length limit: decode.max_len_a = 0, decode.max_len_b = the
  tokens generate() may produce (max_length counts the decoder's start token, max_new_tokens does not);
- min_length (0, counting the start token) and min_new_tokens -> decode.min_length;
- no_repeat_ngram_size (0) -> decode.no_repeat_ngram_size;
- bad_words_ids that ban only <pad>: aiayn never outputs <pad>.
Named (aiayn has no such control): repetition_penalty, forced_bos_token_id, forced_eos_token_id (generate
forces </s> at the length limit; aiayn ends there without it), other bad_words_ids, early_stopping "never",
sampling (do_sample), and any other setting that differs from transformers' default.
"""

import logging

log = logging.getLogger(__name__)

# transformers' defaults for what a generation config leaves unset (GenerationConfig's global defaults)
DEFAULTS = {"max_length": 20, "min_length": 0, "do_sample": False, "early_stopping": False, "num_beams": 1,
            "temperature": 1.0, "top_k": 50, "top_p": 1.0, "typical_p": 1.0, "repetition_penalty": 1.0,
            "length_penalty": 1.0, "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
            "num_return_sequences": 1, "encoder_repetition_penalty": 1.0, "num_beam_groups": 1,
            "diversity_penalty": 0.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "remove_invalid_values": False,
            "renormalize_logits": False}
APPLIED = {"num_beams", "length_penalty", "early_stopping", "max_length", "max_new_tokens", "min_length",
           "min_new_tokens", "no_repeat_ngram_size", "bad_words_ids"}
# what changes no output: token ids aiayn reads from the tokenizer, what generate() returns, caching
INERT = {"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id", "transformers_version",
         "_from_model_config", "use_cache", "cache_implementation", "output_scores", "output_logits",
         "output_attentions", "output_hidden_states", "return_dict_in_generate", "num_return_sequences"}
SAMPLING = {"temperature", "top_k", "top_p", "typical_p", "epsilon_cutoff", "eta_cutoff", "min_p"}
WHY = {"repetition_penalty": "aiayn has no repetition penalty",
       "forced_bos_token_id": "aiayn forces no first token (give a target prefix when translating)",
       "forced_eos_token_id": "generate() forces </s> at its length limit; aiayn ends there without it",
       "bad_words_ids": "aiayn bans no words but <pad>",
       "early_stopping": "aiayn's early stopping is true or false",
       "do_sample": "an imported model decodes with beam search; sample with --sample"}


def _value(generation, key):
    value = getattr(generation, key, None)
    return DEFAULTS.get(key) if value is None else value


def _is_int(value, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def apply_generation(decode, generation, pad_id: int, where: str) -> list[str]:
    """Set `decode` (a DecodeConfig) from transformers' GenerationConfig `generation`; return the settings
    it could not apply, each as "name=value (why)", and log them in one warning naming `where`."""
    decode.length_penalty_form = "hf"
    beams, alpha, early = (_value(generation, k) for k in ("num_beams", "length_penalty", "early_stopping"))
    decode.beam = beams if _is_int(beams, 1) else 1
    decode.length_penalty = float(alpha) if isinstance(alpha, (int, float)) and 0 <= alpha <= 10 else 1.0
    named = []
    if isinstance(early, bool):
        decode.early_stopping = early
    else:  # "never": transformers' strictest search
        named.append(f"early_stopping={early!r} ({WHY['early_stopping']})")
    _apply_lengths(decode, generation)
    no_repeat = _value(generation, "no_repeat_ngram_size")
    decode.no_repeat_ngram_size = no_repeat if _is_int(no_repeat, 0) else 0
    bad = getattr(generation, "bad_words_ids", None)
    if bad and any(list(ids) != [pad_id] for ids in bad):
        named.append(f"bad_words_ids={bad!r} ({WHY['bad_words_ids']})")
    named += _unsupported(generation)
    if named:
        log.warning("%s: generation settings aiayn cannot apply, ignored: %s", where, "; ".join(named))
    return named


def _apply_lengths(decode, generation) -> None:
    """generate()'s limit counts the decoder's start token in max_length and min_length, not in the *_new_ones."""
    max_new = getattr(generation, "max_new_tokens", None)
    limit = max_new if _is_int(max_new, 1) else _value(generation, "max_length") - 1
    if _is_int(limit, 1):
        decode.max_len_a, decode.max_len_b = 0.0, limit
    min_length = _value(generation, "min_length")
    min_new = getattr(generation, "min_new_tokens", None)
    decode.min_length = max(min_length - 1 if _is_int(min_length, 1) else 0, min_new if _is_int(min_new, 0) else 0)


def _unsupported(generation) -> list[str]:
    """Every other setting that differs from transformers' default and would change generate()'s output."""
    settings = generation.to_diff_dict() if hasattr(generation, "to_diff_dict") else {}
    sampling = bool(_value(generation, "do_sample"))
    named = []
    for key in sorted(settings):
        value = settings[key]
        if key in APPLIED or key in INERT or key.startswith("_") or value is None or value == DEFAULTS.get(key):
            continue
        if key in SAMPLING and not sampling:  # generate() reads them only when it samples
            continue
        if key in ("watermarking_config", "compile_config") and not value:
            continue
        why = WHY.get(key, "aiayn has no such setting")
        named.append(f"{key}={value!r} ({why})")
    return named
