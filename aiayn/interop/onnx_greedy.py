"""Greedy translation over an export-onnx directory with onnxruntime and numpy only: the loop a runtime in
another language follows (aiayn.interop.onnx_export's README.md says it in words), and the check that the
graphs translate as aiayn does."""

import json
from pathlib import Path

import numpy as np

from aiayn.errors import AiaynError
from aiayn.interop.onnx_export import FACTS


class OnnxGreedy:
    """The two graphs of an export-onnx directory: translate source ids greedily, as aiayn's greedy search."""

    def __init__(self, *, directory: str | Path):
        try:
            import onnxruntime
        except ImportError as err:
            raise AiaynError(f"running an ONNX export needs onnxruntime: pip install 'aiayn[onnx]' ({err})") from None
        directory = Path(directory)
        self.facts = json.loads((directory / FACTS).read_text(encoding="utf-8"))
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # the runtime's notes on unused initializers: not the user's concern
        self.encoder = onnxruntime.InferenceSession(str(directory / self.facts["encoder"]), options)
        self.decoder = onnxruntime.InferenceSession(str(directory / self.facts["decoder"]), options)

    def max_output_len(self, source_len: int) -> int:
        """a * |src| + b (|src| with its </s>), at most max_positions, at least 1."""
        f = self.facts
        return max(1, min(int(source_len * f["max_len_a"] + f["max_len_b"]), f["max_positions"]))

    def encode(self, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """src (B, S) int64 -> memory (B, S, D), encoder_self (B, L, H, S, S)."""
        memory, encoder_self = self.encoder.run(None, {"src": src})
        return memory, encoder_self

    def decode(self, src: np.ndarray, memory: np.ndarray, tgt_in: np.ndarray) -> tuple[np.ndarray, ...]:
        """-> logits (B, T, V), decoder_self (B, L, H, T, T), cross (B, L, H, T, S)."""
        logits, decoder_self, cross = self.decoder.run(None, {"src": src, "memory": memory, "tgt_in": tgt_in})
        return logits, decoder_self, cross

    def translate_ids(self, source: list[int]) -> list[int]:
        """One source (its ids and the final </s>) -> the output ids, without <s> and </s>."""
        f = self.facts
        src = np.asarray([source], dtype=np.int64)
        memory, _ = self.encode(src)
        tokens = [f["bos_id"]]
        for _ in range(self.max_output_len(len(source))):
            logits = self.decode(src, memory, np.asarray([tokens], dtype=np.int64))[0][0, -1]  # (V,)
            logits[f["forbidden_outputs"]] = -np.inf
            token = int(np.argmax(logits))  # the argmax of the logits is that of the log-probs
            if token == f["eos_id"]:
                break
            tokens.append(token)
        return tokens[1:]
