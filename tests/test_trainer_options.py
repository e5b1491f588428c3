import json

import torch
from safetensors.torch import load_file
from test_training import TINY

from aiayn.checkpoint import load_checkpoint
from aiayn.config import load_config
from aiayn.training.run import prepare_run


def small_config(*extra):
    return load_config(None, TINY + list(extra))


def test_early_stopping_keeps_the_best_by_dev_bleu(tmp_path):
    scores = iter([10.0, 20.0, 15.0, 12.0, 30.0, 40.0])
    cfg = small_config("train.max_steps=100", "train.eval_every=2", "train.save_every=100", "train.patience=2")
    trainer = prepare_run(cfg, tmp_path, bleu_factory=lambda tok, pairs, cfg: (lambda model: next(scores)))
    trainer.train()
    p = trainer.progress
    assert p.stopped_early and p.step == 8  # BLEU 10, 20 (best, step 4), 15, 12 -> patience 2 spent
    assert p.best_bleu == 20.0 and p.best_step == 4
    assert json.loads((tmp_path / "best" / "info.json").read_text())["step"] == 4
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["bleu"] for r in records if "bleu" in r] == [10.0, 20.0, 15.0, 12.0]
    assert all(r["valid_ppl"] > 1 for r in records if "valid_ppl" in r)


def test_ema_weights_are_saved_and_loadable(tmp_path):
    cfg = small_config("train.max_steps=6", "train.eval_every=100", "train.save_every=3", "train.ema_decay=0.5")
    prepare_run(cfg, tmp_path).train()
    ckpt = tmp_path / "checkpoints" / "step_00000006"
    ema, raw = load_file(str(ckpt / "ema.safetensors")), load_file(str(ckpt / "model.safetensors"))
    shared = [k for k in raw if k in ema]
    assert shared and any(not torch.equal(ema[k].to(raw[k].dtype), raw[k]) for k in shared)
    model, _, _ = load_checkpoint(ckpt, use_ema=True)
    key = shared[0]
    torch.testing.assert_close(model.state_dict()[key], ema[key].to(raw[key].dtype))
