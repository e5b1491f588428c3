"""Set up a training run from a config: data, tokenizer, model, trainer; resume when the output
directory already holds a run of the same experiment (same config, tokenizer, data and --init-from), and
refuse, showing the difference, when it holds anything else.

With init_from (`aiayn train --init-from DIR`, fine-tuning) the model section, the vocabulary and the
starting weights are DIR's (any aiayn model directory: a checkpoint, a training output, an import-hf
import); optimizer, schedule and step counter start fresh. DIR is read at every start, resumes included,
but its weights only seed a new run: a resumed one continues from its own checkpoint."""

import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from aiayn.checkpoint import load_checkpoint
from aiayn.config import ExperimentConfig
from aiayn.config_text import config_yaml, parse_yaml, to_dict
from aiayn.data.audit import warn_held_out_in_training
from aiayn.data.corpora import MixedCorpus, corpus_tags, encoded_mixture
from aiayn.data.datasets import iter_pairs, to_examples
from aiayn.data.encoded import EncodedCorpus, encoded_corpus
from aiayn.data.fingerprint import data_fingerprint, files_fingerprint
from aiayn.data.memory_budget import check_training_sizes, epoch_pair_counts
from aiayn.data.separate_tokenizer import SeparateTokenizer
from aiayn.data.tokenizer import TOKENIZER_FILES, Tokenizer, load_dir
from aiayn.device import resolve_device
from aiayn.errors import AiaynError
from aiayn.io import write_bytes_atomic, write_text_atomic
from aiayn.model import build_model, count_parameters
from aiayn.run_dir import resolve_model_dir
from aiayn.threads import ThreadChoice, apply_threads, choose_threads
from aiayn.training import distributed as D
from aiayn.training.init_from import inherit_model
from aiayn.training.micro_batches import check_micro_batch_workers
from aiayn.training.run_files import claim_run_entries, open_lock
from aiayn.training.tensorboard_log import check_log_dir, open_log, summary_writer_class
from aiayn.training.timeline import AttentionTimeline
from aiayn.training.trainer import Trainer

log = logging.getLogger(__name__)
RUN_MARKER = "run.json"
TOKENIZER_SAMPLE_PAIRS = 1_000_000  # SentencePiece learns the vocabulary from at most this many pairs
# what may change when a run is resumed: budgets, logging, paths (the data itself is fingerprinted)
RESUMABLE = {"train.max_steps", "train.max_epochs", "train.max_minutes", "train.eval_every", "train.bleu_every",
             "train.bleu_sentences", "train.save_every", "train.keep_last", "train.average_last", "train.patience",
             "train.log_every", "train.tensorboard", "train.num_threads", "train.micro_batch_workers", "data.data_dir",
             "data.train_src", "data.train_tgt", "data.valid_src", "data.valid_tgt", "data.train", "data.valid"}


class RunMismatchError(AiaynError):
    """The output directory holds something other than a run of this experiment."""


def _flatten(values: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in values.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _is_run_dir(out: Path) -> bool:
    return (out / RUN_MARKER).exists() or ((out / "config.yaml").exists() and (out / "checkpoints").is_dir())


def check_output(out: Path) -> None:
    """A run goes into a new or empty directory, or continues the run already there."""
    if out.exists() and not out.is_dir():
        raise RunMismatchError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not _is_run_dir(out):
        raise RunMismatchError(f"--out {out} is not empty and holds no aiayn training run; nothing was written. "
                               f"Choose a new or empty directory")


def _read_marker(out: Path) -> dict:
    """run.json ({} when there is none, as in runs of older versions)."""
    marker = out / RUN_MARKER
    if not marker.exists():
        return {}
    try:
        values = json.loads(marker.read_text(encoding="utf-8"))
    except ValueError:  # JSON or UTF-8 errors
        values = None
    if not isinstance(values, dict):
        raise RunMismatchError(f"{marker}: damaged (not the JSON object aiayn writes); restore or delete "
                               f"it to resume")
    return values


def check_origin(out: Path, init_from: str | None) -> None:
    """A run that has trained continues as it started: from the same --init-from, or without one."""
    if not (out / "config.yaml").exists():
        return
    saved = _read_marker(out).get("init_from")
    if saved != init_from:
        was = f"with --init-from {saved}" if saved else "without --init-from"
        now = f"with --init-from {init_from}" if init_from else "without --init-from"
        raise RunMismatchError(f"{out} holds a run started {was}; this command is {now}. Resume it as it was "
                               f"started (the same command), or use a new --out")


def check_same_run(out: Path, cfg, fingerprint: str) -> None:
    """Stop before anything is written when the saved run differs from this command's. A run older than
    data.byte_fallback resumes with data.byte_fallback=false, as its tokenizer was trained."""
    saved = _read_marker(out).get("data_sha256")
    if saved and saved != fingerprint:
        raise RunMismatchError(f"{out} was trained on other data (fingerprint {saved[:12]} in {out / RUN_MARKER}, "
                               f"{fingerprint[:12]} now); use a new --out, or the run's own data")
    if not (out / "config.yaml").exists():
        return
    try:
        saved = _flatten(parse_yaml((out / "config.yaml").read_text(encoding="utf-8"), str(out / "config.yaml")) or {})
    except (UnicodeDecodeError, AttributeError):
        raise RunMismatchError(f"{out / 'config.yaml'}: damaged (not the config mapping aiayn writes)") from None
    if "data.byte_fallback" not in saved and cfg.data.byte_fallback:
        # the run predates the field (and byte fallback): it keeps its own tokenizer, which has none
        log.info("%s predates data.byte_fallback: its tokenizer has no byte fallback, and keeps none", out)
        cfg.data.byte_fallback = False
    now = _flatten(to_dict(cfg))
    # a field added after the run started (e.g. train.schedule) has the value that keeps the old behaviour
    # (data.byte_fallback: false, as such a run's tokenizer was trained)
    before = {**_flatten(to_dict(ExperimentConfig())), "data.byte_fallback": False}
    saved = {**{k: v for k, v in before.items() if k not in saved}, **saved}
    diff = [f"{k}: {saved.get(k)!r} in the run, {now.get(k)!r} now" for k in sorted(set(saved) | set(now))
            if k not in RESUMABLE and saved.get(k) != now.get(k)]
    if diff:
        raise RunMismatchError(f"{out} holds a run with another config; resuming it with this one would mix two "
                               f"experiments. Differences: {'; '.join(diff)}. Use a new --out (only budgets, "
                               f"logging and data paths may change on resume)")


def lock_run(out: Path):
    """An exclusive lock on the run directory, held while this process lives (the returned file must stay
    open): a second `aiayn train --out` on the same directory would interleave checkpoints and logs."""
    import fcntl

    handle = open_lock(out / ".lock")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RunMismatchError(f"{out} is in use by another aiayn train (it holds {out / '.lock'}); wait for "
                               f"it to end, or stop it, or use another --out") from None
    return handle


def _write_tokenizer(out: Path, files: dict[str, bytes]) -> None:
    """The run's tokenizer files, each written atomically; those of another tokenizer (left by a failed
    start) are removed first, as load_dir would prefer a stale tokenizer.model."""
    for name in TOKENIZER_FILES:
        if name not in files:
            (out / name).unlink(missing_ok=True)
    for name, data in files.items():
        write_bytes_atomic(out / name, data, follow_links=False)  # a link there is replaced, never written through


def _train_tokenizer(data, pairs: list) -> dict[str, bytes]:
    """The files of a new tokenizer: data.joint_vocab, one SentencePiece model over both sides (aiayn's
    tokenizer.model), else one per side in the separate-tokenizer format (source.spm, target.spm, vocab.json,
    target_vocab.json, tokenizer_config.json)."""
    tags = tuple(corpus_tags(data))  # data.corpora's tags: one piece each
    if data.joint_vocab:
        return Tokenizer.train([s for pair in pairs for s in pair], data.vocab_size, byte_fallback=data.byte_fallback,
                               lowercase=data.lowercase, user_defined_symbols=tags).files()
    return SeparateTokenizer.train([p[0] for p in pairs], [p[1] for p in pairs], data.vocab_size,
                                   data.byte_fallback, lowercase=data.lowercase, user_defined_symbols=tags).files()


def _tokenizer(cfg, out: Path, train_pairs, dist: D.DistInfo, files: dict[str, bytes] | None = None):
    """The run's tokenizer: `files` (--init-from's vocabulary: name -> bytes) copied into the run, else a
    SentencePiece tokenizer trained on the training pairs (_train_tokenizer). Written by the main process only."""
    has_tokenizer = (out / "tokenizer.model").is_file() or (out / "vocab.json").is_file()  # what load_dir reads
    # Until config.yaml is written no step has been trained: a tokenizer left by a start that failed
    # (or was stopped) may be of other settings, so it is made again.
    if dist.is_main and (not has_tokenizer or not (out / "config.yaml").exists()):
        if files is None:
            files = _train_tokenizer(cfg.data, sample_pairs(train_pairs, TOKENIZER_SAMPLE_PAIRS, cfg.train.seed))
        _write_tokenizer(out, files)
    elif dist.is_main and any((out / name).is_symlink() for name in TOKENIZER_FILES):
        _write_tokenizer(out, load_dir(out).files())  # the run's own copy, in place of a link to a file of the user's
    D.barrier(dist)
    return load_dir(out)


@dataclass
class InitModel:
    """What --init-from DIR gives a run: where it came from, the model's config, weights and tokenizer."""

    source: str  # DIR as an absolute path (recorded in run.json; a resume must name the same)
    model_dir: Path  # the checkpoint directory DIR resolved to
    cfg: ExperimentConfig
    weights: dict
    tokenizer: object


def load_init(init_from: str | Path, out: Path) -> InitModel:
    """Read --init-from DIR (before anything is written)."""
    model_dir = resolve_model_dir(init_from, "--init-from")
    run, model = out.resolve(), model_dir.resolve()
    if run == model or run in model.parents:
        raise RunMismatchError(f"--init-from {init_from} lies inside --out {out}; a run cannot start from "
                               f"itself: choose another --out")
    if model in run.parents or Path(init_from).resolve() in run.parents:
        raise RunMismatchError(f"--out {out} lies inside --init-from {init_from}; the run would be written into "
                               f"the model you start from: choose another --out")
    model, cfg, tokenizer = load_checkpoint(model_dir)
    log.info("fine-tuning from %s", model_dir)
    return InitModel(str(Path(init_from).resolve()), model_dir, cfg, model.state_dict(), tokenizer)


def _check_init_tokenizer(out: Path, tokenizer, init: InitModel) -> None:
    if tokenizer.proto != init.tokenizer.proto:
        raise RunMismatchError(f"{out}'s tokenizer files differ from those of --init-from {init.model_dir}: the "
                               f"run started from another model there; use a new --out")


def sample_pairs(pairs, size: int, seed: int) -> list:
    """Up to `size` pairs drawn uniformly from an iterable of any length (reservoir sampling, Vitter's
    algorithm R), in corpus order when it has no more than `size`."""
    rng, sample = random.Random(seed), []
    for n, pair in enumerate(pairs):
        if n < size:
            sample.append(pair)
        elif (j := rng.randrange(n + 1)) < size:
            sample[j] = pair
    return sample


def _check_lengths(corpus, limit: int, what: str) -> None:
    """Sentences the model cannot take (longer than its position table) fail before training starts."""
    longest = np.maximum(corpus.src_lengths, corpus.tgt_lengths) + 1  # with </s> or <s>
    if len(longest) and longest.max() > limit:
        number = int(np.argmax(longest > limit)) + 1
        raise AiaynError(f"{what}: non-blank pair {number} has {longest[number - 1]} subword tokens, more than "
                         f"model.max_len={limit} positions; shorten or remove it, or raise model.max_len")


def _write_marker(out: Path, fingerprint: str, files_sha256: str | None, init: InitModel | None) -> None:
    origin = {"init_from": init.source, "init_from_model": str(init.model_dir)} if init else {}
    values = {"output": "run", "data_sha256": fingerprint, "files_sha256": files_sha256, **origin}
    write_text_atomic(out / RUN_MARKER, json.dumps(values) + "\n", follow_links=False)


def _valid_source(data) -> str:
    if data.dataset == "files":
        return data.valid or f"{data.valid_src} / {data.valid_tgt}"
    return f"{data.dataset} {data.valid_split}" if data.dataset == "multi30k" else data.dataset


def _validation_pairs(data) -> list:
    """The first data.max_valid_pairs pairs of the validation set (streamed: the rest is only counted), with a
    warning naming the field when there are more."""
    pairs, total = [], 0
    for total, pair in enumerate(iter_pairs(data, "valid"), 1):
        if total <= data.max_valid_pairs:
            pairs.append(pair)
    if total > data.max_valid_pairs:
        log.warning("validation data (%s): %s pairs; validating on the first %s (data.max_valid_pairs; raise it "
                    "to validate on more, at the cost of memory and time)", _valid_source(data), f"{total:,}",
                    f"{data.max_valid_pairs:,}")
    return pairs


def _run_tokenizer(cfg, out: Path, dist: D.DistInfo, init: InitModel | None):
    """The run's tokenizer (trained, or --init-from's), and the model's vocabulary sizes and pad id from it."""
    tokenizer = _tokenizer(cfg, out, iter_pairs(cfg.data, "train"), dist, init.tokenizer.files() if init else None)
    if init is not None:
        _check_init_tokenizer(out, tokenizer, init)
    cfg.model.src_vocab_size, cfg.model.tgt_vocab_size = tokenizer.src_vocab_size, tokenizer.tgt_vocab_size
    cfg.model.pad_id = tokenizer.pad_id
    return tokenizer


def _training_corpus(data, tokenizer, fingerprint: str, cache: Path, dist: D.DistInfo):
    """The encoded training pairs (memory-mapped): data.corpora's each on its own, weighted (aiayn.data.corpora),
    else all in one."""
    def barrier():
        D.barrier(dist)

    if data.corpora:
        return encoded_mixture(data, tokenizer, fingerprint, cache, dist.is_main, barrier)
    return encoded_corpus(lambda: iter_pairs(data, "train"), tokenizer, data.max_len, fingerprint, cache,
                          dist.is_main, barrier, locked=True)


def _new_model(cfg, init: InitModel | None):
    """The model a new run starts from (a resumed one then loads its checkpoint over it): built from the
    config, with --init-from's weights when given. The seed is set first either way, so the RNG state that
    training starts from is the same in a run and in its resumed continuation."""
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model)
    if init is not None:
        model.load_state_dict(init.weights)
    return model


def _approximate_parameters(model) -> int:
    """An upper bound of a model config's parameters, from its sizes alone: embeddings and an untied output
    layer, each encoder layer's attention and FFN, each decoder layer's two attentions and FFN (an RNN's cells
    stay under it). Counted on the meta device instead, torch ran its initializers through Python references
    that import torch._dynamo (~70 MB) into every run."""
    D, F = model.d_model, model.d_ff
    vocab = model.src_vocab_size + 2 * model.tgt_vocab_size
    encoder_layer, decoder_layer = 4 * D * D + 2 * D * F, 8 * D * D + 2 * D * F
    return vocab * D + model.n_encoder_layers * encoder_layer + model.n_decoder_layers * decoder_layer


def _check_sizes(cfg, train) -> None:
    """The model and one batch against free memory (aiayn.data.memory_budget), before either is built."""
    parameters = _approximate_parameters(cfg.model)
    epoch_pairs = sum(epoch_pair_counts([len(p) for p in train.parts], train.weights)) \
        if isinstance(train, MixedCorpus) else len(train)
    longest = int(max(np.max(train.src_lengths), np.max(train.tgt_lengths))) + 1
    check_training_sizes(parameters=parameters, layers=cfg.model.n_encoder_layers + cfg.model.n_decoder_layers,
                         d_model=cfg.model.d_model, tgt_vocab_size=cfg.model.tgt_vocab_size,
                         max_tokens=cfg.train.max_tokens, epoch_pairs=epoch_pairs, longest=longest)


def _run_fingerprint(data, out: Path) -> tuple[str, str | None]:
    """(the training and validation data's fingerprint, the data files' own): the files' hash, when they are
    the same as when this run last started, saves reading every pair again."""
    files_sha256 = files_fingerprint(data)
    saved = _read_marker(out) if out.is_dir() else {}
    if files_sha256 is not None and saved.get("files_sha256") == files_sha256 and saved.get("data_sha256"):
        return saved["data_sha256"], files_sha256  # the same bytes as when this run last started
    # streamed, as the corpus is; the whole validation set, so that data.max_valid_pairs does not change it
    return data_fingerprint(iter_pairs(data, "train"), iter_pairs(data, "valid")), files_sha256


def prepare_run(cfg, out: str | Path, bleu_factory=None, device: str = "cpu", init_from: str | Path | None = None,
                overrides: list[str] = (), threads: ThreadChoice | None = None) -> Trainer:
    """bleu_factory(tokenizer, valid_pairs, cfg) -> (model -> dev BLEU), supplied by the caller.
    init_from: a model directory to fine-tune (see the module's docstring); overrides: the --set items that
    made cfg, so that one which conflicts with init_from's model is an error naming the field. threads: the
    caller's choose_threads(cfg.train.num_threads) (the command line prints it), else chosen here; the
    trainer keeps it as .threads."""
    out = Path(out)
    dev = resolve_device(device)
    dist = D.init_distributed(dev)
    check_micro_batch_workers(cfg, distributed=dist.enabled, device=dev)  # before anything is written
    if cfg.train.tensorboard:
        summary_writer_class()  # the tensorboard package is there (else one line), before anything is written
        check_log_dir(out)  # and no file of the user's is where its events go
    check_output(out)
    init = load_init(init_from, out) if init_from is not None else None
    if init is not None:
        inherit_model(cfg, init.cfg.model, list(overrides), str(init_from))
    D.barrier(dist)  # every process has checked before any of them writes
    if dev.type == "cuda":
        dev = torch.device("cuda", dist.local_rank)
    threads = apply_threads(threads or choose_threads(cfg.train.num_threads))  # aiayn.threads: why
    valid_pairs = _validation_pairs(cfg.data)
    if dist.is_main:  # held-out sentences trained on make dev and test scores overstate the model
        warn_held_out_in_training(cfg.data)
    fingerprint, files_sha256 = _run_fingerprint(cfg.data, out)
    out.mkdir(parents=True, exist_ok=True)
    lock = lock_run(out) if dist.is_main else None
    if dist.is_main:
        claim_run_entries(out)  # links at aiayn's names, temporaries of killed runs (run_files.py)
    check_origin(out, init.source if init else None)
    if dist.is_main and not (out / "config.yaml").exists():  # claim the directory before the first file
        _write_marker(out, fingerprint, files_sha256, init)
    tokenizer = _run_tokenizer(cfg, out, dist, init)
    check_same_run(out, cfg, fingerprint)
    train = _training_corpus(cfg.data, tokenizer, fingerprint, out / "encoded", dist)
    if not len(train):
        raise AiaynError(f"training data: every pair is longer than data.max_len={cfg.data.max_len} subword "
                         f"tokens, so nothing is left to train on; raise data.max_len")
    valid = EncodedCorpus.from_examples(to_examples(valid_pairs, tokenizer, None, "validation data"))
    if cfg.model.max_positions is not None:
        _check_lengths(valid, cfg.model.max_positions, f"validation data ({_valid_source(cfg.data)})")
    _check_sizes(cfg, train)
    model = _new_model(cfg, init)
    if dist.is_main:
        write_text_atomic(out / "config.yaml", config_yaml(cfg), follow_links=False)
        _write_marker(out, fingerprint, files_sha256, init)
        log.info("%s model, %s parameters; %d training pairs", cfg.model.arch, f"{count_parameters(model):,}",
                 len(train))
    bleu_fn = bleu_factory(tokenizer, valid_pairs, cfg) if bleu_factory else None
    trainer = Trainer(cfg, model, tokenizer, train, valid, out, bleu_fn, dist, dev)
    trainer.threads = threads
    trainer.run_lock = lock  # held as long as the trainer
    trainer.resume_run()
    if cfg.train.tensorboard and dist.is_main:
        trainer.tensorboard = open_log(trainer)
    if cfg.train.attention_timeline and dist.is_main:
        trainer.timeline = AttentionTimeline.for_run(out=out, examples=valid, n=cfg.train.attention_timeline,
                                                     tokenizer=tokenizer, eval_every=cfg.train.eval_every)
        trainer.timeline.resume(trainer.progress.step)
    return trainer
