"""The compiled decoding step (aiayn.decoding.compiled): the eager step's numbers, step by step and through
beam search, also where a search switches from the eager step to it, with its cache grown and sentences
leaving; the decoders of two models kept apart; the refusals. Compiling takes a few seconds a graph."""

import copy
import json
import os

import pytest
import torch

import aiayn.decoding.compiled as compiled_module
import aiayn.decoding.compiled_cache as compiled_cache
from aiayn.checkpoint import load_checkpoint
from aiayn.cli import main
from aiayn.cpu import prepare_for_cpu, set_compute_type
from aiayn.cpu.compute_types import supported_compute_types
from aiayn.decoding.beam import top_candidates
from aiayn.decoding.compiled import CompiledDecoder, check_compilable, compiler_present, torch_supports_compile
from aiayn.decoding.engines import CompiledEngine, PoolEngine
from aiayn.decoding.search_rules import forbid_specials
from aiayn.decoding.translator import Translator
from aiayn.errors import AiaynError

# Skipped only where no C++ compiler is installed and AIAYN_REQUIRE_COMPILER is unset (.ci/run installs g++),
# or where torch is older than --compile needs (the Makefile installs 2.13).
_skip_without_compiler = pytest.mark.skipif(
    not (compiler_present() and torch_supports_compile()) and not os.environ.get("AIAYN_REQUIRE_COMPILER"),
    reason="--compile needs a C++ compiler (apt-get install g++) and torch >= 2.13")


def needs_compiler(test):
    """A test that compiles (tens of seconds each): skipped without a compiler, and in the slow tier."""
    return pytest.mark.slow(_skip_without_compiler(test))
SENTENCES = ["forty five", "three hundred twenty one", "nine", "", "seven hundred", "twelve", "eighty eight"]


@pytest.fixture
def one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model(transformer_dir):
    return load_checkpoint(transformer_dir, torch.device("cpu"))[0].eval()


def _source(model, B=3, S=7):
    src = torch.randint(4, model.tgt_embed.weight.size(0), (B, S), generator=torch.Generator().manual_seed(3))
    src[1, 4:] = model.pad_id  # a padded sentence: the source mask matters
    return src


@needs_compiler
@pytest.mark.parametrize("small_rows, B", [(1000, 3), (6, 4)])
@torch.inference_mode()
def test_steps_equal_the_eager_steps(model, small_rows, B, monkeypatch, one_thread):
    """B sentences, 3 beams: the rows reordered at random within each sentence at every step, sentences 1 and
    3 leave after step 4, the cache grows every 4 positions. The first step (one row per sentence) runs
    twice. With small_rows 1000 every step takes the step compiled for few rows; with small_rows 6 the steps
    of 8 and 12 rows take the one for many rows, those of 6 the other, on the same state. Every other step
    gives beam search's candidates (step_candidates) instead of the log-probs."""
    monkeypatch.setattr(compiled_module, "CAPACITY_STEP", 4)
    decoder = CompiledDecoder(model, small_rows=small_rows)
    used = []
    steps = decoder._compiled()[0]
    decoder._steps = {kind: (lambda *a, kind=kind: used.append(kind) or steps[kind](*a)) for kind in steps}
    src = _source(model, B=B)
    eager, fast = model.init_state(model.encode(src)[0], src), decoder.init_state(decoder.encode(src)[0], src)
    tokens, K = torch.ones(B, dtype=torch.long), 3
    gen = torch.Generator().manual_seed(0)
    for t in range(11):
        expected, eager, _ = model.decode_step(tokens, eager)
        n = len(tokens) // (1 if t == 0 else K)
        if t % 2:  # the step with beam search's candidates (2K of them, from random scores, pad and bos forbidden)
            scores = torch.randn(n, len(tokens) // n, generator=gen)
            want = top_candidates(forbid_specials(expected.clone(), 0, 1).view(n, -1, expected.size(-1)), scores, 6)
            got, fast = decoder.step_candidates(tokens, fast, scores, 6, (0, 1))
            torch.testing.assert_close(got[0], want[0], atol=1e-5, rtol=1e-5)
            assert [g.tolist() for g in got[1:]] == [w.tolist() for w in want[1:]]
        else:
            got, fast, maps = decoder.decode_step(tokens, fast)
            assert maps is None
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        sentences = torch.tensor([0, 2]) if t == 4 else None
        kept = [0, 2] if t == 4 else range(n)
        rows = torch.cat([b * (1 if t == 0 else K) + torch.randint(0, 1 if t == 0 else K, (K,), generator=gen)
                          for b in kept])
        eager, fast = eager.select(rows, sentences), fast.select(rows, sentences)
        tokens = torch.randint(4, 100, (len(rows),), generator=gen)
    assert used == (["small"] * 11 if small_rows == 1000 else ["large"] * 5 + ["small"] * 6)


@needs_compiler
def test_beam_search_gives_the_eager_outputs(transformer_dir, one_thread):
    alone, fast = Translator.from_pretrained(transformer_dir), Translator.from_pretrained(transformer_dir, compile=True)
    assert isinstance(fast.backend, CompiledEngine)
    for options in (dict(beam=4, n_best=2, batch_size=1), dict(beam=4, batch_size=3),
                    dict(beam=1, batch_size=2),  # one row per sentence: each step run twice
                    dict(beam=4, min_length=2, no_repeat_ngram_size=2, target_prefix=["zwei"] * len(SENTENCES))):
        want, got = alone.translate(SENTENCES, **options), fast.translate(SENTENCES, **options)
        assert [r.text for r in got] == [r.text for r in want]
        assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-5)
    maps = fast.translate(SENTENCES[:2], return_attention=True)  # maps: the model's own step
    assert [r.text for r in maps] == [r.text for r in alone.translate(SENTENCES[:2])]


@needs_compiler
def test_two_models_never_share_a_graph(model, one_thread):
    """Each decoder compiles its model's weights into its step: a second model of the same shapes, alive
    beside the first, gets its own numbers."""
    other = type(model)(**_same_shape(model)).eval()
    with torch.inference_mode():
        _compare_two(model, other)


def _compare_two(model, other):
    assert not torch.allclose(_compiled_equals_eager(model), _compiled_equals_eager(other))


def _compiled_equals_eager(m):
    """Two compiled steps of m equal its eager ones; returns the last log-probs."""
    src = _source(m, B=2)
    decoder = CompiledDecoder(m)
    state, expected_state = decoder.init_state(decoder.encode(src)[0], src), m.init_state(m.encode(src)[0], src)
    for t in range(2):
        tokens = torch.tensor([1, 1] if t == 0 else [5, 6])
        log_probs, state, _ = decoder.decode_step(tokens, state)
        expected, expected_state, _ = m.decode_step(tokens, expected_state)
        torch.testing.assert_close(log_probs, expected, atol=1e-5, rtol=1e-5)
    return log_probs


def _same_shape(model) -> dict:
    layer = model.decoder_layers[0]
    return dict(src_vocab_size=model.src_embed.weight.size(0), tgt_vocab_size=model.tgt_embed.weight.size(0),
                pad_id=model.pad_id, d_model=model.d_model, n_heads=layer.self_attn.n_heads,
                d_ff=layer.ffn.w_1.weight.size(0), n_encoder_layers=len(model.encoder_layers),
                n_decoder_layers=len(model.decoder_layers), dropout=0.0)


def test_what_it_does_not_cover_is_refused(model, rnn_dir, transformer_dir, monkeypatch):
    rnn = load_checkpoint(rnn_dir, torch.device("cpu"))[0]
    with pytest.raises(AiaynError, match="RNN model decodes without it"):
        check_compilable(rnn, torch.device("cpu"))
    with pytest.raises(AiaynError, match="on cuda decode without it"):
        check_compilable(model, torch.device("cuda"))
    with pytest.raises(AiaynError, match="float32 models"):
        check_compilable(copy.deepcopy(model).to(torch.bfloat16), torch.device("cpu"))  # the fixture stays fp32
    monkeypatch.setattr(torch, "__version__", "2.11.0+cpu")
    with pytest.raises(AiaynError, match="needs torch 2.13 or newer \\(this is 2.11.0\\+cpu\\)"):
        check_compilable(model, torch.device("cpu"))
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    monkeypatch.setattr(compiled_module.shutil, "which", lambda name: None)
    with pytest.raises(AiaynError, match="needs a C\\+\\+ compiler"):
        check_compilable(model, torch.device("cpu"))
    with pytest.raises(AiaynError, match="ct2 engine is compiled already"):
        Translator.from_pretrained(transformer_dir, engine="ct2", compile=True)


def test_cli_checks_the_input_before_compiling(transformer_dir, tmp_path, capsys, monkeypatch):
    """A bad --input fails at once, not after the model compiled (tens of seconds)."""
    monkeypatch.setattr(CompiledDecoder, "__init__", lambda *a, **k: pytest.fail("compiled before the input was read"))
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00 not text")
    assert main(["translate", "--model", str(transformer_dir), "--compile", "--input", str(binary)]) == 2
    assert "binary.txt" in capsys.readouterr().err


@needs_compiler
def test_workers_decode_with_the_compiled_step(transformer_dir, tmp_path, monkeypatch, one_thread):
    """The forked workers take the parent's compiled step, and inherit this patch: each process that takes
    a compiled step leaves its pid in tmp_path."""
    step = CompiledDecoder._compiled_step

    def noted(self, *args, **kwargs):
        (tmp_path / str(os.getpid())).touch()
        return step(self, *args, **kwargs)

    alone = Translator.from_pretrained(transformer_dir)
    monkeypatch.setattr(CompiledDecoder, "_compiled_step", noted)
    with Translator.from_pretrained(transformer_dir, workers=2, compile=True) as pooled:
        for path in tmp_path.iterdir():  # the warm-up's steps
            path.unlink()
        got = pooled.translate(SENTENCES, beam=4, batch_size=2)
    steppers = {int(p.name) for p in tmp_path.iterdir()}
    assert steppers and os.getpid() not in steppers
    want = alone.translate(SENTENCES, beam=4, batch_size=2)
    assert [r.text for r in got] == [r.text for r in want]
    assert [r.score for r in got] == pytest.approx([r.score for r in want], abs=1e-5)


@needs_compiler
def test_cli_translates_a_file_with_compile(transformer_dir, tmp_path, one_thread):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(SENTENCES) + "\n")
    outputs = []
    for flags in ([], ["--compile"]):
        out = tmp_path / f"out{len(flags)}.txt"
        assert main(["translate", "--model", str(transformer_dir), "--input", str(src), "--output", str(out),
                     "--batch-size", "1", *flags]) == 0
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == len(SENTENCES)


@needs_compiler
def test_spawned_workers_compile_their_own(transformer_dir, one_thread):
    """The start method off Linux (spawn): each worker loads the model and compiles its step itself."""
    from aiayn.decoding.workers import WorkerPool, model_kind

    alone = Translator.from_pretrained(transformer_dir)
    pool = WorkerPool(model=alone.model, model_dir=alone.model_dir, workers=2, start_method="spawn", compile=True)
    kinds = {pool._pool.submit(model_kind).result() for _ in range(8)}
    spawned = Translator(alone.model, alone.tokenizer, alone.decode_cfg, alone.device, alone.model_dir,
                         backend=PoolEngine(model=alone.model, pool=pool))
    with spawned:
        got = spawned.translate(SENTENCES, beam=4, batch_size=2)
    assert kinds == {"CompiledDecoder"}
    want = alone.translate(SENTENCES, beam=4, batch_size=2)
    assert [r.text for r in got] == [r.text for r in want]



@needs_compiler
def test_a_compiled_decoder_is_kept_and_loaded_again(model, monkeypatch, one_thread):
    """The second decoder of the same model loads what the first compiled (no compiling: _package would
    fail), and decodes as the model does."""
    CompiledDecoder(model).warm_up()
    key = compiled_cache.fingerprint(model)
    files = sorted(p.name for p in (compiled_cache.cache_root() / key).iterdir())
    assert files == [compiled_cache.MARKER, "encode.pt2", "step_large.pt2", "step_small.pt2"]
    monkeypatch.setattr(compiled_module, "_package", lambda *a: pytest.fail("compiled again"))
    with torch.inference_mode():
        _compiled_equals_eager(model)  # loaded from the cache


def test_the_fingerprint_follows_weights_settings_and_threads(model, monkeypatch):
    other = copy.deepcopy(model)
    assert compiled_cache.fingerprint(other) == compiled_cache.fingerprint(model)
    with torch.no_grad():
        other.decoder_layers[0].ffn.w_1.bias[0] += 1e-3
    assert compiled_cache.fingerprint(other) != compiled_cache.fingerprint(model)
    other = copy.deepcopy(model)
    other.decoder_layers[0].norm_first = not other.decoder_layers[0].norm_first
    assert compiled_cache.fingerprint(other) != compiled_cache.fingerprint(model)
    key = compiled_cache.fingerprint(model)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 7)
    assert compiled_cache.fingerprint(model) != key


def _fake_build(directory):
    for name in ("a", "b"):
        (directory / name).write_text("good")


def _fake_load(path):
    if path.read_text() != "good":
        raise RuntimeError("damaged")
    return path.name


def test_a_damaged_cache_is_built_again(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path))
    assert compiled_cache.cached("k", ["a", "b"], _fake_build, _fake_load) == ["a", "b"]
    (compiled_cache.cache_root() / "k" / "b").write_text("garbage")
    assert compiled_cache.cached("k", ["a", "b"], _fake_build, _fake_load) == ["a", "b"]
    assert "compiled decoder in" in caplog.text and "is damaged (b has 7 bytes, 4 when it was written)" in caplog.text
    assert (compiled_cache.cache_root() / "k" / "b").read_text() == "good"
    assert [p.name for p in compiled_cache.cache_root().iterdir()] == ["k"]  # no temporary left beside


def test_the_least_recently_used_entries_are_removed(monkeypatch, tmp_path):
    """With room for 3: writing a fourth removes the one used longest ago; loading one marks it used. With
    room for fewer bytes, the oldest go until the rest fit."""
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path))
    monkeypatch.setattr(compiled_cache, "MAX_ENTRIES", 3)
    for i, key in enumerate(["k1", "k2", "k3"]):
        compiled_cache.cached(key, ["a", "b"], _fake_build, _fake_load)
        os.utime(compiled_cache.cache_root() / key, (1000 + i, 1000 + i))  # k1 oldest
    compiled_cache.cached("k1", ["a", "b"], _fake_build, _fake_load)  # loaded: now the newest
    compiled_cache.cached("k4", ["a", "b"], _fake_build, _fake_load)  # written: k2, the oldest, goes
    assert sorted(p.name for p in compiled_cache.cache_root().iterdir()) == ["k1", "k3", "k4"]
    monkeypatch.setattr(compiled_cache, "MAX_ENTRIES", 8)
    for i, key in enumerate(["k1", "k4"]):  # k4 newer than k1 (not left to the clock's resolution)
        os.utime(compiled_cache.cache_root() / key, (2000 + i, 2000 + i))
    monkeypatch.setattr(compiled_cache, "MAX_BYTES", 20)  # an entry holds 8 bytes: room for 2
    compiled_cache.cached("k5", ["a", "b"], _fake_build, _fake_load)  # k5 and the newest before it, k4
    assert sorted(p.name for p in compiled_cache.cache_root().iterdir()) == ["k4", "k5"]
    monkeypatch.setattr(compiled_cache, "MAX_BYTES", 4)  # the new entry alone is too large: kept all the same
    compiled_cache.cached("k6", ["a", "b"], _fake_build, _fake_load)
    assert sorted(p.name for p in compiled_cache.cache_root().iterdir()) == ["k6"]


def _user_folder(path, mtime):
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("mine")
    os.utime(path, (mtime, mtime))


def test_eviction_and_clear_never_touch_folders_aiayn_did_not_write(monkeypatch, tmp_path):
    """Folders of the user's own under the cache root, and unmarked entries (of an aiayn from before the
    marker) are neither counted nor removed, however old; only aiayn's own least recently used entry goes."""
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path))
    monkeypatch.setattr(compiled_cache, "MAX_ENTRIES", 2)
    root = compiled_cache.cache_root()
    _user_folder(root / "photos", 100)
    _user_folder(root / "thesis", 200)
    legacy = root / ("0" * 32)  # the layout of an old entry, without the marker
    _user_folder(legacy, 300)
    (legacy / "encode.pt2").write_text("old")
    for i, key in enumerate(["k1", "k2", "k3"]):
        compiled_cache.cached(key, ["a", "b"], _fake_build, _fake_load)
        os.utime(root / key, (1000 + i, 1000 + i))
    assert sorted(p.name for p in root.iterdir()) == sorted(["photos", "thesis", "0" * 32, "k2", "k3"])
    assert (root / "photos" / "notes.txt").read_text() == "mine" and (legacy / "encode.pt2").is_file()
    compiled_cache.clear()
    assert sorted(p.name for p in root.iterdir()) == sorted(["photos", "thesis", "0" * 32])


def test_a_folder_of_the_users_at_an_entrys_name_is_never_replaced(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path))
    _user_folder(compiled_cache.cache_root() / "k", 100)
    assert compiled_cache.cached("k", ["a", "b"], _fake_build, _fake_load) == ["a", "b"]
    assert sorted(p.name for p in (compiled_cache.cache_root() / "k").iterdir()) == ["notes.txt"]
    assert "holds files aiayn did not write" in caplog.text


@pytest.mark.parametrize("damage", ["truncate", "alter", "remove_marker_entry"])
def test_a_truncated_or_altered_entry_is_built_again_never_loaded(monkeypatch, tmp_path, caplog, damage):
    """A damaged file that would still load (a truncated shared library may crash rather than raise) is
    caught by the marker's sizes and hashes before loading, and the entry is compiled again."""
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path))
    loaded = []

    def load(path):
        loaded.append(path.read_text())
        return path.read_text()

    assert compiled_cache.cached("k", ["a", "b"], _fake_build, load) == ["good", "good"]
    entry = compiled_cache.cache_root() / "k"
    if damage == "truncate":
        (entry / "b").write_text("go")
    elif damage == "alter":
        (entry / "b").write_text("bad!")  # the same size
    else:
        marker = json.loads((entry / compiled_cache.MARKER).read_text())
        del marker["files"]["b"]
        (entry / compiled_cache.MARKER).write_text(json.dumps(marker))
    loaded.clear()
    assert compiled_cache.cached("k", ["a", "b"], _fake_build, load) == ["good", "good"]
    assert loaded == ["good", "good"] and "is damaged" in caplog.text and (entry / "b").read_text() == "good"


def test_a_failed_eviction_keeps_the_new_entry(monkeypatch, tmp_path, caplog):
    """Removing old entries can fail (another process removing them too): the new one is used, not built
    again elsewhere."""
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path))
    builds = []
    monkeypatch.setattr(compiled_cache, "_evict", lambda keep: (_ for _ in ()).throw(OSError("gone")))
    result = compiled_cache.cached("k", ["a", "b"], lambda d: (builds.append(d), _fake_build(d)), _fake_load)
    assert result == ["a", "b"] and len(builds) == 1
    assert (compiled_cache.cache_root() / "k" / "a").is_file()
    assert "could not remove old compiled decoders" in caplog.text


def test_an_unwritable_cache_builds_for_this_run(monkeypatch, tmp_path, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("AIAYN_CACHE", str(blocker))
    assert compiled_cache.cached("k", ["a", "b"], _fake_build, _fake_load) == ["a", "b"]
    assert "cannot keep the compiled decoder" in caplog.text
    assert blocker.read_text() == "not a directory"


def test_an_oserror_of_the_compiler_is_raised_not_taken_for_the_cache(monkeypatch, tmp_path, caplog):
    """The compilation's own OSError (a full /tmp, say) would fail again elsewhere: raised at once, built once,
    nothing left in the cache."""
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path))
    builds = []

    def failing_build(directory):
        builds.append(directory)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        compiled_cache.cached("k", ["a", "b"], failing_build, _fake_load)
    assert len(builds) == 1 and "cannot keep the compiled decoder" not in caplog.text
    assert list(compiled_cache.cache_root().iterdir()) == []


def test_a_full_disk_under_the_cache_builds_for_this_run(monkeypatch, tmp_path, caplog):
    """An OSError about a file in the cache's own directory is the cache's: built again in a temporary one."""
    monkeypatch.setenv("AIAYN_CACHE", str(tmp_path))
    builds = []

    def build(directory):
        builds.append(directory)
        if len(builds) == 1:
            raise OSError(28, "No space left on device", str(directory / "a"))
        _fake_build(directory)

    assert compiled_cache.cached("k", ["a", "b"], build, _fake_load) == ["a", "b"]
    assert len(builds) == 2 and "cannot keep the compiled decoder" in caplog.text


@needs_compiler
def test_large_sources_are_encoded_eagerly(model, monkeypatch, one_thread):
    """Beyond MAX_ENCODE_TOKENS the encoder runs eagerly (the compiled one was slower there); the compiled
    steps after it still give the model's numbers."""
    CompiledDecoder(model).warm_up()  # compiled (or loaded) first: below, TracedEncoder.forward runs only to encode
    monkeypatch.setattr(compiled_module, "MAX_ENCODE_TOKENS", 0)
    eager, forward = [], compiled_module.TracedEncoder.forward
    monkeypatch.setattr(compiled_module.TracedEncoder, "forward", lambda self, src: (eager.append(self.model),
                                                                               forward(self, src))[1])
    with torch.inference_mode():
        _compiled_equals_eager(model)
    assert eager == [model]


@needs_compiler
@pytest.mark.parametrize("compute_type", ["bfloat16", "int8"])
def test_a_low_precision_compiled_step_is_as_close_to_float32_as_the_eager_one(transformer_dir, compute_type,
                                                                               one_thread):
    """The compiled encoder and steps in a low-precision compute type (int8: inductor's own int8 GEMM at few
    rows, oneDNN's int8 x int8 beyond) against the float32 model's log-probs, step by step on the same tokens: within
    the eager low-precision step's own error of float32's, and not equal to float32 (the products really are
    low precision). Few rows and many rows (small_rows 2: steps of 3 sentences x 2 rows take the other step, where
    there is one: int8 on a VNNI CPU has one step for every size)."""
    if compute_type not in supported_compute_types():
        pytest.skip(f"this CPU runs no {compute_type}")
    exact = prepare_for_cpu(load_checkpoint(transformer_dir, torch.device("cpu"))[0].eval())
    low = prepare_for_cpu(load_checkpoint(transformer_dir, torch.device("cpu"))[0].eval())
    set_compute_type(low, compute_type)
    with torch.inference_mode():
        _compare_steps(exact, low, _source(exact))


def _compare_steps(exact, low, src):
    """See test_a_low_precision_compiled_step_is_as_close_to_float32_as_the_eager_one."""
    tokens = torch.ones(src.size(0), dtype=torch.long).repeat_interleave(2)
    for small_rows in (1000, 2):
        decoder = CompiledDecoder(low, small_rows=small_rows)
        states = [m.init_state(m.encode(src)[0], src) for m in (exact, low)]
        fast = decoder.init_state(decoder.encode(src)[0], src)
        rows = torch.arange(src.size(0)).repeat_interleave(2)  # two rows a sentence from the first step on
        states, fast = [s.select(rows) for s in states], fast.select(rows)
        worst_eager = worst_compiled = 0.0
        for _ in range(6):
            reference, states[0], _ = exact.decode_step(tokens, states[0])
            eager, states[1], _ = low.decode_step(tokens, states[1])
            compiled, fast, _ = decoder.decode_step(tokens, fast)
            top = reference > -10  # the log-probs that matter to a search; far tails differ in relative terms
            worst_eager = max(worst_eager, (eager - reference)[top].abs().max().item())
            worst_compiled = max(worst_compiled, (compiled - reference)[top].abs().max().item())
            tokens = reference.argmax(-1)
        assert 0 < worst_compiled <= 2 * worst_eager + 0.02, (small_rows, worst_compiled, worst_eager)
