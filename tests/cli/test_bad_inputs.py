"""Bad inputs and careless commands: each case exits with a one-line error (no traceback) that names the
file, field or option, and leaves every file outside the intended output exactly as it was.

Config and corpus cases are in test_bad_inputs_config_data.py; server cases in test_web_server.py."""

import hashlib
import shutil
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aiayn.cli import main
from tests.cli_helpers import assert_user_error, run_cli
from tests.model_helpers import model_dir

SENT = "forty five"


def tree_digest(root: Path) -> dict:
    """{relative path: sha256} of every file (and symlink target) under root."""
    out = {}
    for path in sorted(Path(root).rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = "-> " + str(path.readlink())
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


@pytest.fixture
def workspace(tmp_path, transformer_dir):
    """Two checkpoints of one model, a fake training run holding them, a user's folder, an input file."""
    ckpts = tmp_path / "run" / "checkpoints"
    for step in (1, 2):
        shutil.copytree(transformer_dir, ckpts / f"step_{step:08d}")
        torch.save({"progress": {"step": step}}, ckpts / f"step_{step:08d}" / "trainer_state.pt")
    (tmp_path / "run" / "latest").write_text("step_00000002\n")
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1}\n')
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("years of work")
    (tmp_path / "in.txt").write_text("forty five\nnine\n")
    return tmp_path


# ---- outputs that would destroy something -----------------------------------------------------------
def _average_args(ws):
    return ["average", ws / "run/checkpoints/step_00000001", ws / "run/checkpoints/step_00000002", "--out"]


@pytest.mark.parametrize("out, needle", [
    ("run", "input"),                                # the run directory holding the inputs
    ("run/checkpoints/step_00000002", "input"),       # one of the inputs
    ("run/checkpoints/step_00000002/avg", "input"),   # inside an input
    ("mine", "not empty"),                            # a user's folder
    ("in.txt", "not a directory"),                    # a file
])
def test_average_never_replaces_what_it_did_not_make(workspace, capsys, out, needle):
    before = tree_digest(workspace)
    code, output = run_cli(_average_args(workspace) + [workspace / out], capsys)
    assert_user_error(code, output, needle, workspace / out)
    assert tree_digest(workspace) == before


def test_average_replaces_its_own_output_only_with_force(workspace, capsys):
    out = workspace / "avg"
    assert run_cli(_average_args(workspace) + [out], capsys)[0] == 0
    first = tree_digest(workspace)
    code, output = run_cli(_average_args(workspace) + [out], capsys)
    assert_user_error(code, output, "--force", out)
    assert tree_digest(workspace) == first
    assert run_cli(_average_args(workspace) + [out, "--force"], capsys)[0] == 0
    assert not [p for p in workspace.iterdir() if p.name.startswith(".")], "temporary directories left behind"


@pytest.mark.parametrize("out, needle", [("run", "input"), ("mine", "not empty"), ("in.txt", "not a directory"),
                                         ("run/checkpoints/step_00000002", "input")])
def test_export_never_replaces_what_it_did_not_make(workspace, capsys, out, needle):
    pytest.importorskip("ctranslate2")
    before = tree_digest(workspace)
    code, output = run_cli(["export", "--model", workspace / "run", "--out", workspace / out], capsys)
    assert_user_error(code, output, needle)
    assert tree_digest(workspace) == before


def test_export_replaces_its_own_output_only_with_force(workspace, capsys):
    pytest.importorskip("ctranslate2")
    args = ["export", "--model", workspace / "run", "--out", workspace / "ct2"]
    assert run_cli(args, capsys)[0] == 0
    assert_user_error(*run_cli(args, capsys), "--force")
    assert run_cli(args + ["--force"], capsys)[0] == 0
    assert (workspace / "ct2" / "model.bin").exists()


def test_translate_output_same_as_stdin_reads_before_replacing(workspace, capsys, monkeypatch):
    """`aiayn translate --output f < f` used to truncate f before reading it."""
    f = workspace / "in.txt"
    with open(f, encoding="utf-8") as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        code, output = run_cli(["translate", "--model", workspace / "run", "--output", f], capsys)
    assert code == 0, output
    assert len(f.read_text().splitlines()) == 2


def test_translate_output_equal_to_input_is_refused(workspace, capsys):
    before = tree_digest(workspace)
    f = workspace / "in.txt"
    code, output = run_cli(["translate", "--model", workspace / "run", "--input", f, "--output", f], capsys)
    assert_user_error(code, output, "also an input")
    assert tree_digest(workspace) == before


def test_planted_symlink_at_a_temporary_name_is_not_followed(workspace, capsys):
    """The old helpers wrote through `.out.txt.tmp` and `.maps.tmp.json`; temp names are now unique."""
    victim = workspace / "victim.txt"
    victim.write_text("precious")
    for name in (".out.txt.tmp", ".maps.tmp.json", ".out.txt.tmp.txt"):
        (workspace / name).symlink_to(victim)
    args = ["translate", "--model", workspace / "run", "--input", workspace / "in.txt", "--output",
            workspace / "out.txt"]
    assert run_cli(args, capsys)[0] == 0
    args = ["attention", "--model", workspace / "run", SENT, "--out", workspace / "maps.json"]
    assert run_cli(args, capsys)[0] == 0
    assert victim.read_text() == "precious"
    assert (workspace / "out.txt").read_text().count("\n") == 2


@pytest.mark.parametrize("output, needle", [("mine", "is a directory"), ("missing/out.txt", "does not exist")])
def test_translate_output_path_errors(workspace, capsys, output, needle):
    before = tree_digest(workspace)
    code, out = run_cli(["translate", "--model", workspace / "run", "--input", workspace / "in.txt",
                         "--output", workspace / output], capsys)
    assert_user_error(code, out, needle, workspace / output)
    assert tree_digest(workspace) == before


def test_failed_atomic_write_leaves_target_and_no_temporary_file(tmp_path):
    from aiayn.io import atomic_path

    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_killed_tokenizer_write_leaves_no_partial_file(tmp_path, monkeypatch):
    """tokenizer.model used to be written in place: a kill then left a 0-byte file and the run could
    never resume. The kill is simulated at the rename of the finished temporary file."""
    import aiayn.io as checkpoint
    from aiayn.config import load_config
    from aiayn.training.run import prepare_run

    replace = checkpoint.os.replace

    def killed(src, dst):
        if Path(dst).name == "tokenizer.model":
            raise KeyboardInterrupt
        replace(src, dst)

    monkeypatch.setattr(checkpoint.os, "replace", killed)
    cfg = load_config(None, ["data.synthetic_train=200", "data.synthetic_valid=10", "data.vocab_size=64",
                             "data.byte_fallback=false"])
    with pytest.raises(KeyboardInterrupt):
        prepare_run(cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "tokenizer.model").exists()
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.startswith(".") and p.name != ".lock"]
    monkeypatch.setattr(checkpoint.os, "replace", replace)  # the retry is not blocked by the failed start
    trainer = prepare_run(cfg, tmp_path / "run")
    assert (tmp_path / "run" / "tokenizer.model").exists() and trainer.progress.step == 0


# ---- checkpoints that do not belong together, or are damaged ---------------------------------------------
def _damage_tokenizer(model, other):
    from aiayn.data.synthetic import number_task
    from aiayn.data.tokenizer import Tokenizer

    pairs = number_task(300, 5, 5, seed=3)["train"]
    (model / "tokenizer.model").write_bytes(Tokenizer.train([s for p in pairs for s in p], 60).proto)


def _edit_config(model, old, new):
    path = model / "config.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


DAMAGE = {
    "tokenizer of another model": (_damage_tokenizer, "tokenizer.model"),
    "n_heads edited 4 -> 2": (lambda m, o: _edit_config(m, "n_heads: 4", "n_heads: 2"), "model.n_heads"),
    "d_ff edited (shapes differ)": (lambda m, o: _edit_config(m, "d_ff: 256", "d_ff: 128"), "model.d_ff"),
    "weights truncated": (lambda m, o: (m / "model.safetensors").write_bytes(
        (m / "model.safetensors").read_bytes()[:1000]), "model.safetensors"),
    "weights random bytes": (lambda m, o: (m / "model.safetensors").write_bytes(b"\x07" * 5000), "model.safetensors"),
    "tokenizer random bytes": (lambda m, o: (m / "tokenizer.model").write_bytes(b"junk" * 99), "tokenizer.model"),
    "config not YAML": (lambda m, o: (m / "config.yaml").write_text("model: [unclosed"), "config.yaml"),
    "config a list": (lambda m, o: (m / "config.yaml").write_text("- 1\n- 2\n"), "config.yaml"),
    "config n_heads 0": (lambda m, o: _edit_config(m, "n_heads: 4", "n_heads: 0"), "n_heads"),
    "no tokenizer": (lambda m, o: (m / "tokenizer.model").unlink(), "tokenizer.model"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_inconsistent_or_damaged_checkpoint_is_a_clear_error(tmp_path, transformer_dir, capsys, case):
    model = tmp_path / "model"
    shutil.copytree(transformer_dir, model)
    damage, needle = DAMAGE[case]
    damage(model, transformer_dir)
    before = tree_digest(tmp_path)
    code, output = run_cli(["translate", "--model", model, "--input", "/dev/null"], capsys)
    assert_user_error(code, output, needle)
    assert tree_digest(tmp_path) == before


# ---- decoding options, devices ------------------------------------------------------------------------
@pytest.mark.parametrize("option, needle", [
    (["--beam", "0"], "beam=0"), (["--n-best", "0"], "n_best=0"), (["--n-best", "-1"], "n_best=-1"),
    (["--beam", "2", "--n-best", "3"], "n_best=3"), (["--alpha", "nan"], "alpha"), (["--alpha", "-1"], "alpha"),
    (["--batch-size", "0"], "batch_size=0"), (["--device", "cuda"], "no GPU is visible"),
    (["--device", "banana"], "--device"),
])
def test_decoding_options_are_checked(transformer_dir, tmp_path, capsys, option, needle):
    if option == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    src = tmp_path / "in.txt"
    src.write_text(SENT + "\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src, *option], capsys)
    assert_user_error(code, output, needle)


def test_translator_api_checks_options_and_reports_truncation(transformer_dir, monkeypatch):
    from aiayn.decoding.translator import Translator
    from aiayn.errors import AiaynError

    t = Translator.from_pretrained(transformer_dir)
    for kwargs in ({"beam": 0}, {"n_best": 0}, {"alpha": float("nan")}, {"batch_size": 0}, {"beam": True}):
        with pytest.raises(AiaynError):
            t.translate([SENT], **kwargs)
    with pytest.raises(AiaynError, match="list of strings"):
        t.translate(SENT)
    monkeypatch.setattr(Translator, "max_positions", 8)  # a model that takes at most 8 source tokens
    long, short = t.translate(["forty five thousand six hundred seventy eight nine nine nine", SENT], beam=1)
    assert long.truncated and not short.truncated and len(long.src_tokens) == 8


def test_long_source_warns_on_the_command_line(transformer_dir, tmp_path, capsys, monkeypatch):
    from aiayn.decoding.translator import Translator

    monkeypatch.setattr(Translator, "max_positions", 4)
    src = tmp_path / "in.txt"
    src.write_text("nine\nforty five thousand six hundred\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", src], capsys)
    assert code == 0 and f"{src}:2: longer than the model's maximum" in output
    assert f"{src}:1: longer" not in output


# ---- training runs: resume only the same experiment --------------------------------------------------
TINY = ["data.synthetic_train=300", "data.synthetic_valid=10", "data.vocab_size=64", "data.byte_fallback=false",
        "model.d_model=32",
        "model.d_ff=64", "train.max_tokens=512", "train.warmup_steps=4", "train.bleu_sentences=5",
        "train.num_threads=1", "train.eval_every=4", "train.save_every=4", "train.average_last=1"]


def train_args(out, *extra):
    return ["train", "--out", str(out)] + [x for s in [*TINY, *extra] for x in ("--set", s)]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "run"
    assert main(train_args(out, "train.max_steps=8")) == 0
    return out


def _copy_run(trained_run, tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    return run


def test_resume_with_another_config_is_refused_and_changes_nothing(trained_run, tmp_path, capsys):
    run = _copy_run(trained_run, tmp_path)
    before = tree_digest(run)
    code, output = run_cli(train_args(run, "train.max_steps=12", "model.d_model=64"), capsys)
    assert_user_error(code, output, "model.d_model: 32 in the run, 64 now")
    assert tree_digest(run) == before


def test_resume_on_other_data_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for name, text in (("train.en", "one\ntwo\nthree\n" * 20), ("train.de", "eins\nzwei\ndrei\n" * 20),
                       ("valid.en", "two\n"), ("valid.de", "zwei\n")):
        (data / name).write_text(text)
    files = ["data.dataset=files", f"data.train_src={data}/train.en", f"data.train_tgt={data}/train.de",
             f"data.valid_src={data}/valid.en", f"data.valid_tgt={data}/valid.de", "data.vocab_size=30",
             "data.byte_fallback=false", "train.max_steps=4"]
    run = tmp_path / "run"
    assert run_cli(train_args(run, *files), capsys)[0] == 0
    (data / "train.de").write_text("un\ndeux\ntrois\n" * 20)
    before = tree_digest(run)
    code, output = run_cli(train_args(run, *files, "train.max_steps=8"), capsys)
    assert_user_error(code, output, "other data")
    assert tree_digest(run) == before


def test_train_into_a_users_folder_is_refused(workspace, capsys):
    before = tree_digest(workspace)
    code, output = run_cli(train_args(workspace / "mine", "train.max_steps=2"), capsys)
    assert_user_error(code, output, "not empty", workspace / "mine")
    assert tree_digest(workspace) == before


def test_latest_pointing_outside_the_run_is_refused(trained_run, tmp_path, capsys):
    run = _copy_run(trained_run, tmp_path)
    (run / "latest").write_text("../../elsewhere\n")
    code, output = run_cli(train_args(run, "train.max_steps=12"), capsys)
    assert_user_error(code, output, "latest", "not a checkpoint name")
    code, output = run_cli(["translate", "--model", run / "checkpoints", "--input", "/dev/null"], capsys)
    assert code == 2


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_damaged_trainer_state_falls_back_to_the_previous_checkpoint(trained_run, tmp_path, capsys, caplog,
                                                                     damage):
    run = _copy_run(trained_run, tmp_path)
    state = run / "checkpoints" / "step_00000008" / "trainer_state.pt"
    state.write_bytes(b"\x80garbage") if damage == "corrupt" else state.unlink()
    code, output = run_cli(train_args(run, "train.max_steps=8"), capsys)
    assert code == 0, output
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    assert "cannot resume from" in warning and "step_00000008" in warning and "trainer_state.pt" in warning
    assert f"resuming from {run / 'checkpoints' / 'step_00000004'} (step 4)" in output
    redone = load_file(str(run / "checkpoints" / "step_00000008" / "model.safetensors"))
    original = load_file(str(trained_run / "checkpoints" / "step_00000008" / "model.safetensors"))
    for k in original:  # the redone steps 5-8 reproduce the lost checkpoint exactly
        torch.testing.assert_close(redone[k], original[k], rtol=0, atol=0)


# ---- the command line's manners ---------------------------------------------------------------------
def test_no_command_prints_help_and_version(capsys):
    code, output = run_cli([], capsys)
    assert code == 0 and "translate" in output and "usage" in output
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and "aiayn 0." in capsys.readouterr().out


@pytest.mark.parametrize("command, options", [
    ("serve", ["--host", "--port"]), ("attention", ["--kind", "--layer", "--head"]),
    ("translate", ["--n-best", "--batch-size", "--device", "--beam", "--alpha"]),
    ("evaluate", ["--split", "--beam", "--alpha", "--bootstrap", "--pair"]), ("demo", ["--out"]),
    ("train", ["--device"]),
])
def test_every_option_help_states_its_default(command, options, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    entries, current = {}, None  # option -> its help text (argparse: "  --opt ARG  help", continued below)
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  -"):
            current = line.split()[0].rstrip(",")
            entries[current] = line
        elif current and line.startswith("    "):
            entries[current] += line
    for option in options:
        assert "default" in entries[option], f"{command} {option}: no default in its help"


def test_ctrl_c_outside_training_is_not_a_traceback(transformer_dir, tmp_path, capsys, monkeypatch):
    from aiayn.decoding.translator import Translator

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Translator, "translate", interrupted)
    (tmp_path / "in.txt").write_text(SENT + "\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", tmp_path / "in.txt"], capsys)
    assert code == 130 and "Traceback" not in output and "interrupted" in output


def test_interactive_translate_says_how_to_end(transformer_dir, capsys, monkeypatch):
    import io

    class Tty(io.TextIOWrapper):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Tty(io.BytesIO((SENT + "\n").encode()), encoding="utf-8"))
    code, output = run_cli(["translate", "--model", transformer_dir], capsys)
    assert code == 0 and "loaded" in output and "Ctrl-D" in output


def test_debug_shows_the_traceback_and_bugs_are_not_hidden(tmp_path, monkeypatch, transformer_dir):
    from aiayn.checkpoint import CheckpointError
    from aiayn.decoding.translator import Translator

    with pytest.raises(CheckpointError):
        main(["--debug", "translate", "--model", str(tmp_path / "missing")])

    def bug(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(Translator, "from_pretrained", bug)
    with pytest.raises(ZeroDivisionError):
        main(["translate", "--model", str(transformer_dir)])


def test_train_says_why_it_stopped_and_names_only_existing_directories(trained_run, tmp_path, capsys):
    run = _copy_run(trained_run, tmp_path)
    code, output = run_cli(train_args(run, "train.max_steps=12"), capsys)
    assert code == 0
    assert "resuming from" in output and "(step 8)" in output
    assert "stopped at step 12" in output and "train.max_steps=12" in output
    line = next(x for x in output.splitlines() if x.startswith("model directories:"))
    assert all(Path(p).exists() for p in line.split(":", 1)[1].split())


@pytest.mark.parametrize("port", ["99999", "0", "http"])
def test_serve_port_is_checked(transformer_dir, capsys, port):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--model", str(transformer_dir), "--port", port])
    assert exit_info.value.code == 2 and "not a port number" in capsys.readouterr().err


def test_average_of_two_different_models_is_refused(workspace, tokenizer, capsys):
    """Same tensor shapes, another n_heads: averaging them would silently mix two models."""
    from aiayn.checkpoint import load_checkpoint, save_checkpoint

    model, cfg, tok = load_checkpoint(workspace / "run/checkpoints/step_00000001")
    cfg.model.n_heads = 2
    save_checkpoint(workspace / "two_heads", model, cfg, tok)
    code, output = run_cli(["average", workspace / "run/checkpoints/step_00000001", workspace / "two_heads",
                            "--out", workspace / "avg"], capsys)
    assert_user_error(code, output, "only checkpoints of one model")
    assert not (workspace / "avg").exists()


def test_output_limit_never_passes_the_position_table(tmp_path, tokenizer):
    """a * |src| + b (here 10 + 50) may exceed the model's positions (here 16): decoding stops at 16
    instead of failing at position 17 (an untrained model never emits </s> early)."""
    from aiayn.decoding.greedy import greedy_translate
    from aiayn.decoding.translator import Translator

    t = Translator.from_pretrained(model_dir(tmp_path / "m", tokenizer, "tiny", max_len=16))
    sentence = "forty five thousand six hundred seventy"
    for beam in (1, 3):
        assert len(t.translate([sentence], beam=beam)[0].tokens) <= 16
    assert greedy_translate(t.model, t.tokenizer, [sentence], t.decode_cfg)


def test_damaged_config_duplicate_key_and_tiny_vocabulary(tmp_path, transformer_dir, capsys):
    model = tmp_path / "model"
    shutil.copytree(transformer_dir, model)
    (model / "config.yaml").write_text((model / "config.yaml").read_text() + "decode:\n  beam: 9\n")
    code, output = run_cli(["translate", "--model", model, "--input", "/dev/null"], capsys)
    assert_user_error(code, output, "duplicate key", "config.yaml")
    code, output = run_cli(train_args(tmp_path / "run", "data.vocab_size=9"), capsys)
    assert_user_error(code, output, "data.vocab_size=9")


# ---- found by a hostile probe after the first pass ----------------------------------------------------
def test_output_through_a_symlink_or_a_device_is_never_replaced(workspace, capsys):
    real = workspace / "real.txt"
    real.write_text("old")
    (workspace / "link.txt").symlink_to(real)
    args = ["translate", "--model", workspace / "run", "--input", workspace / "in.txt", "--output"]
    assert run_cli(args + [workspace / "link.txt"], capsys)[0] == 0
    assert (workspace / "link.txt").is_symlink() and real.read_text().count("\n") == 2
    assert run_cli(args + ["/dev/null"], capsys)[0] == 0
    assert Path("/dev/null").is_char_device()


@pytest.mark.parametrize("command", ["translate", "evaluate", "attention"])
def test_output_inside_the_model_directory_is_refused(workspace, capsys, command):
    model = workspace / "run" / "checkpoints" / "step_00000002"
    target = model / "model.safetensors"
    args = {"translate": ["translate", "--model", model, "--input", workspace / "in.txt", "--output", target],
            "evaluate": ["evaluate", "--model", model, "--src", workspace / "in.txt", "--ref", workspace / "in.txt",
                         "--hyp-out", target, "--bootstrap", "0"],
            "attention": ["attention", "--model", model, SENT, "--out", model / "maps.json"]}[command]
    before = tree_digest(workspace)
    assert_user_error(*run_cli(args, capsys), "inside the model directory")
    assert tree_digest(workspace) == before


def test_force_never_deletes_what_the_user_added(workspace, capsys):
    out = workspace / "avg"
    assert run_cli(_average_args(workspace) + [out], capsys)[0] == 0
    (out / "NOTES.txt").write_text("mine")
    before = tree_digest(workspace)
    assert_user_error(*run_cli(_average_args(workspace) + [out, "--force"], capsys), "NOTES.txt")
    assert tree_digest(workspace) == before


def test_average_of_two_runs_with_different_tokenizers_is_refused(workspace, capsys):
    other = workspace / "other"
    shutil.copytree(workspace / "run/checkpoints/step_00000001", other)
    _damage_tokenizer(other, None)
    code, output = run_cli(["average", workspace / "run/checkpoints/step_00000001", other, "--out",
                            workspace / "avg"], capsys)
    assert_user_error(code, output, "tokenizer.model")


def test_checkpoint_and_run_dirs_keep_the_users_permissions(trained_run):
    mode = (trained_run / "checkpoints" / "step_00000008").stat().st_mode & 0o777
    assert mode & 0o055 == 0o055 & ~_current_umask()  # readable by others under umask 022


def _current_umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("content", [b"", b"[]", b"\xff"])
def test_damaged_run_marker_is_a_clear_error(trained_run, tmp_path, capsys, content):
    run = _copy_run(trained_run, tmp_path)
    (run / "run.json").write_bytes(content)
    assert_user_error(*run_cli(train_args(run, "train.max_steps=12"), capsys), "run.json")


@pytest.mark.parametrize("option, needle", [(["--alpha", "2000"], "alpha"), (["--device", "mps"], "mps")])
def test_more_decoding_options(transformer_dir, tmp_path, capsys, option, needle):
    (tmp_path / "in.txt").write_text(SENT + "\n")
    code, output = run_cli(["translate", "--model", transformer_dir, "--input", tmp_path / "in.txt", *option],
                           capsys)
    assert_user_error(code, output, needle)


def test_data_dir_is_a_path_not_yaml(tmp_path, capsys):
    code, output = run_cli(train_args(tmp_path / "run", "data.dataset=multi30k") + ["--data-dir", "data #1"],
                           capsys)
    assert_user_error(code, output, "data #1")
