"""Experiment configuration: the typed sections (data, model, train, decode), their rules and cross-field
checks, and load_config: defaults <- a YAML file <- dotted `--set` overrides, then validated.

A value out of its range is an error that names the field and where it was set (the file, or --set).
Reading and writing the text (strict YAML, unknown keys, types) is aiayn.config_text's. The resolved
config is saved (as YAML) in every checkpoint.
"""

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from aiayn.config_text import apply_values, nest, parse_override, read_mapping
from aiayn.data import multi30k
from aiayn.data.corpora import check_data_files
from aiayn.data.tokenizer import BYTE_FALLBACK_MIN_VOCAB
from aiayn.errors import ConfigError
from aiayn.model.build import FieldError, ModelConfig, above, at_least, between, check_fields, fraction


@dataclass
class DataConfig:
    """What the model is trained on, and how its tokenizer is made.

    Attributes:
        dataset: synthetic (number words) | coreference (aiayn/data/coreference.py) | multi30k | files.
        src_lang: source language code (multi30k: en, de, fr or cs).
        tgt_lang: target language code.
        data_dir: multi30k: local directory (else $AIAYN_MULTI30K_DIR, else download to cache).
        train: dataset files: training pairs in one TSV file (source<TAB>target a line, .gz allowed), in
            place of train_src and train_tgt.
        valid: dataset files: validation pairs in one TSV file, in place of valid_src and valid_tgt.
        corpora: dataset files: several training corpora in place of train / train_src / train_tgt, each
            {src, tgt} or {tsv}, with an optional weight (> 0, default 1: its pairs per epoch as a multiple of
            its size) and tag (put before each of its source sentences, one piece of the vocabulary); see
            aiayn/data/corpora.py and the training guide.
        train_src: dataset files: training source file (plain text or .gz, one sentence a line).
        train_tgt: dataset files: training target file, aligned with train_src.
        valid_src: dataset files: validation source file.
        valid_tgt: dataset files: validation target file.
        valid_split: multi30k: the split used for validation.
        vocab_size: SentencePiece BPE pieces (of each side's model when joint_vocab is false).
        byte_fallback: characters unseen in training become byte pieces (not <unk>); costs 256 pieces: needs
            vocab_size >= 384.
        lowercase: SentencePiece folds case (its nmt_nfkc_cf rule) in training and at every later encode: the
            model reads and writes lowercased text, as the lowercased Multi30k of the published results (score
            it with -lc; dev BLEU is then -lc too). Like vocab_size, it shapes a new tokenizer only:
            --init-from keeps its model's.
        joint_vocab: one BPE model and id table for both languages; false: one per side.
        max_len: pairs longer than this (in subword tokens) are dropped from training and counted.
        max_valid_pairs: validation (loss, dev BLEU) uses at most this many pairs, the first ones, with a
            warning when the set has more: a validation set is held in memory (a 1M-pair set made a tiny
            20-step run peak at 1.49 GB RSS; with this cap 0.37 GB, as with a 1,000-pair set).
        synthetic_train: the built-in tasks (synthetic, coreference): training pairs.
        synthetic_valid: the built-in tasks: validation pairs (as many again are held out for testing).
        synthetic_seed: the built-in tasks: seed of the generated pairs.
        coreference_order: coreference: German clause order, source | pronoun_first.
    """

    dataset: str = "synthetic"
    src_lang: str = "en"
    tgt_lang: str = "de"
    data_dir: str = ""
    train: str = ""
    valid: str = ""
    corpora: list = field(default_factory=list)
    train_src: str = ""
    train_tgt: str = ""
    valid_src: str = ""
    valid_tgt: str = ""
    valid_split: str = "val"
    vocab_size: int = 8000
    byte_fallback: bool = True
    lowercase: bool = False
    joint_vocab: bool = True
    max_len: int = 128
    max_valid_pairs: int = 10_000
    synthetic_train: int = 20000
    synthetic_valid: int = 300
    synthetic_seed: int = 1234
    coreference_order: str = "source"


@dataclass
class TrainConfig:
    """How the model is trained: batches, optimizer, schedule, validation and checkpoints.

    Attributes:
        seed: seed of torch, numpy and the batch order.
        max_tokens: token budget of one micro-batch (source or target, whichever is larger).
        accumulate: micro-batches per optimizer step (per process).
        max_steps: stop after this many optimizer steps.
        max_epochs: stop after this many passes over the training data.
        max_minutes: stop (and finish normally) after this much wall time; 0 = no limit.
        schedule: noam (§5.3): the paper's, peak lr_factor * (d_model * warmup_steps)^-0.5; for fine-tuning a
            pretrained model: inverse_sqrt (linear warmup to train.lr, then lr * sqrt(warmup_steps / step), as
            fairseq) or constant (linear warmup to train.lr, then lr); for a run of a fixed length: linear
            (warmup to train.lr, then linear decay to 0 at train.max_steps, or at the step fit_steps_to_time
            chooses).
        fit_steps_to_time: linear with max_minutes: at each validation, end the decay at the last step that
            fits in the time left at the run's pace so far (never past max_steps), so the lr reaches 0 when the
            time is up on any machine; the lrs then depend on the machine's pace (such a run is not
            bit-reproducible).
        lr_factor: multiplies the Noam schedule.
        lr: peak learning rate of inverse_sqrt, constant and linear (required there; unused by noam).
        warmup_steps: steps of linear warmup (§5.3).
        adam_betas: Adam's beta1 and beta2 (§5.3).
        adam_eps: Adam's epsilon (§5.3).
        label_smoothing: epsilon_ls (§5.4).
        clip_norm: gradient norm clipping; 0 = no clipping (the paper clips nothing).
        bf16: bf16 autocast (CPU AMX or CUDA).
        fp16: float16 autocast with loss scaling (aiayn/training/loss_scale.py), for GPUs without bfloat16; on a
            CPU use bf16.
        eval_every: steps between validations (loss, perplexity).
        bleu_every: steps between dev BLEU by greedy decoding (0 = with every validation).
        bleu_sentences: dev sentences translated for dev BLEU.
        save_every: steps between checkpoints.
        keep_last: checkpoints kept (older ones are deleted).
        average_last: checkpoints averaged into average/ at the end; the paper averages the last 5.
        patience: early stopping after this many validations without a better dev BLEU (0 = off).
        ema_decay: exponential moving average of the weights (0 = off).
        log_every: steps between progress lines.
        tensorboard: TensorBoard event files under RUN/tensorboard/ (needs pip install 'aiayn[tensorboard]'):
            the logged metrics and, at each validation, a dev sentence's cross-attention
            (aiayn/training/tensorboard_log.py).
        attention_timeline: at each validation, keep the attention maps of this many dev sentences under
            RUN/timeline/ for the explorer's timeline slider (0 = off, at most 8; aiayn/training/timeline.py).
        pronoun_probe: the coreference task only: weight of an auxiliary loss that asks the encoder's output
            at "it" to predict the German pronoun (aiayn/training/pronoun_probe.py; it supervises no attention);
            0 = off.
        num_threads: torch CPU threads (0 = the CPUs this process may use: its affinity mask and a
            container's CPU quota; aiayn/threads.py).
        micro_batch_workers: CPU data parallelism in one process: each micro-batch is dealt into this many
            shares, run side by side in as many worker threads, each with num_threads / micro_batch_workers
            torch threads (0 = the whole micro-batch in the training thread; aiayn/training/micro_batches.py
            says why and what stays exact).
    """

    seed: int = 1
    max_tokens: int = 4096
    accumulate: int = 1
    max_steps: int = 100000
    max_epochs: int = 1000
    max_minutes: float = 0.0
    schedule: str = "noam"
    fit_steps_to_time: bool = False
    lr_factor: float = 1.0
    lr: float = 0.0
    warmup_steps: int = 4000
    adam_betas: tuple = (0.9, 0.98)
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1
    clip_norm: float = 0.0
    bf16: bool = False
    fp16: bool = False
    eval_every: int = 500
    bleu_every: int = 0
    bleu_sentences: int = 500
    save_every: int = 500
    keep_last: int = 5
    average_last: int = 5
    patience: int = 0
    ema_decay: float = 0.0
    log_every: int = 50
    tensorboard: bool = False
    attention_timeline: int = 0
    pronoun_probe: float = 0.0
    num_threads: int = 0
    micro_batch_workers: int = 0


@dataclass
class DecodeConfig:
    """The model's own decoding settings (what translate, evaluate and serve use unless told otherwise).

    Attributes:
        beam: beam size (§6.1).
        length_penalty: alpha (§6.1).
        max_len_a: maximum output length = a * source length + b.
        max_len_b: maximum output length = a * source length + b; §6.1: input length + 50.
        length_penalty_form: departure knob: "hf" divides by |Y|^alpha as transformers does (imported Marian
            models), not GNMT's lp.
        early_stopping: departure knob: True ends a sentence's search at K finished hypotheses (fairseq,
            CTranslate2); False (default) goes on while a live hypothesis could still win
            (aiayn/decoding/beam.py).
        min_length: departure knob: output tokens before the end token may end a hypothesis (0: none; imported models
            carry their generation config's).
        no_repeat_ngram_size: departure knob: no n-gram of this many tokens twice in an output (0: off).
    """

    beam: int = 4
    length_penalty: float = 0.6
    max_len_a: float = 1.0
    max_len_b: int = 50
    length_penalty_form: str = "gnmt"
    early_stopping: bool = False
    min_length: int = 0
    no_repeat_ngram_size: int = 0


@dataclass
class ExperimentConfig:
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=lambda: ModelConfig.preset("tiny"))
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

SCHEDULES = ("noam", "inverse_sqrt", "constant", "linear")  # train.schedule: implemented in aiayn/training/schedule.py


# Rules per section (field -> what is wrong, or None); model rules live with ModelConfig in model/build.py.
# Every float field must also be finite. Seeds: torch and numpy take any 32-bit unsigned seed.
def _betas(value):
    ok = len(value) == 2 and all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1
                                 for b in value)
    return None if ok else "must be two numbers in [0, 1), e.g. [0.9, 0.98]"


DATA_RULES = {
    "vocab_size": at_least(8),  # 4 special pieces (pad, unk, <s>, </s>) and some characters
    "max_len": at_least(1),
    "max_valid_pairs": at_least(1),
    "synthetic_train": between(1, 10_000_000),
    "synthetic_valid": between(1, 100_000),  # valid and test draw distinct numbers from < 1,000,000
    "synthetic_seed": between(0, 2**32 - 1),
    "coreference_order": lambda v: None if v in ("source", "pronoun_first") else "must be source or pronoun_first",
}
TRAIN_RULES = {
    "seed": between(0, 2**32 - 1), "max_tokens": at_least(1), "accumulate": at_least(1), "max_steps": at_least(1),
    "max_epochs": at_least(1), "max_minutes": at_least(0), "lr_factor": above(0), "warmup_steps": at_least(1),
    "schedule": lambda v: None if v in SCHEDULES else f"must be one of {', '.join(SCHEDULES)}", "lr": at_least(0),
    "adam_betas": _betas, "adam_eps": above(0), "label_smoothing": fraction, "clip_norm": at_least(0),
    "eval_every": at_least(1), "bleu_every": at_least(0), "bleu_sentences": at_least(1), "save_every": at_least(1),
    "keep_last": at_least(1), "average_last": at_least(0), "patience": at_least(0), "ema_decay": fraction,
    "log_every": at_least(1), "num_threads": between(0, 1024), "micro_batch_workers": between(0, 1024),
    "attention_timeline": between(0, 8), "pronoun_probe": at_least(0),
}
DECODE_RULES = {"beam": at_least(1), "length_penalty": between(0, 10), "max_len_a": at_least(0),
                "max_len_b": at_least(1), "min_length": at_least(0), "no_repeat_ngram_size": at_least(0),
                "length_penalty_form": lambda v: None if v in ("gnmt", "hf") else "must be gnmt or hf"}




def _use_preset(cfg: ExperimentConfig, values: dict, source: str, origins: dict) -> None:
    """`model: {preset: NAME}` in a file (or `--set model.preset=NAME`): start the model from that preset,
    then apply the file's keys."""
    model = values.get("model")
    preset = model.pop("preset", None) if isinstance(model, dict) else None
    if preset is None:
        return
    try:
        cfg.model = ModelConfig.preset(preset)
    except FieldError as err:
        raise ConfigError(f"{source}: {err}") from None
    origins.update({f"model.{f.name}": f"{source} (model.preset={preset})" for f in dataclasses.fields(cfg.model)})


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> ExperimentConfig:
    """Defaults <- YAML file (if any) <- `--set` overrides; then validated."""
    cfg, origins = ExperimentConfig(), {}
    if path is not None:
        values = read_mapping(Path(path))
        _use_preset(cfg, values, str(path), origins)
        apply_values(cfg, values, "", str(path), origins)
    for item in overrides:
        keys, value = parse_override(item)
        values = nest(keys, value)
        _use_preset(cfg, values, f"--set {item!r}", origins)  # model.preset=NAME: the whole model section
        apply_values(cfg, values, "", "--set", origins)
    return validate(cfg, origins)


def _check_data(cfg: ExperimentConfig) -> None:
    data = cfg.data
    if data.dataset not in ("synthetic", "coreference", "multi30k", "files"):
        raise FieldError("data.dataset", f"data.dataset={data.dataset!r} must be synthetic, coreference, multi30k "
                         f"or files")
    check_data_files(data)  # data.corpora, data.train / data.valid (TSV), or the aligned files
    if cfg.train.pronoun_probe and (data.dataset != "coreference" or cfg.model.arch != "transformer"):
        raise FieldError(("train.pronoun_probe", "data.dataset", "model.arch"), f"train.pronoun_probe="
                         f"{cfg.train.pronoun_probe:g} is an auxiliary loss of the coreference task's Transformer, "
                         f"not of data.dataset={data.dataset} with model.arch={cfg.model.arch}; set "
                         f"train.pronoun_probe=0")
    if data.dataset == "multi30k":
        for name, value, allowed in (("src_lang", data.src_lang, multi30k.LANGS),
                                     ("tgt_lang", data.tgt_lang, multi30k.LANGS),
                                     ("valid_split", data.valid_split, multi30k.SPLITS)):
            if value not in allowed:
                raise FieldError(f"data.{name}", f"data.{name}={value!r}: Multi30k has {', '.join(allowed)}")
        if data.src_lang == data.tgt_lang:
            raise FieldError(("data.src_lang", "data.tgt_lang"), f"data.src_lang and data.tgt_lang are both "
                             f"{data.src_lang!r}; choose two languages")


def _check_vocab(cfg: ExperimentConfig) -> None:
    """How a new run's tokenizer is trained (unused with --init-from, whose vocabulary is taken as it is)."""
    data = cfg.data
    if data.byte_fallback and data.vocab_size < BYTE_FALLBACK_MIN_VOCAB:
        raise FieldError(("data.byte_fallback", "data.vocab_size"), f"data.byte_fallback=true needs data.vocab_size "
                         f">= {BYTE_FALLBACK_MIN_VOCAB} (256 of its pieces are bytes; data.vocab_size="
                         f"{data.vocab_size}); raise data.vocab_size or set data.byte_fallback=false (as runs started "
                         f"before data.byte_fallback existed were trained)")
    if not data.joint_vocab and cfg.model.share_embeddings:
        raise FieldError(("data.joint_vocab", "model.share_embeddings"), "model.share_embeddings=true ties the "
                         "source and target embeddings, which needs one vocabulary, but data.joint_vocab=false "
                         "trains two; set model.share_embeddings=false (the target embedding and the output "
                         "projection stay tied by model.tie_output) or data.joint_vocab=true")


def _check_schedule(train: TrainConfig) -> None:
    """train.lr is the peak of inverse_sqrt, constant and linear; Noam's peak comes from d_model and lr_factor.
    linear decays to 0 at train.max_steps (or earlier, with fit_steps_to_time and a time budget), which must
    come after the warmup."""
    fields = ("train.lr", "train.schedule")
    if train.schedule != "noam" and train.lr <= 0:
        raise FieldError(fields, f"train.schedule={train.schedule} needs train.lr, its peak learning rate (> 0; "
                         f"train.lr={train.lr!r}); set e.g. train.lr=5e-5 for fine-tuning a pretrained model")
    if train.schedule == "noam" and train.lr != 0:
        raise FieldError(fields, f"train.lr={train.lr!r} is not used by train.schedule=noam (its peak is "
                         f"lr_factor * (d_model * warmup_steps)^-0.5); set train.schedule=inverse_sqrt or "
                         f"constant to use train.lr, or scale Noam with train.lr_factor")
    fit = "train.fit_steps_to_time fits the end of a linear decay to the time budget: it"
    if train.fit_steps_to_time and train.schedule != "linear":
        raise FieldError(("train.fit_steps_to_time", "train.schedule"), f"{fit} needs train.schedule=linear, "
                         f"not {train.schedule}; set it, or drop train.fit_steps_to_time")
    if train.fit_steps_to_time and train.max_minutes <= 0:
        raise FieldError(("train.fit_steps_to_time", "train.max_minutes"), f"{fit} needs train.max_minutes > 0 "
                         f"(not {train.max_minutes:g}); set it, or drop train.fit_steps_to_time")
    if train.schedule == "linear" and train.max_steps <= train.warmup_steps:
        raise FieldError(("train.max_steps", "train.warmup_steps"), f"train.schedule=linear decays the lr to 0 "
                         f"at train.max_steps={train.max_steps}, which must be after train.warmup_steps="
                         f"{train.warmup_steps}; raise train.max_steps or lower train.warmup_steps")


def _check_precision(train: TrainConfig) -> None:
    if train.bf16 and train.fp16:
        raise FieldError(("train.bf16", "train.fp16"), "train.bf16 and train.fp16 are both true: autocast takes one "
                         "dtype; keep train.bf16 (CPUs, and GPUs with bfloat16) or train.fp16 (older GPUs)")


def _check_lengths(cfg: ExperimentConfig) -> None:
    """Training pairs of up to data.max_len tokens get <s> or </s> added: the model needs data.max_len + 1
    positions (a Transformer's position table, a location score's output size), else training crashes."""
    has_positions = cfg.model.max_positions is not None or cfg.model.score == "location"
    if has_positions and cfg.data.max_len >= cfg.model.max_len:
        raise FieldError(("data.max_len", "model.max_len", "model.arch"), f"data.max_len={cfg.data.max_len} "
                         f"must be < model.max_len={cfg.model.max_len} (sentences get <s> or </s> added); lower "
                         f"data.max_len or raise model.max_len")


def validate(cfg: ExperimentConfig, origins: dict | None = None, training: bool = True) -> ExperimentConfig:
    """Every field against its rule; an error names the field and, when known, where it was set.
    training=False checks only what inference uses (model, decode): a saved run's data and train sections
    were checked when it started, and an older run may predate a rule."""
    try:
        cfg.model.validate()
        check_fields(cfg.decode, "decode", DECODE_RULES)
        if training:
            check_fields(cfg.data, "data", DATA_RULES)
            check_fields(cfg.train, "train", TRAIN_RULES)
            _check_data(cfg)
            _check_vocab(cfg)
            _check_schedule(cfg.train)
            _check_precision(cfg.train)
            _check_lengths(cfg)
    except FieldError as err:
        where = next((origins[f] for f in err.fields if f in (origins or {})), None)
        raise ConfigError(f"{where}: {err}" if where else str(err)) from None
    return cfg


def config_from_dict(values: dict, source: str = "config", training: bool = False) -> ExperimentConfig:
    """A saved config (a checkpoint's config.yaml); see validate() for `training`."""
    cfg, origins = ExperimentConfig(), {}
    apply_values(cfg, values, "", source, origins)
    return validate(cfg, origins, training)


