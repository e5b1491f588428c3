"""Adam (§5.3: beta1 0.9, beta2 0.98, eps 1e-9 in the configs) on torch's fused kernel, without torch.optim.

Why not torch.optim.Adam: every torch.optim optimizer imports torch._dynamo at its first call (its methods
are wrapped to keep torch.compile out), ~830 modules and ~70 MB of memory that a training process never
uses, 9% of the 800 MB budget of a Multi30k training (BENCHMARKS.md, training memory). This
class makes the same calls as torch.optim.Adam(fused=True) (step += 1, then torch._fused_adam_ with the
same arguments), so its updates are bitwise the same (tests/training/test_adam.py), and its state_dict has torch's
layout, so checkpoints written by either load in the other.

Gradients are zeroed in place, not set to None: they keep one place in memory for the whole run instead of
being allocated anew in the middle of every backward, between the activations (whose freed blocks they
would split)."""

from collections.abc import Iterable

import torch

from aiayn.errors import CheckpointError


class Adam:
    def __init__(self, *, params: Iterable[torch.nn.Parameter], lr: float, betas: tuple[float, float],
                 eps: float, weight_decay: float = 0.0):
        # one group, as torch's: the scheduler and the logs read param_groups[0]["lr"]
        self.param_groups = [{"params": list(params), "lr": lr, "betas": tuple(betas), "eps": eps,
                              "weight_decay": weight_decay}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    @property
    def params(self) -> list[torch.nn.Parameter]:
        return self.param_groups[0]["params"]

    def _state_of(self, param: torch.Tensor) -> dict[str, torch.Tensor]:
        if param not in self.state:  # made at the first update, as torch's (step on the param's device: fused)
            self.state[param] = {"step": torch.zeros((), dtype=torch.float32, device=param.device),
                                 "exp_avg": torch.zeros_like(param), "exp_avg_sq": torch.zeros_like(param)}
        return self.state[param]

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient, one fused call per (device, dtype)."""
        group = self.param_groups[0]
        kinds: dict[tuple, tuple[list, list, list, list, list]] = {}
        for param in self.params:
            if param.grad is None:
                continue
            state = self._state_of(param)
            lists = kinds.setdefault((param.device, param.dtype), ([], [], [], [], []))
            for tensors, t in zip(lists, (param, param.grad, state["exp_avg"], state["exp_avg_sq"], state["step"])):
                tensors.append(t)
        beta1, beta2 = group["betas"]
        for params, grads, exp_avgs, exp_avg_sqs, steps in kinds.values():
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, lr=group["lr"], beta1=beta1,
                               beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"], amsgrad=False,
                               maximize=False, grad_scale=None, found_inf=None)

    def zero_grad(self) -> None:
        for param in self.params:
            if param.grad is not None:
                param.grad.zero_()

    def state_dict(self) -> dict:
        """torch.optim.Adam's layout: per-parameter state by position, and the group's hyperparameters."""
        group = self.param_groups[0]
        state = {i: self.state[p] for i, p in enumerate(self.params) if p in self.state}
        hyper = {"lr": group["lr"], "betas": group["betas"], "eps": group["eps"],
                 "weight_decay": group["weight_decay"], "amsgrad": False, "maximize": False, "foreach": None,
                 "capturable": False, "differentiable": False, "fused": True, "decoupled_weight_decay": False}
        return {"state": state, "param_groups": [{**hyper, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, saved: dict) -> None:
        """A state_dict of this class or of torch.optim.Adam over the same parameters. As torch's, the saved
        hyperparameters win. Everything is checked before anything changes; a state that does not fit is a
        CheckpointError (the trainer then tries the checkpoint before)."""
        groups = saved.get("param_groups") if isinstance(saved, dict) else None
        if not groups or len(groups) != 1 or len(groups[0].get("params", ())) != len(self.params):
            raise CheckpointError(f"optimizer state: saved for {sum(len(g.get('params', ())) for g in groups or [])} "
                                  f"parameters in {len(groups or [])} group(s), this model has {len(self.params)} in 1")
        if groups[0].get("amsgrad") or groups[0].get("maximize"):
            raise CheckpointError("optimizer state: saved with amsgrad or maximize, which aiayn's Adam does not do")
        try:
            hyper = {"lr": groups[0]["lr"], "betas": tuple(groups[0]["betas"]), "eps": groups[0]["eps"],
                     "weight_decay": groups[0]["weight_decay"]}
            state = {self.params[int(i)]: self._moments(self.params[int(i)], i, entry)
                     for i, entry in saved.get("state", {}).items()}
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
            raise CheckpointError(f"optimizer state: damaged ({type(err).__name__}: {err})") from None
        self.param_groups[0].update(hyper)
        self.state = state

    @staticmethod
    def _moments(param: torch.Tensor, index, entry: dict) -> dict[str, torch.Tensor]:
        """One parameter's saved step and moments, checked against it and moved to its device and dtype."""
        if entry["exp_avg"].shape != param.shape or entry["exp_avg_sq"].shape != param.shape:
            raise CheckpointError(f"optimizer state: parameter {index} has shape {tuple(param.shape)}, its saved "
                                  f"moments {tuple(entry['exp_avg'].shape)}")
        return {"step": torch.as_tensor(entry["step"], dtype=torch.float32).to(param.device),
                "exp_avg": entry["exp_avg"].to(param.device, param.dtype),
                "exp_avg_sq": entry["exp_avg_sq"].to(param.device, param.dtype)}
