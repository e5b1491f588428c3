"""Training throughput: aiayn's Transformer vs torch.nn.Transformer of the same size, same run.

Both models get the same token embeddings (x sqrt(d_model), tied with the output projection), the same
sinusoidal positions, vocabulary, batches (padded, varied lengths), dropout, label-smoothed loss and
Adam (fused, betas 0.9/0.98, eps 1e-9). Steps of the two models are interleaved so machine noise hits
both alike. Prints target tokens/s of each and the ratio, in fp32 and in bf16 autocast.

    python bench/train_throughput.py [--d-model 128 --layers 4 --d-ff 512 --heads 4 --vocab 10000]
"""

import argparse
import math
import time

import torch
from torch import nn

from aiayn.model import ModelConfig, build_model
from aiayn.model.embedding import sinusoid_table
from aiayn.training.loss import label_smoothed_loss

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
        logits = model(src, tgt_in, positions=real)
        target = tgt_out[real] if logits.dim() == 2 else tgt_out
        loss, _ = label_smoothed_loss(logits, target, PAD, 0.1)  # padding contributes nothing either way
    n_tokens = int(real.sum())
    (loss / n_tokens).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return n_tokens


def measure(models, batches, bf16, rounds):
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
    return {name: tokens[name] / seconds[name] for name in models}


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
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    ours = build_model(ModelConfig.preset("paper-base", src_vocab_size=args.vocab, tgt_vocab_size=args.vocab,
                                          d_model=args.d_model, n_heads=args.heads, d_ff=args.d_ff,
                                          n_encoder_layers=args.layers, n_decoder_layers=args.layers,
                                          dropout=args.dropout, share_embeddings=True)).train()
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
    models = {name: (m, torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True))
              for name, m in (("aiayn", ours), *peers.items())}
    batches = make_batches(4, args.batch, args.max_len, args.vocab)
    for bf16 in (False, True):
        rate = measure(models, batches, bf16, args.rounds)
        label = "bf16" if bf16 else "fp32"
        print(f"{label}: aiayn {rate['aiayn']:7.0f} tok/s")
        for name in peers:
            print(f"      {name:24s} {rate[name]:7.0f} tok/s   aiayn / peer = {rate['aiayn'] / rate[name]:.2f}x")


if __name__ == "__main__":
    main()
