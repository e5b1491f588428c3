"""An auxiliary loss for the built-in coreference task (aiayn/data/coreference.py; train.pronoun_probe): the
encoder's output at the source word "it" must predict the German pronoun the reference uses for it (er, sie
or es), scored by its dot product with those pronouns' target embeddings; cross-entropy, summed over the
sentences.

Why: trained on translation alone, a small model resolves "it" where it is cheapest, in the decoder, which
reads the gender off the German article it already wrote; the posts' picture, an encoder head from "it" to
its noun, does not form (BENCHMARKS.md, Coreference). This loss asks only that the encoder's "it" carry the
referent's gender. It says nothing about where any head looks: whether a head then attends from "it" to the
referent is what bench/coreference.py measures.
"""

import torch
import torch.nn.functional as F

from aiayn.errors import AiaynError

PRONOUNS = ("er", "sie", "es")  # the classes, in this order
IGNORE = -100  # a sentence without "it" or without a pronoun in its reference


class PronounProbe:
    def __init__(self, *, tokenizer, weight: float):
        self.weight = weight
        self.it = tokenizer.source_piece_to_id("▁it")
        self.pronouns = [tokenizer.piece_to_id(f"▁{p}") for p in PRONOUNS]
        missing = [p for p, i in zip(("it",) + PRONOUNS, [self.it] + self.pronouns) if i == tokenizer.unk_id]
        if missing:
            raise AiaynError(f"train.pronoun_probe needs the words {', '.join(missing)} as pieces of the vocabulary, "
                             f"which has none for them; use data.dataset=coreference with its own vocabulary "
                             f"(configs/coreference.yaml), or set train.pronoun_probe=0")

    def labels(self, src: torch.Tensor, tgt_out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S), tgt_out (B, T) -> ("it"'s position (B,), class (B,) in PRONOUNS order or IGNORE): the
        first "it" of the source, the first of the pronouns in the reference."""
        has_it = src == self.it  # (B, S)
        label = torch.full((src.size(0),), IGNORE, dtype=torch.long, device=src.device)
        first = torch.full_like(label, tgt_out.size(1))
        for k, piece in enumerate(self.pronouns):
            found = tgt_out == piece  # (B, T)
            where = torch.where(found.any(1), found.float().argmax(1), tgt_out.size(1))
            label = torch.where(where < first, k, label)
            first = torch.minimum(first, where)
        label[~has_it.any(1)] = IGNORE
        return has_it.float().argmax(1), label

    def loss(self, memory: torch.Tensor, src: torch.Tensor, tgt_out: torch.Tensor,
             target_embedding: torch.Tensor) -> torch.Tensor:
        """memory (B, S, D) the encoder's output; target_embedding (V, D) -> weight x summed cross-entropy."""
        position, label = self.labels(src, tgt_out)
        at_it = memory[torch.arange(src.size(0), device=src.device), position]  # (B, D)
        logits = at_it.float() @ target_embedding[self.pronouns].float().t()  # (B, 3)
        return self.weight * F.cross_entropy(logits, label, ignore_index=IGNORE, reduction="sum")
