import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from aiayn.checkpoint import average_checkpoints, load_checkpoint
from aiayn.data.batching import Example, collate
from aiayn.model import ModelConfig, build_model
from aiayn.training.loss import TrainingObjective, projected_label_smoothed_loss
from aiayn.training.schedule import lr_scheduler, noam_rate

TINY = ["data.synthetic_train=600", "data.synthetic_valid=20", "data.vocab_size=64", "data.byte_fallback=false",
        "model.d_model=64",
        "model.d_ff=128", "train.max_tokens=1024", "train.warmup_steps=10", "train.log_every=1",
        "train.bleu_sentences=20", "train.num_threads=1", "train.average_last=2", "train.keep_last=3"]


def run_train(out, extra=(), wait=True, launcher=()):
    args = [*launcher] if launcher else [sys.executable, "-m", "aiayn"]
    cmd = [*args, "train", "--out", str(out)] + [x for s in TINY + list(extra) for x in ("--set", s)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def step_losses(out: Path) -> dict:
    losses = {}
    for line in (out / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "loss" in record:
            losses[record["step"]] = record["loss"]  # a resumed run rewrites its lost steps; keep the last
    return losses


def test_label_smoothed_loss_equals_torch():
    """The objective the trainer calls equals torch's cross_entropy over the model's logits, padding
    ignored (the output projection is fused into the loss, so it never sees the logits)."""
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=11, tgt_vocab_size=11)).eval()
    src, tgt_in = torch.randint(4, 11, (2, 6)), torch.randint(4, 11, (2, 5))
    tgt_out = torch.randint(4, 11, (2, 5))
    tgt_out[0, 3:] = 0
    loss, nll = TrainingObjective(model=model, pad_id=0, epsilon=0.1)(src, tgt_in, tgt_out)
    logits = model(src, tgt_in).view(-1, 11)
    ref = torch.nn.functional.cross_entropy(logits, tgt_out.view(-1), ignore_index=0, label_smoothing=0.1,
                                            reduction="sum")
    ref_nll = torch.nn.functional.cross_entropy(logits, tgt_out.view(-1), ignore_index=0, reduction="sum")
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(nll, ref_nll)


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_fused_loss_gradient_equals_torch(monkeypatch, bf16, bias):
    """The hand-written backward (softmax - smoothed target, pushed through the projection in the
    forward), over several chunks, equals autograd's through linear and torch's cross_entropy."""
    import aiayn.training.loss as loss_module

    monkeypatch.setattr(loss_module, "CHUNK", 7)  # 30 rows: chunks of 7, 7, 7, 7, 2
    torch.manual_seed(0)
    leaves = [torch.randn(30, 16), torch.randn(13, 16), torch.randn(13) if bias else None]
    ours = [None if x is None else x.clone().requires_grad_() for x in leaves]
    ref = [None if x is None else x.clone().requires_grad_() for x in leaves]
    target = torch.randint(0, 13, (30,))
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss, nll = projected_label_smoothed_loss(*ours, target, 0.1)
        logits = torch.nn.functional.linear(*ref)
    ref_loss = torch.nn.functional.cross_entropy(logits.float(), target, label_smoothing=0.1, reduction="sum")
    (loss * 0.5).backward()
    (ref_loss * 0.5).backward()
    torch.testing.assert_close(loss, ref_loss.detach())
    assert not nll.requires_grad
    # bf16: torch rounds the weight's and bias's gradients to bf16 once, the fused loss sums chunks in fp32
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if not bf16 else {"rtol": 2e-2, "atol": 2e-2}
    for mine, theirs in zip(ours, ref):
        if mine is not None:
            assert mine.grad.dtype == theirs.grad.dtype == torch.float32
            torch.testing.assert_close(mine.grad, theirs.grad, **tolerance)


def test_fused_loss_kept_buffers_leave_earlier_results_alone(monkeypatch):
    """The loss keeps its work buffers from call to call (aiayn/training/loss.py): a later call, with
    another vocabulary size or dtype, is still right and leaves an earlier call's gradients as they were."""
    import aiayn.training.loss as loss_module

    monkeypatch.setattr(loss_module, "CHUNK", 7)
    torch.manual_seed(0)

    def loss_and_grads(rows: int, vocab: int, bf16: bool):
        leaves = [torch.randn(rows, 16, requires_grad=True), torch.randn(vocab, 16, requires_grad=True)]
        target = torch.randint(0, vocab, (rows,))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss, _ = projected_label_smoothed_loss(*leaves, None, target, 0.1)
        loss.backward()
        ref = torch.nn.functional.cross_entropy(leaves[0].detach() @ leaves[1].detach().t(), target,
                                                label_smoothing=0.1, reduction="sum")
        return loss.detach(), ref, [x.grad for x in leaves]

    first_loss, first_ref, first_grads = loss_and_grads(30, 13, bf16=True)
    kept = [g.clone() for g in first_grads]
    for rows, vocab, bf16 in ((9, 21, True), (30, 13, False), (5, 13, True)):
        loss, ref, _ = loss_and_grads(rows, vocab, bf16)
        torch.testing.assert_close(loss, ref, **({"rtol": 2e-2, "atol": 2e-2} if bf16 else {}))
    torch.testing.assert_close(first_loss, first_ref, rtol=2e-2, atol=2e-2)
    for g, k in zip(first_grads, kept):
        torch.testing.assert_close(g, k, rtol=0, atol=0)


def test_fused_loss_without_gradients_computes_none(monkeypatch):
    """Validation (no grad) computes the same loss and no gradients (an autograd Function's forward
    would not know: its needs_input_grad is True under torch.no_grad too)."""
    import aiayn.training.loss as loss_module

    calls = []
    fused = loss_module._fused_chunks
    monkeypatch.setattr(loss_module, "_fused_chunks", lambda *a, want_grad: calls.append(want_grad) or fused(
        *a, want_grad=want_grad))
    torch.manual_seed(0)
    hidden, weight, target = torch.randn(20, 8), torch.randn(9, 8, requires_grad=True), torch.randint(0, 9, (20,))
    with torch.no_grad():
        loss, _ = projected_label_smoothed_loss(hidden, weight, None, target, 0.1)
    ref = torch.nn.functional.cross_entropy(hidden @ weight.detach().t(), target, label_smoothing=0.1,
                                            reduction="sum")
    torch.testing.assert_close(loss, ref)
    assert loss.grad_fn is None and calls == [False]
    projected_label_smoothed_loss(hidden, weight, None, target, 0.1)[0].backward()
    assert calls == [False, True] and weight.grad is not None


def test_noam_schedule_matches_formula():
    assert noam_rate(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)
    assert noam_rate(100, 512, 4000) == pytest.approx(512**-0.5 * 100 * 4000**-1.5)
    assert noam_rate(10000, 512, 4000) == pytest.approx(512**-0.5 * 10000**-0.5)
    peak = noam_rate(4000, 512, 4000)
    assert peak > noam_rate(3999, 512, 4000) and peak > noam_rate(4001, 512, 4000)


def _scheduled_lrs(schedule: str, steps: int, **settings) -> dict:
    """update n (1-based) -> the lr the optimizer used for it, through the schedule the trainer builds."""
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    scheduler = lr_scheduler(optimizer, schedule, **settings)
    lrs = {}
    for n in range(1, steps + 1):
        lrs[n] = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
    return lrs


def test_schedules_match_their_formulas():
    """noam: §5.3; inverse_sqrt: linear warmup to lr at warmup_steps, then lr * sqrt(warmup / n) (fairseq);
    constant: linear warmup to lr, then lr. Worked by hand for lr 1e-3, warmup 4."""
    noam = _scheduled_lrs("noam", 100, d_model=512, warmup_steps=4, factor=2.0)
    for n in (1, 3, 4, 5, 100):
        assert noam[n] == pytest.approx(2.0 * 512**-0.5 * min(n**-0.5, n * 4**-1.5))
    inverse_sqrt = _scheduled_lrs("inverse_sqrt", 100, d_model=512, warmup_steps=4, peak_lr=1e-3)
    expected = {1: 2.5e-4, 2: 5e-4, 3: 7.5e-4, 4: 1e-3, 16: 5e-4, 25: 4e-4, 100: 2e-4}
    assert {n: inverse_sqrt[n] for n in expected} == pytest.approx(expected)
    constant = _scheduled_lrs("constant", 100, d_model=512, warmup_steps=4, peak_lr=1e-3)
    expected = {1: 2.5e-4, 2: 5e-4, 4: 1e-3, 5: 1e-3, 100: 1e-3}
    assert {n: constant[n] for n in expected} == pytest.approx(expected)
    # linear: warmup to 1e-3 at step 4, then down by 1e-3 / 20 per step to 0 at end_step 24 (train.max_steps)
    linear = _scheduled_lrs("linear", 30, d_model=512, warmup_steps=4, peak_lr=1e-3, end_step=24)
    expected = {1: 2.5e-4, 4: 1e-3, 5: 9.5e-4, 14: 5e-4, 23: 5e-5, 24: 0.0, 30: 0.0}
    assert {n: linear[n] for n in expected} == pytest.approx(expected)


@pytest.mark.slow
def test_one_batch_overfits():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny", src_vocab_size=20, tgt_vocab_size=20, dropout=0.0)).train()
    examples = [Example(torch.randint(4, 20, (6,)).tolist(), torch.randint(4, 20, (5,)).tolist()) for _ in range(8)]
    batch = collate(examples, pad_id=0, bos_id=2, eos_id=3)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    objective = TrainingObjective(model=model, pad_id=0, epsilon=0.0)
    for _ in range(200):
        loss, nll = objective(batch.src, batch.tgt_in, batch.tgt_out)
        opt.zero_grad()
        (loss / batch.n_tokens).backward()
        opt.step()
    assert nll.item() / batch.n_tokens < 0.05


RESUME = ["train.max_steps=40", "train.save_every=4", "train.eval_every=8"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    run_train(out, RESUME)
    return out


def assert_same_run(a: Path, b: Path) -> None:
    """Bit-identical final weights and the same per-step losses, each step logged once."""
    final = "checkpoints/step_00000040/model.safetensors"
    wa, wb = load_file(str(a / final)), load_file(str(b / final))
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=0, atol=0)
    assert step_losses(a) == step_losses(b)
    steps = [json.loads(line)["step"] for line in (b / "metrics.jsonl").read_text().splitlines()
             if "loss" in json.loads(line)]
    assert steps == sorted(set(steps)), "metrics.jsonl has duplicate or unordered rows after the resume"


def wait_for(path: Path, proc, seconds=120):
    deadline = time.time() + seconds
    while not path.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)


@pytest.mark.slow
def test_killed_then_resumed_run_equals_uninterrupted(tmp_path, uninterrupted):
    proc = run_train(tmp_path / "b", RESUME, wait=False)
    ckpts = tmp_path / "b" / "checkpoints"
    wait_for(ckpts / "step_00000008", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    latest = (tmp_path / "b" / "latest").read_text().strip()  # a kill before `latest` moves: the one before
    assert int(latest[5:]) < 40, "the run finished before it could be killed"
    result = run_train(tmp_path / "b", RESUME)
    assert f"resuming from {ckpts / latest} (step {int(latest[5:])})" in result.stdout
    assert_same_run(uninterrupted, tmp_path / "b")
    info = json.loads((tmp_path / "b" / "average" / "info.json").read_text())
    assert [Path(p).name for p in info["averaged"]] == ["step_00000036", "step_00000040"]


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_saves_exits_cleanly_and_resumes_exactly(tmp_path, uninterrupted, signum, code):
    """Ctrl-C, and SIGTERM as SLURM, Kubernetes and `timeout` send it: save, exit, resume bit-exactly."""
    proc = run_train(tmp_path / "c", RESUME, wait=False)
    wait_for(tmp_path / "c" / "checkpoints" / "step_00000004", proc)
    proc.send_signal(signum)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == code, output
    assert "saving a checkpoint at step" in output and "Traceback" not in output
    assert f"{signal.Signals(signum).name}: saved, stopping" in output
    latest = (tmp_path / "c" / "latest").read_text().strip()
    assert 4 <= int(latest[5:]) < 40
    state = torch.load(tmp_path / "c" / "checkpoints" / latest / "trainer_state.pt", weights_only=True)
    assert state["progress"]["step"] == int(latest[5:])
    run_train(tmp_path / "c", RESUME)
    assert_same_run(uninterrupted, tmp_path / "c")


@pytest.mark.slow
def test_second_ctrl_c_inside_an_update_keeps_the_checkpoint_consistent(tmp_path, uninterrupted, monkeypatch,
                                                                         capsys):
    """Two SIGINTs right after the 11th optimizer update, before the step counter moves: the update,
    the counter and the RNG state must still be saved together (labelled step 11, holding 11 updates)."""
    from aiayn.cli import main
    from aiayn.training.adam import Adam

    calls = {"n": 0}
    original = Adam.step

    def step_then_two_signals(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 11:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return out

    argv = ["train", "--out", str(tmp_path / "d")] + [x for s in TINY + RESUME for x in ("--set", s)]
    monkeypatch.setattr(Adam, "step", step_then_two_signals)
    assert main(argv) == 130
    monkeypatch.setattr(Adam, "step", original)
    assert "stopped at once" in capsys.readouterr().out
    latest = (tmp_path / "d" / "latest").read_text().strip()
    assert latest == "step_00000011"
    state = torch.load(tmp_path / "d" / "checkpoints" / latest / "trainer_state.pt", weights_only=True)
    assert state["progress"]["step"] == 11 and state["scheduler"]["last_epoch"] == 11
    run_train(tmp_path / "d", RESUME)
    assert_same_run(uninterrupted, tmp_path / "d")


@pytest.mark.slow
def test_second_ctrl_c_inside_a_validation_redoes_it_on_resume(tmp_path, uninterrupted, monkeypatch, capsys):
    """Two SIGINTs inside step 16's validation: the checkpoint says the validation is pending, and the
    resumed run does it first, so its validation rows, best checkpoint and weights equal the uninterrupted
    run's."""
    from aiayn.cli import main
    from aiayn.training.trainer import Trainer

    original = Trainer.validate

    def validate_then_two_signals(self):
        metrics = original(self)
        if self.progress.step == 16:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return metrics

    argv = ["train", "--out", str(tmp_path / "e")] + [x for s in TINY + RESUME for x in ("--set", s)]
    monkeypatch.setattr(Trainer, "validate", validate_then_two_signals)
    assert main(argv) == 130
    monkeypatch.setattr(Trainer, "validate", original)
    capsys.readouterr()
    state = torch.load(tmp_path / "e" / "checkpoints" / "step_00000016" / "trainer_state.pt", weights_only=True)
    assert state["progress"]["pending_validation"]
    run_train(tmp_path / "e", RESUME)
    assert_same_run(uninterrupted, tmp_path / "e")
    assert validation_rows(tmp_path / "e") == validation_rows(uninterrupted)
    best = [json.loads((run / "best" / "info.json").read_text())["step"] for run in (uninterrupted, tmp_path / "e")]
    assert best[0] == best[1]


def validation_rows(run: Path) -> list:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["valid_loss"], r.get("bleu")) for r in rows if "valid_loss" in r]


@pytest.mark.slow
def test_two_process_gloo_equals_single_process_accumulation(tmp_path):
    extra = ["train.max_steps=6", "train.save_every=6", "train.eval_every=1000", "model.dropout=0.0",
             "train.average_last=1"]
    run_train(tmp_path / "single", extra + ["train.accumulate=2"])
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "aiayn"]
    run_train(tmp_path / "ddp", extra + ["train.accumulate=1"], launcher=launcher)
    final = "checkpoints/step_00000006/model.safetensors"
    a, b = load_file(str(tmp_path / "single" / final)), load_file(str(tmp_path / "ddp" / final))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5)
    la, lb = step_losses(tmp_path / "single"), step_losses(tmp_path / "ddp")
    assert la.keys() == lb.keys() and all(abs(la[s] - lb[s]) < 1e-4 for s in la)


def test_average_is_the_elementwise_mean(tmp_path, transformer_dir):
    from aiayn.checkpoint import save_checkpoint

    model, cfg, tok = load_checkpoint(transformer_dir)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    save_checkpoint(tmp_path / "plus1", model, cfg, tok)
    out = average_checkpoints([transformer_dir, tmp_path / "plus1"], tmp_path / "avg")
    avg, a = load_file(str(out / "model.safetensors")), load_file(str(transformer_dir / "model.safetensors"))
    for k in a:
        torch.testing.assert_close(avg[k], a[k] + 0.5)
    assert len(json.loads((out / "info.json").read_text())["averaged"]) == 2


@pytest.mark.slow
def test_demo_stops_on_sigterm_without_translating(tmp_path):
    cmd = [sys.executable, "-m", "aiayn", "demo", "--out", str(tmp_path / "demo")]
    cmd += [x for s in TINY + ["train.max_steps=100000", "train.save_every=4"] for x in ("--set", s)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    wait_for(tmp_path / "demo" / "checkpoints" / "step_00000004", proc)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 143, output
    assert "again to resume" in output and "held-out examples" not in output and "Traceback" not in output


@pytest.mark.slow
def test_demo_ends_by_naming_the_commands_to_try(tmp_path, capsys):
    """`aiayn demo` says its threads, trains, translates held-out examples and names translate, attention and
    serve; shortened below eval_every (no best, no average) it translates with its last checkpoint."""
    from aiayn.cli import main

    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--set", "train.max_steps=10"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[1].startswith("threads: ")
    assert "held-out examples" in printed and "checkpoints/step_00000010" in printed
    for command in ("aiayn translate --model", "aiayn attention --model", "aiayn serve --model"):
        assert command in printed


@pytest.mark.slow
def test_the_demo_records_a_timeline_for_the_explorer(tmp_path, capsys):
    """The demo config keeps two dev sentences' maps at each validation: the explorer's timeline slider is on
    the README's first path (aiayn demo, then aiayn serve)."""
    from aiayn.cli import main
    from aiayn.web.timeline import find_timeline

    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--set", "train.max_steps=10", "--set", "train.eval_every=10"]) == 0
    timeline = find_timeline(out / "checkpoints" / "step_00000010")
    assert timeline is not None and [p.name for p in timeline.glob("*.npz")] == ["step_00000010.npz"]


@pytest.mark.parametrize("preset", ["tiny", "rnn-luong", "rnn-bahdanau"])
def test_training_objective_is_the_fused_loss_of_any_models_decoder_output(preset):
    """Every model, RNN included, trains through TrainingObjective (the shared decoder_output interface)."""
    from tests.model_helpers import PAD, random_batch, small_model

    model = small_model(preset).train()  # dropout 0: train mode computes what eval mode does
    src, tgt = random_batch()
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    objective = TrainingObjective(model=model, pad_id=PAD, epsilon=0.1)
    loss, nll = objective(src, tgt_in, tgt_out)
    real = tgt_out != PAD
    want = projected_label_smoothed_loss(model.decoder_output(src, tgt_in)[real], model.generator.weight,
                                         model.generator.bias, tgt_out[real], 0.1)
    assert torch.allclose(loss, want[0]) and torch.allclose(nll, want[1])
    loss.backward()
    assert all(p.grad is not None for p in model.generator.parameters())
