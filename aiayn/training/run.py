"""Set up a training run from a config: data, tokenizer, model, trainer; resume when the output
directory already holds a checkpoint."""

import logging
from pathlib import Path

import torch

from aiayn.config import save_config
from aiayn.data.datasets import load_pairs, to_examples
from aiayn.data.tokenizer import Tokenizer
from aiayn.model import build_model, count_parameters
from aiayn.training import distributed as D
from aiayn.training.trainer import Trainer

log = logging.getLogger(__name__)


def _tokenizer(cfg, out: Path, train_pairs, dist: D.DistInfo) -> Tokenizer:
    path = out / "tokenizer.model"
    if not path.exists() and dist.is_main:
        sentences = [s for pair in train_pairs for s in pair]
        Tokenizer.train(sentences, cfg.data.vocab_size, seed=cfg.train.seed).save(path)
    D.barrier(dist)
    return Tokenizer.load(path)


def prepare_run(cfg, out: str | Path, bleu_factory=None, device: str = "cpu") -> Trainer:
    """bleu_factory(tokenizer, valid_pairs, cfg) -> (model -> dev BLEU), supplied by the caller."""
    out = Path(out)
    dev = torch.device(device)
    dist = D.init_distributed(dev)
    if dev.type == "cuda":
        dev = torch.device("cuda", dist.local_rank)
    if cfg.train.num_threads:
        torch.set_num_threads(cfg.train.num_threads)
    out.mkdir(parents=True, exist_ok=True)
    train_pairs, valid_pairs = load_pairs(cfg.data, "train"), load_pairs(cfg.data, "valid")
    tokenizer = _tokenizer(cfg, out, train_pairs, dist)
    cfg.model.src_vocab_size = cfg.model.tgt_vocab_size = tokenizer.vocab_size
    cfg.model.pad_id = tokenizer.pad_id
    train = to_examples(train_pairs, tokenizer, cfg.data.max_len, "training data")
    valid = to_examples(valid_pairs, tokenizer, None, "validation data")
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model)
    if dist.is_main:
        save_config(cfg, out / "config.yaml")
        log.info("%s model, %s parameters; %d training pairs", cfg.model.arch, f"{count_parameters(model):,}",
                 len(train))
    bleu_fn = bleu_factory(tokenizer, valid_pairs, cfg) if bleu_factory else None
    trainer = Trainer(cfg, model, tokenizer, train, valid, out, bleu_fn, dist, dev)
    latest = out / "latest"
    if latest.exists():
        trainer.resume(out / "checkpoints" / latest.read_text().strip())
    return trainer
