import torch

from aiayn.checkpoint import save_checkpoint
from aiayn.config import load_config
from aiayn.model import ModelConfig, build_model

SRC_V, TGT_V, PAD, BOS = 23, 29, 0, 1


def small_model(arch_preset="tiny", **overrides):
    settings = dict(src_vocab_size=SRC_V, tgt_vocab_size=TGT_V, pad_id=PAD, dropout=0.0)
    cfg = ModelConfig.preset(arch_preset, **{**settings, **overrides})
    return build_model(cfg).eval()


def random_batch(batch=3, src_len=7, tgt_len=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, SRC_V, (batch, src_len), generator=g)
    tgt = torch.randint(3, TGT_V, (batch, tgt_len), generator=g)
    tgt[:, 0] = BOS
    return src, tgt


def step_by_step_logprobs(model, src, tgt_in, return_attention=False):
    state = model.init_state(model.encode(src)[0], src)
    outs, maps = [], []
    for t in range(tgt_in.size(1)):
        result = model.decode_step(tgt_in[:, t], state, return_attention)
        outs.append(result[0])
        state = result[1]
        if return_attention:
            maps.append(result[2])
    return torch.stack(outs, 1), maps


def model_dir(root, tokenizer, preset, **overrides):
    """An untrained model of `preset` (dropout 0, seed 0) saved as a checkpoint directory at root."""
    cfg = load_config(None, [])
    cfg.model = ModelConfig.preset(preset, src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                   pad_id=tokenizer.pad_id, dropout=0.0, **overrides)
    torch.manual_seed(0)
    model = build_model(cfg.model)
    save_checkpoint(root, model, cfg, tokenizer)
    return root
