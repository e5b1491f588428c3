"""What each attention head and sublayer contributes, beyond its weights: value-norm weighted maps
(Kobayashi et al. 2020), ALTI+ token contributions through each attention sublayer (attention, residual,
LayerNorm; Ferrando et al. 2022) and, rolled out across layers, each output token's share from the source
vs the target prefix. Computed from the model's own weights and attention maps, teacher-forced.

- trace: every attention sublayer as it ran (its input stream, values, weights and output);
- decompose: value-norm maps and the decomposition of one sublayer's output by input token;
- rollout: the per-layer contributions combined across layers;
- measure: all of it for a batch (measure_contributions -> Contributions).
"""

from aiayn.inspect.contributions.measure import Contributions, measure_contributions

__all__ = ["Contributions", "measure_contributions"]
