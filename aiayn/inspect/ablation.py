"""Heads taken out: what a Transformer loses when one attention head, or several, stop contributing.

A head is taken out by zeroing its output before W^O (§3.2.2: MultiHead = Concat(head_1..head_h) W^O, so
head h's d_head columns of the concatenation are set to 0, as Michel et al. 2019 and Voita et al. 2019 mask
heads); W^O's bias stays. `heads_removed` does it with forward pre-hooks on the attention modules' output
projections for the length of a `with` block: the model's own code paths run unchanged (teacher forcing
and the decoding steps alike), and outside the block nothing is hooked, so nothing is slower.

Each removal is judged by the BLEU (sacreBLEU) of the model's translations and the loss (the mean
teacher-forced negative log-likelihood per reference token, </s> included) on a test set: `ablate` takes
every head out in turn and, optionally, prunes greedily (the head whose removal costs least goes, and
the search repeats on what is left).
"""

from collections import defaultdict
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from aiayn.inspect.maps.checks import InspectError

HEAD_KINDS = ("encoder_self", "decoder_self", "cross")
KIND_SHORT = {"encoder_self": "enc", "decoder_self": "dec", "cross": "cross"}
KIND_WORDS = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
              "cross": "cross-attention"}


@dataclass(frozen=True, order=True)
class Head:
    """One head: kind (one of HEAD_KINDS), layer and head counted from 0."""

    kind: str
    layer: int
    head: int

    @property
    def name(self) -> str:
        """"enc 1:2": encoder self-attention, layer 1, head 2 (counted from 1, as `aiayn heads` prints)."""
        return f"{self.layer_name}:{self.head + 1}"

    @property
    def layer_name(self) -> str:
        """"enc 1": its kind and layer."""
        return f"{KIND_SHORT[self.kind]} {self.layer + 1}"

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "layer": self.layer + 1, "head": self.head + 1}


def attention_modules(model) -> dict[str, list]:
    """kind -> its MultiHeadAttention modules, one per layer. A model without layers of heads is refused."""
    if not getattr(model, "multi_head", False) or not hasattr(model, "encoder_layers"):
        raise InspectError(f"heads can be taken out of a Transformer; this model is {getattr(model, 'arch', '?')}")
    return {"encoder_self": [layer.self_attn for layer in model.encoder_layers],
            "decoder_self": [layer.self_attn for layer in model.decoder_layers],
            "cross": [layer.cross_attn for layer in model.decoder_layers]}


def all_heads(model, kinds: Iterable[str] = HEAD_KINDS) -> list[Head]:
    """Every head of `kinds`, in model order (kind, layer, head)."""
    modules = attention_modules(model)
    return [Head(kind, layer, h) for kind in kinds for layer, attn in enumerate(modules[kind])
            for h in range(attn.n_heads)]


def _zero_columns(keep: torch.Tensor):
    """A forward pre-hook on W^O: its input Concat(head_1..h) (..., D) with the removed heads' columns 0."""
    def hook(_module, args):
        return (args[0].masked_fill(~keep.to(args[0].device), 0.0),) + tuple(args[1:])
    return hook


@contextmanager
def heads_removed(model, heads: Iterable[Head]):
    """Within the block, `heads` of `model` contribute nothing: each one's output is zeroed before W^O, in
    teacher forcing and in every decoding step alike. The hooks are gone when the block ends (also on an
    error). No heads: nothing is hooked."""
    modules = attention_modules(model)
    chosen = defaultdict(set)
    for head in heads:
        if head.kind not in modules or not 0 <= head.layer < len(modules[head.kind]) or \
                not 0 <= head.head < modules[head.kind][head.layer].n_heads:
            raise InspectError(f"no head {head.name} in this model")
        chosen[modules[head.kind][head.layer]].add(head.head)
    hooks = []
    try:
        for attn, indices in chosen.items():
            keep = torch.ones(attn.n_heads, attn.d_head, dtype=torch.bool)
            keep[sorted(indices)] = False  # (H, d_head), flattened as Concat lays the heads out
            hooks.append(attn.out_proj.register_forward_pre_hook(_zero_columns(keep.flatten())))
        yield
    finally:
        for hook in hooks:
            hook.remove()


@dataclass(frozen=True, kw_only=True)
class Quality:
    """bleu: sacreBLEU of the translations against the references; loss: the mean negative log-likelihood
    per reference token (</s> included) under teacher forcing."""

    bleu: float
    loss: float

    def to_dict(self) -> dict:
        return {"bleu": round(self.bleu, 2), "loss": round(self.loss, 4)}


def measure_quality(translator, sources: list[str], refs: list[str], options=None) -> Quality:
    """The translator's Quality on (sources, refs) as its model is now (within heads_removed: without those
    heads). options: a DecodeOptions (default: the model's own decode settings)."""
    from sacrebleu.metrics import BLEU  # aiayn evaluate's BLEU (aiayn.evaluation.corpus_bleu), its defaults

    hyps = [r.text for r in translator.translate(sources, options=options)]
    scores = translator.score(sources, refs, options=options)
    n_tokens = sum(len(s.tokens) for s in scores)
    return Quality(bleu=BLEU().corpus_score(hyps, [refs]).score, loss=-sum(s.log_prob for s in scores) / n_tokens)


@dataclass(frozen=True, kw_only=True)
class Removal:
    """The Quality after `head` is taken out (alone, or after the pruning steps before it)."""

    head: Head
    quality: Quality

    def to_dict(self, baseline: Quality) -> dict:
        return {**self.head.to_dict(), **self.quality.to_dict(),
                "delta_bleu": round(self.quality.bleu - baseline.bleu, 2),
                "delta_loss": round(self.quality.loss - baseline.loss, 4)}


@dataclass(frozen=True, kw_only=True)
class Ablation:
    """baseline: every head in; single: each head taken out alone, in model order; pruned: the greedy
    pruning's steps in order (step k: the first k + 1 heads of it out together); pruned_kinds: the kinds
    the pruning chose from."""

    baseline: Quality
    single: list[Removal]
    pruned: list[Removal] = field(default_factory=list)
    pruned_kinds: tuple[str, ...] = ()

    @property
    def pruned_words(self) -> str:
        """The kinds the pruning chose from, in words."""
        return ", ".join(KIND_WORDS[k] for k in self.pruned_kinds)

    def removable(self, max_drop: float) -> int:
        """How many heads the greedy pruning takes out before BLEU first falls more than max_drop below the
        baseline."""
        for k, step in enumerate(self.pruned):
            if step.quality.bleu < self.baseline.bleu - max_drop:
                return k
        return len(self.pruned)

    def to_dict(self, max_drop: float) -> dict:
        return {"baseline": self.baseline.to_dict(), "heads": [r.to_dict(self.baseline) for r in self.single],
                "pruning": {"kinds": list(self.pruned_kinds), "steps": [r.to_dict(self.baseline) for r in self.pruned],
                            "max_drop": max_drop, "removable": self.removable(max_drop)}}


def _cost(baseline: Quality, quality: Quality) -> tuple[float, float]:
    """What a removal costs: BLEU lost first, then loss gained (a tie in BLEU, common on few sentences)."""
    return baseline.bleu - quality.bleu, quality.loss - baseline.loss


def prune_greedy(measure: Callable[[list[Head]], Quality], baseline: Quality, candidates: list[Head],
                 steps: int, first: dict[Head, Quality] | None = None,
                 progress: Callable[[str], None] | None = None) -> list[Removal]:
    """Greedy pruning: `steps` times, every candidate left is taken out on top of those already out, and the
    one whose removal costs least (_cost) goes. measure(heads) -> the Quality with `heads` out; first: the
    known Quality of each candidate alone (the first step's work, when ablate has done it); progress: told
    each step."""
    removed, left, path = [], list(candidates), []
    for step in range(min(steps, len(candidates))):
        tried = {h: first[h] if step == 0 and first and h in first else measure(removed + [h]) for h in left}
        best = min(left, key=lambda h: _cost(baseline, tried[h]))
        removed.append(best)
        left.remove(best)
        path.append(Removal(head=best, quality=tried[best]))
        if progress:
            progress(f"pruning step {step + 1}: {best.name} out, BLEU {tried[best].bleu:.2f}")
    return path


def ablate(translator, sources: list[str], refs: list[str], options=None, *, prune_kinds: Iterable[str] = (),
           prune_steps: int = 0, progress: Callable[[str], None] | None = None) -> Ablation:
    """Every head of the translator's model taken out in turn, then (prune_kinds) the greedy pruning of those
    kinds' heads, prune_steps steps (0: until all of them are out). The model is left as it was."""
    model = translator.model

    def measure(heads: list[Head]) -> Quality:
        with heads_removed(model, heads):
            return measure_quality(translator, sources, refs, options)

    baseline = measure([])
    if progress:
        progress(f"baseline: BLEU {baseline.bleu:.2f}, loss {baseline.loss:.4f}")
    single = []
    for head in all_heads(model):
        single.append(Removal(head=head, quality=measure([head])))
        if progress:
            progress(f"{head.name}: BLEU {single[-1].quality.bleu:.2f}")
    kinds = tuple(k for k in HEAD_KINDS if k in set(prune_kinds))
    candidates = all_heads(model, kinds)
    alone = {r.head: r.quality for r in single}
    pruned = prune_greedy(measure, baseline, candidates, prune_steps or len(candidates), first=alone,
                          progress=progress)
    return Ablation(baseline=baseline, single=single, pruned=pruned, pruned_kinds=kinds)
