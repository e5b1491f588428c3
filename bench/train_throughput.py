"""Training throughput: aiayn's Transformer vs torch.nn.Transformer of the same size, same run.

Both models get the same token embeddings (x sqrt(d_model), tied with the output projection), the same
sinusoidal positions, vocabulary, batches (padded, varied lengths), dropout, label smoothing 0.1 and
Adam (fused, betas 0.9/0.98, eps 1e-9). aiayn trains as its trainer does (TrainingObjective: logits only
at target tokens, the projection fused into the loss). The usual peer computes logits at every position
and torch's cross_entropy(label_smoothing=0.1, ignore_index=pad); the second peer is given aiayn's first
trick, logits only at target tokens, with the same torch loss. Steps of the models are interleaved so
machine noise hits all alike. Prints target tokens/s, the ratios, and the model FLOP utilization (MFU):
the matmul FLOPs of one step (x3 for forward and backward; padding included in the layers, the output
projection at target tokens only) per second, over the GFLOP/s of one large matmul measured here in
the same dtype and threads.

    python bench/train_throughput.py [--d-model 128 --layers 4 --d-ff 512 --heads 4 --vocab 10000]
    python bench/train_throughput.py --paper-base     # d_model 512, 6+6 layers, d_ff 2048, 8 heads, V 37000
"""

import argparse
import math
import time

import torch
from torch import nn

from aiayn.cpu import prepare_for_cpu
from aiayn.device import bf16_is_fast
from aiayn.model import ModelConfig, build_model
from aiayn.model.embedding import sinusoid_table
from aiayn.training.loss import TrainingObjective

PAD, BOS = 0, 2


class TorchPeer(nn.Module):
    """torch.nn.Transformer wrapped with the same embeddings, positions and tied output as aiayn."""

    def __init__(self, vocab, d_model, heads, layers, d_ff, dropout, select_logits):
        super().__init__()
        self.select_logits = select_logits  # False: logits at every position, as torch users usually do
        self.embed = nn.Embedding(vocab, d_model)
        self.register_buffer("pe", sinusoid_table(1024, d_model), persistent=False)
        self.core = nn.Transformer(d_model, heads, layers, layers, d_ff, dropout, batch_first=True)
        self.out = nn.Linear(d_model, vocab, bias=False)
        self.out.weight = self.embed.weight
        self.drop, self.scale = nn.Dropout(dropout), math.sqrt(d_model)

    def _embed(self, x):
        return self.drop(self.embed(x) * self.scale + self.pe[: x.size(1)])

    def forward(self, src, tgt_in, positions):
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), dtype=torch.bool)
        h = self.core(self._embed(src), self._embed(tgt_in), tgt_mask=causal, src_key_padding_mask=src == PAD,
                      memory_key_padding_mask=src == PAD, tgt_is_causal=True)
        if not self.select_logits:
            return self.out(h)  # (B, T, V); the loss then ignores padding
        return self.out(h[positions])  # logits only at target tokens, as aiayn's trainer does


def make_batches(n, batch, max_len, vocab, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        lengths = torch.randint(max_len // 3, max_len + 1, (batch,), generator=g)
        src = torch.randint(4, vocab, (batch, max_len), generator=g)
        tgt = torch.randint(4, vocab, (batch, max_len + 1), generator=g)
        for i, n_tok in enumerate(lengths.tolist()):
            src[i, n_tok:] = PAD
            tgt[i, n_tok + 1:] = PAD
        tgt[:, 0] = BOS
        out.append((src, tgt[:, :-1], tgt[:, 1:]))
    return out


def train_step(model, opt, batch, bf16):
    src, tgt_in, tgt_out = batch
    real = tgt_out != PAD
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        if isinstance(model, TrainingObjective):
            loss, _ = model(src, tgt_in, tgt_out)
        else:
            logits = model(src, tgt_in, positions=real)
            target = tgt_out[real] if logits.dim() == 2 else tgt_out
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1),
                                               ignore_index=PAD, label_smoothing=0.1, reduction="sum")
    n_tokens = int(real.sum())
    (loss / n_tokens).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return n_tokens


def step_flops(batch, d, d_ff, layers, vocab):
    """Matmul FLOPs of one training step (forward x 3) for a batch, as the layers run it (padded)."""
    src, tgt_in, tgt_out = batch
    b, s = src.shape
    t = tgt_in.size(1)
    encoder = 2 * b * s * (4 * d * d + 2 * d * d_ff) + 2 * 2 * b * s * s * d  # projections, FFN; QK^T, AV
    decoder = (2 * b * t * (4 * d * d + 2 * d * d + 2 * d * d_ff) + 2 * b * s * 2 * d * d  # self, cross Q/O, FFN; K/V
               + 2 * 2 * b * t * t * d + 2 * 2 * b * t * s * d)
    output = 2 * int((tgt_out != PAD).sum()) * d * vocab
    return 3 * (layers * (encoder + decoder) + output)


def matmul_peak(dtype, size=2048, repeats=10):
    """GFLOP/s of a (size x size) @ (size x size) matmul in dtype, best of repeats: the MFU's denominator."""
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best / 1e9


def measure(models, batches, bf16, rounds, count):
    """-> ({name: target tokens/s}, {name: achieved matmul GFLOP/s}); count(batch) = a step's FLOPs."""
    tokens = dict.fromkeys(models, 0)
    seconds = dict.fromkeys(models, 0.0)
    for model, opt in models.values():  # warm-up
        train_step(model, opt, batches[0], bf16)
    for r in range(rounds):
        for name, (model, opt) in models.items():
            batch = batches[r % len(batches)]
            start = time.perf_counter()
            tokens[name] += train_step(model, opt, batch, bf16)
            seconds[name] += time.perf_counter() - start
    flops = sum(count(batches[r % len(batches)]) for r in range(rounds))  # the same batches for every model
    return ({name: tokens[name] / seconds[name] for name in models},
            {name: flops / seconds[name] / 1e9 for name in models})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=512)
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--dropout", type=float, default=0.3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--max-len", type=int, default=30)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--paper-base", action="store_true",
                   help="the paper's base size (d_model 512, 6+6 layers, d_ff 2048, 8 heads, dropout 0.1, "
                        "V 37000), batch 32")
    p.add_argument("--dtypes", default="fp32,bf16", help="which of fp32,bf16 to measure")
    args = p.parse_args()
    if args.paper_base:
        args.d_model, args.layers, args.d_ff, args.heads, args.dropout, args.vocab, args.batch = (
            512, 6, 2048, 8, 0.1, 37000, 32)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ours = build_model(ModelConfig.preset("paper-base", src_vocab_size=args.vocab, tgt_vocab_size=args.vocab,
                                          d_model=args.d_model, n_heads=args.heads, d_ff=args.d_ff,
                                          n_encoder_layers=args.layers, n_decoder_layers=args.layers,
                                          dropout=args.dropout, share_embeddings=True)).train()
    prepare_for_cpu(ours)  # as the trainer does: its dropout masks
    peers = {}
    for name, select in (("torch (full logits)", False), ("torch (selected logits)", True)):
        torch.manual_seed(0)
        peers[name] = TorchPeer(args.vocab, args.d_model, args.heads, args.layers, args.d_ff, args.dropout,
                                select).train()
    n_ours, n_peer = (sum(p.numel() for p in m.parameters()) for m in (ours, peers["torch (full logits)"]))
    print(f"d_model {args.d_model}, {args.layers}+{args.layers} layers, d_ff {args.d_ff}, {args.heads} heads, "
          f"vocab {args.vocab}, dropout {args.dropout}, batch {args.batch} x <= {args.max_len} tokens, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    print(f"parameters: aiayn {n_ours:,}  torch.nn.Transformer {n_peer:,}")

    def count(batch):
        return step_flops(batch, args.d_model, args.d_ff, args.layers, args.vocab)

    objective = TrainingObjective(model=ours, pad_id=PAD, epsilon=0.1)
    models = {name: (m, torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True))
              for name, m in (("aiayn", objective), *peers.items())}
    batches = make_batches(4, args.batch, args.max_len, args.vocab)
    for label in args.dtypes.split(","):
        bf16 = label == "bf16"
        if bf16 and not bf16_is_fast(torch.device("cpu")):
            print("bf16: skipped, this CPU has no hardware bf16 matmuls (no AVX-512): torch would emulate them, "
                  "tens of times slower than float32, and aiayn train uses float32 here")
            continue
        peak = matmul_peak(torch.bfloat16 if bf16 else torch.float32)
        rate, gflops = measure(models, batches, bf16, args.rounds, count)
        print(f"{label}: one 2048^3 matmul here: {peak:.0f} GFLOP/s")
        print(f"      {'aiayn':24s} {rate['aiayn']:7.0f} tok/s                          "
              f"MFU {gflops['aiayn'] / peak:5.1%} ({gflops['aiayn']:.0f} GFLOP/s)")
        for name in peers:
            print(f"      {name:24s} {rate[name]:7.0f} tok/s   aiayn / peer = {rate['aiayn'] / rate[name]:.2f}x   "
                  f"MFU {gflops[name] / peak:5.1%}")


if __name__ == "__main__":
    main()
