"""Label-smoothed cross-entropy (§5.4, eps_ls = 0.1) fused with the output projection (§3.4), in row chunks.

The smoothed target puts 1 - eps on the reference and eps spread uniformly over all V tokens (Szegedy et al.
2016, as torch's cross_entropy(label_smoothing=eps)), so per token
    loss = (1 - eps) * nll + eps * mean_v(-log p_v),  nll = lse - x_y,  mean_v(-log p_v) = lse - mean_v(x_v)
with x = h W^T + b the logits and lse = logsumexp(x). Its gradient is softmax(x) - q, q the smoothed target.

Why hand-written: the plain version (logits, float copy, log_softmax, gather, sum) keeps several (N, V)
tensors alive at once, and autograd keeps the logits until the backward; with N = 4096 target tokens and
V = 10k that was ~0.9 GB of a Multi30k training's peak memory, and each pass over (N, V) costs time. Here
each CHUNK rows are projected, turned to fp32 once, exponentiated once, and turned into softmax - q in the
same buffer, which at once gives the gradients of h, W and b for that chunk: the forward keeps only those
((N, D), (V, D), (V,)), never an (N, V) tensor, and the backward is a multiply by the incoming scalar.
Under autocast the projection runs in the autocast dtype, as nn.Linear would.
"""

import threading

import torch

CHUNK = 512  # rows per chunk: a 512 x V fp32 temporary (20 MB at V = 10k); 1024 was slower here


def _chunk_loss(x: torch.Tensor, target: torch.Tensor, epsilon: float, want_grad: bool):
    """x (C, V) fp32 logits, overwritten; target (C,) -> (smoothed loss (C,), nll (C,)); when want_grad,
    x holds softmax(x) - q on return."""
    x_max = x.amax(dim=-1, keepdim=True)  # (C, 1)
    x_mean = x.mean(dim=-1)  # (C,)
    x_target = x.gather(-1, target[:, None]).squeeze(-1)  # (C,)
    total = x.sub_(x_max).exp_().sum(dim=-1, keepdim=True)  # x now exp(x - max); total (C, 1)
    lse = (x_max + total.log()).squeeze(-1)  # (C,)
    nll = lse - x_target
    smooth = lse - x_mean  # mean_v(-log p_v)
    if want_grad:
        x.div_(total).sub_(epsilon / x.size(-1))  # softmax - eps/V
        x.scatter_add_(-1, target[:, None], x.new_full((x.size(0), 1), -(1.0 - epsilon)))
    return (1.0 - epsilon) * nll + epsilon * smooth, nll


def _compute_dtype(hidden: torch.Tensor) -> torch.dtype:
    device = hidden.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype


class _WorkBuffers(threading.local):
    """This thread's work buffers ((CHUNK, V) and (V, D)), kept from call to call. Why: fresh, a chunk's 10-20 MB
    temporaries came from the system as zero-filled pages (glibc maps blocks that large anew and unmaps
    them on free), and a training step's copies into them ran several times slower than into reused
    memory (BENCHMARKS.md, training throughput). Thread-local: micro-batch workers
    (micro_batches.py) run this loss side by side."""

    def get(self, name: str, shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """The buffer `name`, made (or remade, for another shape, dtype or device) at first use."""
        buffer = getattr(self, name, None)
        if buffer is None or buffer.shape != shape or buffer.dtype != dtype or buffer.device != device:
            buffer = torch.empty(shape, dtype=dtype, device=device)
            setattr(self, name, buffer)
        return buffer


_buffers = _WorkBuffers()


def _fresh(name: str, shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """_WorkBuffers.get's signature, a new tensor: what validation (no gradients) uses. It runs now and then
    in the training thread; with micro-batch workers, buffers kept for it would add ~30 MB to the peak."""
    return torch.empty(shape, dtype=dtype, device=device)


def _fused_chunks(hidden, weight, bias, target, epsilon: float, want_grad: bool):
    """hidden (N, D), weight (V, D), bias (V,) or None, target (N,) -> (loss sum, nll sum, fp32 scalars;
    grads of (hidden, weight, bias) summed, or None when not want_grad)."""
    dtype = _compute_dtype(hidden)
    V = weight.size(0)
    with torch.autocast(hidden.device.type, enabled=False):
        h, w = hidden.to(dtype), weight.to(dtype)
        b = None if bias is None else bias.to(dtype)
        grad_h = torch.empty_like(h) if want_grad else None  # (N, D)
        grad_w = torch.zeros_like(weight, dtype=torch.float32) if want_grad else None  # (V, D)
        grad_b = None if b is None or not want_grad else torch.zeros_like(bias, dtype=torch.float32)
        loss = hidden.new_zeros((), dtype=torch.float32)
        nll_sum = hidden.new_zeros((), dtype=torch.float32)
        chunk, device = (CHUNK, V), h.device
        work = _buffers.get if want_grad else _fresh
        for start in range(0, h.size(0), CHUNK):
            rows = slice(start, start + CHUNK)
            n = h[rows].size(0)
            logits = work("logits", chunk, dtype, device)[:n]  # (C, V) in dtype
            if b is None:
                torch.mm(h[rows], w.t(), out=logits)
            else:
                torch.addmm(b, h[rows], w.t(), out=logits)
            x = logits if dtype == torch.float32 else work("x", chunk, torch.float32, device)[:n].copy_(logits)
            loss_c, nll_c = _chunk_loss(x, target[rows], epsilon, want_grad)  # x: fp32 logits, then softmax - q
            loss += loss_c.sum()
            nll_sum += nll_c.sum()
            if want_grad:
                g = x if dtype == torch.float32 else logits.copy_(x)  # (C, V) d loss / d logits, in dtype
                torch.mm(g, w, out=grad_h[rows])  # (C, D)
                grad_w_c = torch.mm(g.t(), h[rows], out=_buffers.get("grad_w", (V, h.size(1)), dtype, device))
                # summed over chunks in fp32; the copy first, so that add_ makes no fresh fp32 temporary
                grad_w += grad_w_c if dtype == torch.float32 else _buffers.get(
                    "grad_w32", (V, h.size(1)), torch.float32, device).copy_(grad_w_c)
                if grad_b is not None:
                    grad_b += x.sum(dim=0)
    return loss, nll_sum, ((grad_h, grad_w, grad_b) if want_grad else None)


class _ProjectedSmoothedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, bias, target, epsilon):
        loss, nll_sum, grads = _fused_chunks(hidden, weight, bias, target, epsilon, want_grad=True)
        ctx.save_for_backward(*grads)
        ctx.dtypes = (hidden.dtype, weight.dtype)
        ctx.used = False
        ctx.mark_non_differentiable(nll_sum)
        return loss, nll_sum

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        if ctx.used:  # the saved gradients are scaled in place below
            raise RuntimeError("the projected label-smoothed loss supports one backward pass (no retain_graph)")
        ctx.used = True
        grad_h, grad_w, grad_b = ctx.saved_tensors
        scale = grad_loss.float()
        hidden_dtype, weight_dtype = ctx.dtypes
        return (grad_h.mul_(scale.to(grad_h.dtype)).to(hidden_dtype), grad_w.mul_(scale).to(weight_dtype),
                None if grad_b is None else grad_b.mul_(scale).to(weight_dtype), None, None)


def projected_label_smoothed_loss(hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                                  target: torch.Tensor, epsilon: float):
    """hidden (N, D) decoder outputs at real target positions, the output layer's weight (V, D) and bias,
    target (N,) -> (smoothed loss summed over the N tokens, nll summed, detached). The caller divides by
    the number of target tokens. Without autograd (validation, torch.no_grad) no gradient is computed:
    an autograd Function's forward cannot tell, since its needs_input_grad ignores the grad mode."""
    needs_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (hidden, weight, bias))
    if not needs_grad:
        loss, nll_sum, _ = _fused_chunks(hidden, weight, bias, target, epsilon, want_grad=False)
        return loss, nll_sum
    return _ProjectedSmoothedCrossEntropy.apply(hidden, weight, bias, target, epsilon)


class TrainingObjective(torch.nn.Module):
    """The model with its loss: what the trainer calls (and DDP wraps, since DDP hooks only a module's
    forward). (B, S) src, (B, T) tgt_in and tgt_out -> (smoothed loss sum, nll sum) over the real
    (non-pad) target tokens; the output projection runs only there, fused into the loss. A probe
    (training/pronoun_probe.py) adds its auxiliary loss to the first while the model trains."""

    def __init__(self, *, model: torch.nn.Module, pad_id: int, epsilon: float, probe=None):
        super().__init__()
        self.model, self.pad_id, self.epsilon, self.probe = model, pad_id, epsilon, probe

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor):
        real = tgt_out != self.pad_id  # (B, T)
        generator, probe_loss = self.model.generator, 0.0
        if self.probe is None or not self.model.training:
            hidden = self.model.decoder_output(src, tgt_in)[real]  # (N, D); any model (the shared interface)
        else:  # the coreference Transformer: the probe reads the encoder's output too
            memory, _ = self.model.encode(src)  # (B, S, D)
            hidden = self.model.decoder_output_from(memory, src, tgt_in)[real]
            probe_loss = self.probe.loss(memory, src, tgt_out, self.model.tgt_embed.weight)
        loss, nll = projected_label_smoothed_loss(hidden, generator.weight, generator.bias, tgt_out[real],
                                                  self.epsilon)
        return loss + probe_loss, nll
