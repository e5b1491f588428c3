"""train.pronoun_probe (aiayn/training/pronoun_probe.py): its labels, its loss, that it counts only in
training (validation loss is translation's alone), and its bad configurations."""

import pytest
import torch

from aiayn.config import load_config
from aiayn.errors import AiaynError, ConfigError
from aiayn.training.loss import TrainingObjective
from aiayn.training.pronoun_probe import IGNORE, PronounProbe
from tests.paths import REPO

CONFIG = REPO / "configs" / "coreference.yaml"
BRIEF = ["data.synthetic_train=200", "data.synthetic_valid=8", "train.max_steps=3", "train.eval_every=3",
         "train.save_every=3", "train.bleu_sentences=4", "train.num_threads=1", "train.warmup_steps=2",
         "train.max_tokens=512", "train.average_last=1", "model.max_len=40", "data.max_len=39"]


class Pieces:
    """A tokenizer stand-in: ids of a handful of pieces; anything else is <unk> (1)."""
    unk_id = 1
    ids = {"▁it": 5, "▁er": 6, "▁sie": 7, "▁es": 8}

    def piece_to_id(self, piece):
        return self.ids.get(piece, self.unk_id)

    source_piece_to_id = piece_to_id


def test_labels_take_the_first_it_and_the_first_pronoun():
    probe = PronounProbe(tokenizer=Pieces(), weight=1.0)
    src = torch.tensor([[3, 4, 5, 9], [5, 3, 5, 0], [3, 3, 3, 0]])  # "it" at 2; at 0 (twice); none
    tgt = torch.tensor([[3, 7, 6, 2], [8, 3, 0, 0], [6, 2, 0, 0]])  # sie (then er); es; er, but no "it"
    position, label = probe.labels(src, tgt)
    assert position[:2].tolist() == [2, 0] and label.tolist() == [1, 2, IGNORE]


def test_the_loss_is_small_when_the_encoders_it_points_at_the_right_pronoun():
    probe, embedding = PronounProbe(tokenizer=Pieces(), weight=2.0), torch.eye(10)
    src, tgt = torch.tensor([[3, 5]]), torch.tensor([[7, 2]])  # "it" at 1; the reference says sie
    right, wrong = torch.zeros(1, 2, 10), torch.zeros(1, 2, 10)
    right[0, 1, 7], wrong[0, 1, 6] = 20.0, 20.0
    assert probe.loss(right, src, tgt, embedding) < 1e-6 < 2 * 19 < probe.loss(wrong, src, tgt, embedding)


def test_a_vocabulary_without_the_pieces_is_refused():
    class NoIt(Pieces):
        ids = {"▁er": 6, "▁sie": 7, "▁es": 8}

    with pytest.raises(AiaynError, match="needs the words it as pieces.*train.pronoun_probe=0"):
        PronounProbe(tokenizer=NoIt(), weight=1.0)


def test_only_the_coreference_transformer_takes_it():
    with pytest.raises(ConfigError, match="train.pronoun_probe=1 is an auxiliary loss of the coreference"):
        load_config(REPO / "configs" / "demo.yaml", ["train.pronoun_probe=1"])
    with pytest.raises(ConfigError, match="model.arch=rnn"):
        load_config(CONFIG, ["train.pronoun_probe=1", "model.arch=rnn"])
    with pytest.raises(ConfigError, match="train.pronoun_probe"):
        load_config(CONFIG, ["train.pronoun_probe=-1"])


def test_it_adds_to_the_training_loss_and_not_to_validations(tmp_path):
    from aiayn.training.run import prepare_run

    cfg = load_config(CONFIG, BRIEF + ["train.pronoun_probe=1", "model.dropout=0"])  # no dropout: repeatable
    trainer = prepare_run(cfg, tmp_path / "run")
    batch = trainer._collate(trainer.valid_examples, trainer._valid_batches[0])
    args = (batch.src, batch.tgt_in, batch.tgt_out)
    plain = TrainingObjective(model=trainer.model, pad_id=trainer.tokenizer.pad_id, epsilon=0.1)
    with torch.no_grad():
        trainer.model.eval()
        assert torch.equal(trainer.objective(*args)[0], plain(*args)[0])
        trainer.model.train()
        (loss, nll), (plain_loss, plain_nll) = trainer.objective(*args), plain(*args)
        memory, _ = trainer.model.encode(batch.src)
        probe_loss = trainer.objective.probe.loss(memory, batch.src, batch.tgt_out, trainer.model.tgt_embed.weight)
    assert probe_loss > 0 and torch.equal(nll, plain_nll)
    assert torch.allclose(loss, plain_loss + probe_loss, rtol=1e-5)
    trainer.train()
    assert trainer.progress.step == 3 and (tmp_path / "run" / "best" / "model.safetensors").exists()
