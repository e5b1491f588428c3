"""Training memory stays flat when batch shapes change (the 800 MB training-memory goal). Not timed: it reads RSS.

Token-budget batches bring a new (B, T) at almost every step. Two caches inside torch's CPU matmul
stack keep one compiled primitive per shape (oneDNN's, and ideep's LRU in front of it), so RSS grew
with every new shape: 6 GB after an hour of Multi30k training. `limit_primitive_cache` caps both. With
the caps removed, the child below measured 507 -> 901 MB over its last 60 shapes; capped, 318 -> 318.
"""

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import ctypes, torch
    from aiayn.device import limit_primitive_cache
    limit_primitive_cache()  # as `aiayn train` does, before the first matmul
    from aiayn.model import ModelConfig, build_model
    from aiayn.training.loss import TrainingObjective

    libc = ctypes.CDLL("libc.so.6")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=1000, tgt_vocab_size=1000, d_model=64,
                                           d_ff=256)).train()
    objective = TrainingObjective(model=model, pad_id=0, epsilon=0.1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def rss_mb():
        return int(dict(line.split(":", 1) for line in open("/proc/self/status"))["VmRSS"].split()[0]) // 1024

    marks = []
    for i in range(80):
        b, t = 8 + i % 9, 5 + i  # a new (B, T) at every step
        src, tgt = torch.randint(4, 1000, (b, t)), torch.randint(4, 1000, (b, t + 1))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, _ = objective(src, tgt[:, :-1], tgt[:, 1:])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        libc.malloc_trim(0)  # free heap pages back to the system: what is left is held, not cached by glibc
        if i in (19, 79):
            marks.append(rss_mb())
    print(*marks)
""")


@pytest.mark.slow
def test_rss_stays_flat_when_batch_shapes_change():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    after_20, after_80 = map(int, out.stdout.split()[-2:])
    assert after_80 - after_20 < 40, f"RSS grew from {after_20} to {after_80} MB over 60 new batch shapes"
