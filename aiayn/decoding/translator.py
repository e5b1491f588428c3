"""The Translator: one object behind the Python API, the CLI and the web server."""

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aiayn.decoding.beam import LP_FORMS, beam_search
from aiayn.decoding.translate_batch import encode_sources, length_sorted_batches, max_positions, pad_batch
from aiayn.errors import AiaynError

log = logging.getLogger(__name__)


@dataclass
class Translation:
    text: str
    score: float  # length-normalized log-probability of the best hypothesis
    tokens: list[str]  # target subword pieces (without bos/eos)
    src_tokens: list[str]  # source subword pieces (with the final </s>)
    n_best: list[tuple[str, float]] = field(default_factory=list)
    attention: dict | None = None  # numpy arrays: "cross" (L, H, T, S), "decoder_self" (L, H, T, T), ...
    truncated: bool = False  # the source was longer than the model's maximum and was cut


MAX_ALPHA = 10.0  # ((5 + |Y|) / 6) ** alpha overflows a float for large alpha; useful values are below 2


def _check_int(name: str, value, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise AiaynError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise AiaynError(f"{name}={value} must be {bound}")


def check_options(beam: int, n_best: int, alpha: float, batch_size: int) -> None:
    """The decoding options of every entry point (API, CLI, server), checked in one place."""
    _check_int("beam", beam, 1)
    _check_int("n_best", n_best, 1, beam)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= MAX_ALPHA:
        raise AiaynError(f"alpha (length penalty) must be a number in [0, {MAX_ALPHA:g}], got {alpha!r}")
    _check_int("batch_size", batch_size, 1)


def check_sentences(sentences) -> None:
    """A list of text strings, each encodable as UTF-8 (argv and JSON can carry lone surrogates from
    bytes that were not UTF-8)."""
    if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences):
        raise AiaynError("sentences must be a list of strings")
    for number, sentence in enumerate(sentences, start=1):
        try:
            sentence.encode("utf-8")
        except UnicodeEncodeError as err:
            raise AiaynError(f"sentence {number}: not valid UTF-8 text (character {err.start + 1}); "
                             f"re-encode the input as UTF-8, e.g. iconv -t UTF-8") from None


class Translator:
    def __init__(self, model, tokenizer, decode_cfg, device="cpu", model_dir: Path | None = None):
        self.model, self.tokenizer, self.decode_cfg = model.eval(), tokenizer, decode_cfg
        self.device = torch.device(device)
        self.model_dir = model_dir

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str = "cpu", use_ema: bool = False) -> "Translator":
        from aiayn.checkpoint import load_checkpoint, resolve_model_dir
        from aiayn.device import resolve_device

        device = resolve_device(device)
        model_dir = resolve_model_dir(path)
        model, cfg, tokenizer = load_checkpoint(model_dir, device, use_ema)
        return cls(model, tokenizer, cfg.decode, device, model_dir)

    @property
    def arch(self) -> str:
        return "rnn" if hasattr(self.model, "encoder") else "transformer"

    def translate(self, sentences: list[str], beam: int | None = None, n_best: int = 1,
                  alpha: float | None = None, return_attention: bool = False,
                  batch_size: int = 64, *, max_output_len: int | None = None,
                  time_limit: float | None = None, length_penalty_form: str | None = None) -> list[Translation]:
        """Beam-search translations, in input order. max_output_len caps every output's length (tokens);
        time_limit (seconds) bounds the whole call: past it, BudgetExceeded. length_penalty_form: "gnmt"
        or "hf" (default: the model's decode.length_penalty_form; see aiayn.decoding.beam)."""
        beam = self.decode_cfg.beam if beam is None else beam
        alpha = self.decode_cfg.length_penalty if alpha is None else alpha
        form = self.decode_cfg.length_penalty_form if length_penalty_form is None else length_penalty_form
        if form not in LP_FORMS:
            raise AiaynError(f"length_penalty_form must be one of {', '.join(LP_FORMS)}, got {form!r}")
        check_options(beam, n_best, alpha, batch_size)
        check_sentences(sentences)
        if max_output_len is not None:
            _check_int("max_output_len", max_output_len, 1)
        deadline = None if time_limit is None else time.monotonic() + time_limit
        tok, limit = self.tokenizer, self.max_positions
        if max_output_len is None or max_output_len > limit:
            max_output_len = limit  # decoding step t reads target position t
        # A blank line translates to a blank line: the model would invent a sentence for a lone </s>.
        results: list[Translation] = [Translation(text="", score=0.0, tokens=[], src_tokens=[], n_best=[("", 0.0)])
                                      for _ in sentences]
        filled = [i for i, s in enumerate(sentences) if s.strip()]
        sources = encode_sources(tok, [sentences[i] for i in filled])
        truncated = [len(s) > limit for s in sources]
        sources = [s[: limit - 1] + [tok.eos_id] if cut else s for s, cut in zip(sources, truncated)]
        for indices in length_sorted_batches([len(s) for s in sources], batch_size):
            src = pad_batch([sources[i] for i in indices], tok.pad_id, self.device)
            with torch.inference_mode():
                nbest = beam_search(self.model, src, tok.bos_id, tok.eos_id, tok.pad_id, beam, alpha,
                                    self.decode_cfg.max_len_a, self.decode_cfg.max_len_b, n_best,
                                    return_attention, max_output_len, deadline, lp_form=form)
            for row, i in enumerate(indices):
                results[filled[i]] = self._result(nbest[row], sources[i], src[row], return_attention)
                results[filled[i]].truncated = truncated[i]
        return results

    @property
    def max_positions(self) -> int:
        """The longest source (with </s>) and output the model takes: its position table's size."""
        return max_positions(self.model) or 1024

    def _result(self, hyps, source_ids, src_row, return_attention) -> Translation:
        tok, best = self.tokenizer, hyps[0]
        attention = None
        if return_attention:
            attention = self._attention_maps(best, src_row, len(source_ids))
        n_best = [(tok.decode(h.tokens), h.score) for h in hyps]
        return Translation(text=tok.decode(best.tokens), score=best.score, tokens=tok.id_to_piece(best.tokens),
                           src_tokens=tok.source_id_to_piece(source_ids), n_best=n_best, attention=attention)

    def _attention_maps(self, best, src_row, src_len) -> dict:
        """Maps of the best hypothesis: cross and decoder self from the search (cached decoding),
        encoder self from one encoder pass of this sentence alone."""
        maps = {k: v[..., :src_len].float().cpu().numpy() if k == "cross" else v.float().cpu().numpy()
                for k, v in best.attention.items()}
        with torch.inference_mode():
            _, encoder_maps = self.model.encode(src_row[None, :src_len], return_attention=True)
        if isinstance(encoder_maps, torch.Tensor):
            maps["encoder_self"] = encoder_maps[0].float().cpu().numpy()
        return maps
