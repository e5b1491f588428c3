"""`aiayn train --init-from DIR` (fine-tuning): a small random MarianMTModel is imported with import-hf and
fine-tuned on Multi30k pairs with the shipped configs/finetune_opus_de_en.yaml: the loss falls, the run
translates, and an interrupted-then-resumed run equals an uninterrupted one bit for bit. Also: a --set that
conflicts with DIR's model is refused, an aiayn-trained checkpoint is a DIR too, and the weights a run
starts from are DIR's."""

import json
import shutil
import warnings
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from aiayn.checkpoint import load_checkpoint
from aiayn.cli import main
from aiayn.config import load_config
from aiayn.config_text import config_yaml
from aiayn.decoding.translator import Translator
from aiayn.training.run import RunMismatchError, check_same_run
from aiayn.training.schedule import inverse_sqrt_rate
from tests.data_helpers import find_multi30k, marian_spm, multi30k_lines, spm_pieces
from tests.paths import REPO

FINETUNE_CONFIG = REPO / "configs" / "finetune_opus_de_en.yaml"


MULTI30K = find_multi30k()
needs_multi30k = pytest.mark.skipif(MULTI30K is None, reason="no local Multi30k copy (set AIAYN_MULTI30K_DIR)")
quiet = pytest.mark.filterwarnings("ignore::UserWarning")  # transformers: "Recommended: pip install sacremoses"


def _lines(lang: str, split: str, n: int) -> list[str]:
    return multi30k_lines(MULTI30K, lang, split, n)


def _hf_dir(root: Path) -> Path:
    """A random MarianMTModel (d_model 32, 2 + 2 layers, separate source and target vocabularies, so that the
    run holds every kind of tokenizer file: source.spm, target.spm, vocab.json, target_vocab.json) and its
    MarianTokenizer, saved with save_pretrained."""
    transformers = pytest.importorskip("transformers")
    src, tgt = marian_spm(_lines("de", "train", 400), 220), marian_spm(_lines("en", "train", 400), 200)
    (root / "source.spm").write_bytes(src)
    (root / "target.spm").write_bytes(tgt)
    pieces = list(dict.fromkeys(spm_pieces(src) + spm_pieces(tgt)))
    vocab = {p: i for i, p in enumerate(["</s>", "<unk>", *pieces, "<pad>"])}
    target = {p: i for i, p in enumerate(["</s>", "<unk>", *reversed(pieces), "<pad>"])}  # other ids, same specials
    (root / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (root / "target_vocab.json").write_text(json.dumps(target), encoding="utf-8")
    tok = transformers.MarianTokenizer(str(root / "source.spm"), str(root / "target.spm"), str(root / "vocab.json"),
                                       separate_vocabs=True, target_vocab_file=str(root / "target_vocab.json"))
    assert tok.pad_token_id == vocab["<pad>"] == target["<pad>"]
    config = transformers.MarianConfig(
        vocab_size=len(vocab), decoder_vocab_size=len(target), d_model=32, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_position_embeddings=96, pad_token_id=tok.pad_token_id, decoder_start_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, forced_eos_token_id=None, activation_function="swish", scale_embedding=True,
        dropout=0.1, share_encoder_decoder_embeddings=False, separate_vocabs=True)
    torch.manual_seed(0)
    out = root / "hf"
    transformers.MarianMTModel(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """An aiayn checkpoint directory made by `aiayn import-hf` from a random Marian model."""
    root = tmp_path_factory.mktemp("marian")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = _hf_dir(root)
    assert main(["import-hf", str(hf), "--out", str(root / "imported")]) == 0
    return root / "imported"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """300 training and 30 validation pairs of Multi30k de->en, as plain text files."""
    root = tmp_path_factory.mktemp("data")
    for split, name, n in (("train", "train", 300), ("val", "valid", 30)):
        for lang in ("de", "en"):
            (root / f"{name}.{lang}").write_text("\n".join(_lines(lang, split, n)) + "\n", encoding="utf-8")
    return root


def _finetune_args(data_dir: Path, steps: int) -> list[str]:
    """The shipped fine-tuning config on the small files, sized for a 2-core CPU and a d_model-32 model."""
    settings = ["data.dataset=files", f"data.train_src={data_dir / 'train.de'}",
                f"data.train_tgt={data_dir / 'train.en'}", f"data.valid_src={data_dir / 'valid.de'}",
                f"data.valid_tgt={data_dir / 'valid.en'}", "data.max_len=80", "train.lr=3e-3",
                "train.warmup_steps=5", "train.max_tokens=500", "train.accumulate=1", f"train.max_steps={steps}",
                "train.eval_every=10", "train.save_every=5", "train.log_every=1", "train.bleu_sentences=10",
                "train.num_threads=1", "train.average_last=2", "train.keep_last=3"]
    return [str(FINETUNE_CONFIG)] + [x for s in settings for x in ("--set", s)]


def _train(args: list[str], init: Path, out: Path) -> int:
    return main(["train", *args, "--init-from", str(init), "--out", str(out)])


def _step_losses(out: Path) -> dict:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows if "loss" in r}


@pytest.fixture(scope="module")
def finetuned(imported, data_dir, tmp_path_factory):
    """An uninterrupted 20-step fine-tuning run of the imported model."""
    out = tmp_path_factory.mktemp("finetuned") / "run"
    assert _train(_finetune_args(data_dir, 20), imported, out) == 0
    return out


@needs_multi30k
@quiet
def test_finetuning_an_imported_model_lowers_the_loss_and_translates(finetuned, imported):
    losses = _step_losses(finetuned)
    assert sorted(losses) == list(range(1, 21))
    first, last = sum(losses[n] for n in (1, 2, 3)) / 3, sum(losses[n] for n in (18, 19, 20)) / 3
    assert last < first - 0.5, losses  # nats per token (about 6.0 -> 5.1 here)
    rows = [json.loads(line) for line in (finetuned / "metrics.jsonl").read_text().splitlines()]
    valid = [r["valid_loss"] for r in rows if "valid_loss" in r]
    assert len(valid) == 2 and valid[1] < valid[0]
    # the schedule is inverse_sqrt with peak train.lr (the logged lr is the one of the logged step's update)
    lr = {r["step"]: r["lr"] for r in rows if "lr" in r}
    assert lr[20] == pytest.approx(inverse_sqrt_rate(20, 3e-3, 5)) and lr[2] == pytest.approx(3e-3 * 2 / 5)
    # the vocabulary is the imported model's (no SentencePiece training): its files, copied
    for name in ("source.spm", "target.spm", "vocab.json", "target_vocab.json", "tokenizer_config.json"):
        assert (finetuned / name).read_bytes() == (imported / name).read_bytes(), name
    assert not (finetuned / "tokenizer.model").exists()
    marker = json.loads((finetuned / "run.json").read_text(encoding="utf-8"))
    assert marker["init_from"] == str(imported.resolve())
    # the model section is the imported one; the run's checkpoints load and translate
    _, cfg, _ = load_checkpoint(finetuned / "checkpoints" / "step_00000020")
    _, imported_cfg, _ = load_checkpoint(imported)
    assert cfg.model == imported_cfg.model and cfg.train.schedule == "inverse_sqrt"
    results = Translator.from_pretrained(finetuned).translate(_lines("de", "test_2016_flickr", 3), beam=2)
    assert all(r.text.strip() for r in results)


@needs_multi30k
@quiet
def test_interrupted_then_resumed_finetuning_equals_uninterrupted(finetuned, imported, data_dir, tmp_path, capsys):
    out = tmp_path / "run"
    assert _train(_finetune_args(data_dir, 10), imported, out) == 0
    assert _train(_finetune_args(data_dir, 20), imported, out) == 0  # the same command, a larger budget
    assert "resuming from" in capsys.readouterr().out
    final = "checkpoints/step_00000020/model.safetensors"
    expected, got = load_file(finetuned / final), load_file(out / final)
    assert expected.keys() == got.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=0)
    assert _step_losses(out) == _step_losses(finetuned)
    # the run continues only as it started: from the same --init-from
    assert main(["train", *_finetune_args(data_dir, 30), "--out", str(out)]) == 2
    assert "started with --init-from" in capsys.readouterr().err


@needs_multi30k
@quiet
@pytest.mark.parametrize("setting, field", [("model.d_model=64", "model.d_model"),
                                            ("model.preset=tiny", "model.preset")])
def test_a_conflicting_model_setting_is_refused(imported, data_dir, tmp_path, capsys, setting, field):
    out = tmp_path / "run"
    assert _train([*_finetune_args(data_dir, 5), "--set", setting], imported, out) == 2
    err = capsys.readouterr().err
    assert field in err and "--init-from" in err and "Traceback" not in err
    assert not out.exists()


def test_init_from_an_aiayn_checkpoint_starts_from_its_weights(transformer_dir, tmp_path, capsys):
    """A tiny aiayn Transformer (joint tokenizer.model) fine-tuned on the built-in task for 2 steps at a
    learning rate of 1e-12: the weights stay DIR's; the tokenizer is DIR's, byte for byte; the config file's
    own model section (configs/demo.yaml: d_model 64, dropout 0.1) is replaced by DIR's; a --set of the same
    value as DIR's, and of the dropout, is allowed."""
    out = tmp_path / "run"
    settings = ["data.synthetic_train=200", "data.synthetic_valid=10", "train.schedule=constant", "train.lr=1e-12",
                "train.warmup_steps=1", "train.max_tokens=400", "train.max_steps=2", "train.save_every=2",
                "train.bleu_sentences=5", "train.num_threads=1", "model.d_model=64", "model.dropout=0.2"]
    argv = ["train", "--init-from", str(transformer_dir), "--out", str(out)]
    assert main(argv + [x for s in settings for x in ("--set", s)]) == 0
    assert (out / "tokenizer.model").read_bytes() == (transformer_dir / "tokenizer.model").read_bytes()
    model, cfg, _ = load_checkpoint(out / "checkpoints" / "step_00000002")
    start, start_cfg, _ = load_checkpoint(transformer_dir)
    assert cfg.model.dropout == 0.2 and start_cfg.model.dropout == 0.0
    start_cfg.model.dropout = 0.2
    assert cfg.model == start_cfg.model
    for (name, tensor), (_, before) in zip(model.state_dict().items(), start.state_dict().items()):
        torch.testing.assert_close(tensor, before, rtol=0, atol=1e-9, msg=name)
    assert main(["train", "--init-from", str(tmp_path / "missing"), "--out", str(tmp_path / "other")]) == 2
    assert "pass --init-from DIR" in capsys.readouterr().err
    model = tmp_path / "model"  # a run written into the model it starts from: refused, nothing written
    shutil.copytree(transformer_dir, model)
    before = sorted(p.name for p in model.iterdir())
    assert main(["train", "--init-from", str(model), "--out", str(model / "run")]) == 2
    assert "lies inside --init-from" in capsys.readouterr().err and sorted(p.name for p in model.iterdir()) == before


def test_runs_saved_before_the_schedule_fields_resume(tmp_path):
    """A run's config.yaml written before train.schedule and train.lr existed matches a config with their
    defaults (noam, 0), and only those."""
    cfg = load_config(None, ["data.vocab_size=64", "data.byte_fallback=false"])
    saved = yaml.safe_load(config_yaml(cfg))
    del saved["train"]["schedule"], saved["train"]["lr"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(saved), encoding="utf-8")
    check_same_run(tmp_path, cfg, "fingerprint")
    with pytest.raises(RunMismatchError, match="train.schedule: 'noam' in the run, 'constant' now"):
        check_same_run(tmp_path, load_config(None, ["data.vocab_size=64", "data.byte_fallback=false",
                                                    "train.schedule=constant",
                                                    "train.lr=1e-4"]), "fingerprint")
