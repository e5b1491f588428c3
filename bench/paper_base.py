"""Paper-base size for bench/decode_speed.py: a model of the paper's base size (d_model 512, 6+6 layers,
d_ff 2048, 8 heads) with a 16k joint vocabulary trained on Multi30k's training text, untrained weights
(seed 0). Both engines are held to the same number of decoding steps per sentence (min length = max
length), so untrained weights do the same work as trained ones. Also: the matmul FLOPs of that work, and
the machine's peak matmul rate per dtype and thread count, for each layout's share of the peak.

    python bench/paper_base.py --out DIR --data-dir ../shared/data/multi30k    # makes the model only
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

VOCAB = 16000
PEAK_SIZE = 2048  # one (2048 x 2048) x (2048 x 2048) product: large enough for every kernel's best rate


def make_model(out: Path, data_dir: str | None, vocab: int = VOCAB) -> Path:
    """The paper-base checkpoint directory at `out` (made once; an existing one is kept)."""
    if (out / "config.yaml").exists():
        return out
    if out.exists() and (not out.is_dir() or any(out.iterdir())):  # never written over: a user's file or folder
        raise SystemExit(f"--paper-base {out}: exists and holds no model (no config.yaml); give a new directory, "
                         f"or one this bench made before")
    import torch

    from aiayn.checkpoint import save_checkpoint
    from aiayn.config import load_config
    from aiayn.data import multi30k
    from aiayn.data.corpus import read_parallel
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.model import ModelConfig, build_model

    pairs = read_parallel(*multi30k.pair_paths("train", "de", "en", data_dir))
    tokenizer = Tokenizer.train([s for p in pairs for s in p], vocab_size=vocab)
    cfg = load_config(None, [])
    cfg.model = ModelConfig.preset("paper-base", src_vocab_size=tokenizer.vocab_size,
                                   tgt_vocab_size=tokenizer.vocab_size, pad_id=tokenizer.pad_id, dropout=0.0)
    torch.manual_seed(0)
    save_checkpoint(out, build_model(cfg.model), cfg, tokenizer)
    return out


def matmul_flops(model_dir: str, source_lengths: list[int], steps: int, beam: int) -> float:
    """FLOPs of the products by weights (2 per multiply-add) to translate sources of these lengths with
    `steps` decoding steps of `beam` rows each: encoder layers over every source token, each decoder
    layer's cross-attention K/V once per source token, and per decoding step and row the decoder layers'
    products and the output layer. The attention products QK^T and softmax x V are left out (under 3% at
    these lengths)."""
    import yaml

    m = yaml.safe_load((Path(model_dir) / "config.yaml").read_text())["model"]
    D, F, V = m["d_model"], m["d_ff"], m["tgt_vocab_size"]
    encoder_token = m["n_encoder_layers"] * (4 * D * D + 2 * D * F)
    cross_kv_token = m["n_decoder_layers"] * 2 * D * D
    decoder_row = m["n_decoder_layers"] * (4 * D * D + 2 * D * D + 2 * D * F) + D * V
    tokens = sum(source_lengths)
    return 2.0 * (tokens * (encoder_token + cross_kv_token) + len(source_lengths) * steps * beam * decoder_row)


def _peak_worker(dtype: str, threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    n = PEAK_SIZE
    if dtype == "int8":
        a = torch.randint(-100, 100, (n, n), dtype=torch.int8)
        b = torch.randint(-100, 100, (n, n), dtype=torch.int8)
        return 2.0 * n ** 3 / _best_time(lambda: torch._int_mm(a, b))
    kind = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    a, b = torch.randn(n, n, dtype=kind), torch.randn(n, n, dtype=kind)
    packed = torch.ops.mkldnn._reorder_linear_weight(b)  # oneDNN's product with a packed weight, as decoding's
    onednn = lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], "")  # noqa: E731
    # the faster of torch's matmul (MKL, slower on AMD CPUs) and oneDNN's: the machine's peak is the best kernel's
    return 2.0 * n ** 3 / min(_best_time(lambda: a @ b), _best_time(onednn))


def _best_time(product) -> float:
    product()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        product()
        best = min(best, time.perf_counter() - start)
    return best


def peak_rate(dtype: str, threads: int) -> float:
    """The machine's matmul rate (FLOP/s) for one large product of `dtype` on `threads` threads, measured
    in a process of its own (best of 5)."""
    out = subprocess.run([sys.executable, __file__, "--peak", dtype, "--threads", str(threads)],
                         capture_output=True, text=True, check=True).stdout
    return float(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", help="make the paper-base model directory here")
    p.add_argument("--data-dir")
    p.add_argument("--peak", help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.peak:
        print(json.dumps(_peak_worker(args.peak, args.threads)))
    elif args.out:
        print(make_model(Path(args.out), args.data_dir))


if __name__ == "__main__":
    main()
