"""The Translator: one object behind the Python API, the CLI and the web server."""

import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aiayn.decoding.beam import beam_search
from aiayn.decoding.translate_batch import encode_sources, length_sorted_batches, pad_batch

log = logging.getLogger(__name__)


@dataclass
class Translation:
    text: str
    score: float  # length-normalized log-probability of the best hypothesis
    tokens: list[str]  # target subword pieces (without bos/eos)
    src_tokens: list[str]  # source subword pieces (with the final </s>)
    n_best: list[tuple[str, float]] = field(default_factory=list)
    attention: dict | None = None  # numpy arrays: "cross" (L, H, T, S), "decoder_self" (L, H, T, T), ...


def resolve_model_dir(path: str | Path) -> Path:
    """A checkpoint directory, or a training output directory (average, else best, else latest)."""
    path = Path(path)
    if (path / "model.safetensors").exists():
        return path
    for name in ("average", "best"):
        if (path / name / "model.safetensors").exists():
            return path / name
    if (path / "latest").exists():
        return path / "checkpoints" / (path / "latest").read_text().strip()
    raise FileNotFoundError(f"{path}: neither a checkpoint directory (model.safetensors, config.yaml, "
                            f"tokenizer.model) nor a training output directory; pass --model DIR")


class Translator:
    def __init__(self, model, tokenizer, decode_cfg, device="cpu", model_dir: Path | None = None):
        self.model, self.tokenizer, self.decode_cfg = model.eval(), tokenizer, decode_cfg
        self.device = torch.device(device)
        self.model_dir = model_dir

    @classmethod
    def from_pretrained(cls, path: str | Path, device: str = "cpu", use_ema: bool = False) -> "Translator":
        from aiayn.training.checkpoint import load_checkpoint

        model_dir = resolve_model_dir(path)
        model, cfg, tokenizer = load_checkpoint(model_dir, device, use_ema)
        return cls(model, tokenizer, cfg.decode, device, model_dir)

    @property
    def arch(self) -> str:
        return "rnn" if hasattr(self.model, "encoder") else "transformer"

    def translate(self, sentences: list[str], beam: int | None = None, n_best: int = 1,
                  alpha: float | None = None, return_attention: bool = False,
                  batch_size: int = 64) -> list[Translation]:
        beam = beam or self.decode_cfg.beam
        if n_best > beam:
            raise ValueError(f"n_best={n_best} cannot exceed beam={beam}")
        alpha = self.decode_cfg.length_penalty if alpha is None else alpha
        tok = self.tokenizer
        sources = encode_sources(tok, sentences, self._max_source_len())
        results: list[Translation | None] = [None] * len(sentences)
        for indices in length_sorted_batches([len(s) for s in sources], batch_size):
            src = pad_batch([sources[i] for i in indices], tok.pad_id, self.device)
            with torch.inference_mode():
                nbest = beam_search(self.model, src, tok.bos_id, tok.eos_id, tok.pad_id, beam, alpha,
                                    self.decode_cfg.max_len_a, self.decode_cfg.max_len_b, n_best,
                                    return_attention)
            for row, i in enumerate(indices):
                results[i] = self._result(nbest[row], sources[i], src[row], return_attention)
        return results

    def _max_source_len(self) -> int:
        positional = getattr(self.model, "positional", None)
        table = getattr(positional, "table", getattr(positional, "weight", None))
        return table.size(0) if table is not None else 1024

    def _result(self, hyps, source_ids, src_row, return_attention) -> Translation:
        tok, best = self.tokenizer, hyps[0]
        attention = None
        if return_attention:
            attention = self._attention_maps(best, src_row, len(source_ids))
        n_best = [(tok.decode(h.tokens), h.score) for h in hyps]
        return Translation(text=tok.decode(best.tokens), score=best.score, tokens=tok.id_to_piece(best.tokens),
                           src_tokens=tok.id_to_piece(source_ids), n_best=n_best, attention=attention)

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
