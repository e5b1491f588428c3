"""Every shell command of README.md and docs/**/*.md (```bash, ```sh and ```console blocks, every language)
is checked as a reader would paste it.

How: each block runs in bash as written, in a scratch directory, where `aiayn`, `python`, `torchrun`,
`make`, `pip`, `tensorboard`, `curl` and `git` are shell functions that hand their words, environment,
working directory and standard input to this test, wait for its answer and print it. So bash itself does
the quoting, `\\` continuations, comments, `$VARS`, globs, `&&`, pipes and redirections, and `echo`,
`printf`, `cd` and the like run for real. A command that reads a terminal gets one line, TERMINAL_LINE.

test_commands_parse (every block, nothing runs):
  aiayn ...           parsed by aiayn.cli.build_parser(): a misspelled option, a removed command or a bad
                      value fails with the page and line; `train` and `demo` also load their config with
                      their --set values; each repository file named (configs/, bench/, examples/, ...)
                      exists. `python -m aiayn` and torchrun's `-m aiayn` part are checked the same way.
  python bench/X.py   (or docs/X.py) parsed by its own parser (its main(argv), stopped right after parse_args)
  torchrun ...        parsed by torch's torchrun parser
  make X              X is a target of the Makefile
  pip install ...     aiayn[EXTRA]: EXTRA is an extra of pyproject.toml
  tensorboard ...     an extra of pyproject.toml installs it
  curl ...            -s/-H/-d and a URL: the route is one of aiayn/web/routes/'s, the body is JSON

test_commands_run (slow; each distinct block once, in a fresh copy of PREPARED) runs them: aiayn commands
in this process, `aiayn serve` as a process of its own on a free port (the doc's port is mapped to it) that
the block's curl commands then ask (a block of curl commands alone asks `aiayn serve --model
runs/demo/average`), curl's requests must answer 200. Not run, by the rule in parse_only(), and listed in
PARSE_ONLY (test_parse_only_is_the_listed_set keeps that list exact):
  aiayn train, aiayn demo, torchrun   training: minutes to days (the short demo run of PREPARED stands in)
  aiayn import-hf OWNER/NAME          a download from the Hugging Face hub
  python bench/X.py, docs/X.py        benchmarks, and the scripts that make the pages' pictures, on models
                                      trained for them
  make, pip, tensorboard              the whole test suite or a training run, an install, a server

PREPARED, what the pages assume a reader has:
  runs/demo               `aiayn demo --out runs/demo`, 20 steps, 40 held-out pairs
  runs/multi30k_de_en, runs/de_en, runs/ft, runs/seed1, runs/seed2, runs/other_model, runs/x
                          STAND_INS, for models that take hours to train: runs/demo, or an untrained
                          model that reads and writes any text
  models/opus-de-en       runs/demo/average through export-hf and import-hf (tests download nothing)
  path/to/multi30k        a few lines per Multi30k file (train, val, test_2016_flickr); $AIAYN_MULTI30K_DIR
  in.de, prefixes.en      two German lines; an English prefix for the first
  test.en, test.de, test.align   the built-in task's held-out pairs and gold (`aiayn heads --write-gold`)
  configs, bench, examples       the repository's
and the placeholder MODEL of a command stands for runs/demo/average.

A block opts out with `<!-- no-test: REASON -->` on the line above its fence; keep those rare.
"""

import argparse
import contextlib
import functools
import gzip
import importlib.util
import io
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
import tomllib

from tests.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(bash|sh|shell|console)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
NO_TEST = re.compile(r"^<!-- no-test(?:: *(.*?))? *-->$")
TERMINAL_LINE = "forty five"  # what a reader types into a command that reads the terminal
PLACEHOLDERS = {"MODEL": "runs/demo/average"}  # a word of an aiayn command -> what it stands for here
# The models the pages name that take hours to train, and what stands in for each: "de-en" is an untrained
# tiny Transformer whose vocabulary (byte fallback) writes any text, for the pages' German and English.
STAND_INS = {"runs/multi30k_de_en": "de-en", "runs/other_model": "de-en", "runs/de_en": "de-en",
             "runs/ft": "demo", "runs/seed1": "demo", "runs/seed2": "demo", "runs/x": "demo"}
REPO_PATH = re.compile(r"^(configs|bench|examples|docs|aiayn|tests)/")
SHIMMED = ("aiayn", "python", "python3", "torchrun", "make", "pip", "pip3", "tensorboard", "curl", "git")

# What parse_only() leaves unrun, as the pages write it (after bash's expansion), with its reason.
PARSE_ONLY = {
    "aiayn demo --out runs/demo": "trains (PREPARED's runs/demo is this command, 20 steps)",
    "aiayn train configs/multi30k_de_en.yaml --data-dir path/to/multi30k --out runs/de_en": "trains",
    "aiayn train configs/coreference.yaml --out runs/coreference": "trains",
    "aiayn train --out runs/numbers": "trains",
    "aiayn train configs/multi30k_de_en.yaml --data-dir path/to/multi30k --out runs/multi30k_de_en": "trains",
    "aiayn train configs/rnn_bahdanau.yaml --set train.max_steps=2000 --set model.score=concat --out runs/rnn":
        "trains",
    "aiayn train --out runs/numbers --set train.tensorboard=true": "trains",
    "aiayn train configs/demo.yaml --out runs/demo --set train.attention_timeline=4": "trains",
    "aiayn train configs/finetune_opus_de_en.yaml --init-from models/opus-de-en --data-dir path/to/multi30k "
    "--out runs/ft": "trains",
    "torchrun --standalone --nproc_per_node=2 -m aiayn train configs/multi30k_de_en.yaml --out runs/ddp": "trains",
    "torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:29500 --rdzv-id job1 "
    "-m aiayn train configs/multi30k_de_en.yaml --out runs/two_nodes": "trains on two machines",
    "aiayn import-hf Helsinki-NLP/opus-mt-de-en --out models/opus-de-en": "downloads from the hub",
    "python bench/coreference.py --model runs/coreference": "a benchmark on a model trained for it",
    "python docs/beam_trace.py --model runs/de_en --text 'Ein Mann fährt Fahrrad.' --beam 4 --out trace.png":
        "the script that draws the beam-trace guide's picture, for a Multi30k model",
    "python docs/screenshots.py post-editing --model runs/de_en --token 2 --out post_editing.png":
        "a browser screenshot (Chromium) of the post-editing guide's picture",
    "python docs/screenshots.py timeline --model runs/demo/average --layer 2 --head 1 --out timeline.png":
        "a browser screenshot (Chromium) of the timeline guide's picture, for a run with a timeline",
    "python docs/screenshots.py diagnostics --model runs/de_en --out diagnostics.png":
        "a browser screenshot (Chromium) of the diagnostics guide's picture",
    "make test": "the whole test suite", "make demo": "trains",
    "make docs": "trains the explorer's two models when runs/ lacks them (up to 20 minutes)",
    "pip install 'aiayn[tensorboard]'": "an install", "pip install 'aiayn[onnx]'": "an install",
    "tensorboard --logdir runs/numbers/tensorboard": "a server on a training run's logs",
}


# ---------------------------------------------------------------------------------------------- the blocks

@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository
    line: int  # the page's line of the block's first line
    script: str  # bash, one line per line of the block

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def key(self) -> str:
        """The commands without comments and layout: the same block on two pages (languages) runs once."""
        words = []
        for line in self.script.replace("\\\n", " ").splitlines():
            try:
                words.append(shlex.join(shlex.split(line, comments=True)))
            except ValueError:
                words.append(line)
        return "\n".join(w for w in words if w)


def _console_script(body: str) -> str:
    """A ```console block: `$ ` lines (and their continuations) are commands, the rest is output."""
    out, going_on = [], False
    for line in body.splitlines():
        command = going_on or line.startswith("$ ")
        out.append((line if going_on else line[2:]) if command else "")
        going_on = command and line.endswith("\\")
    return "\n".join(out) + "\n"


def shell_blocks() -> list[Block]:
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
            marker = NO_TEST.match(before)
            if marker and marker.group(1):
                continue
            kind, body = match.groups()
            script = _console_script(body) if kind == "console" else body
            line = text.count("\n", 0, match.start()) + 2
            blocks.append(Block(str(page.relative_to(REPO)), line, script))
    return blocks


BLOCKS = shell_blocks()


# ------------------------------------------------------------------------------ bash, and the shim's calls

SHIM = r"""
set -eo pipefail
__docs_call() {
  local d
  d=$(mktemp -d "$AIAYN_DOCS_CALLS/call.XXXXXXXX")
  printf '%s\0' "$@" > "$d/argv"
  printf '%s\n' "${BASH_LINENO[1]}" > "$d/line"
  env -0 > "$d/env"
  pwd > "$d/cwd"
  if [ -c /dev/stdin ]; then printf '%s\n' "$AIAYN_DOCS_TERMINAL" > "$d/stdin"; else cat > "$d/stdin"; fi
  : > "$d/ready"
  until [ -e "$d/done" ]; do sleep 0.02; done
  cat "$d/stdout"
  cat "$d/stderr" >&2
  return "$(cat "$d/done")"
}
""" + "".join(f'{name}() {{ __docs_call {name} "$@"; }}\n' for name in SHIMMED)

IGNORED_ENV = {"_", "SHLVL", "PWD", "OLDPWD"}


@dataclass
class Call:
    name: str  # the command: aiayn, python, curl, ...
    words: list[str]  # its arguments, as bash passed them
    env: dict  # the variables the command line set or changed (e.g. AIAYN_X=1 aiayn ...)
    cwd: Path
    stdin: bytes
    where: str  # page:line

    @property
    def text(self) -> str:
        return shlex.join([self.name, *self.words])


def _read_env(data: bytes) -> dict:
    pairs = (item.split("=", 1) for item in data.decode("utf-8", "surrogateescape").split("\0") if "=" in item)
    return dict(pairs)


def run_block(block: Block, workdir: Path, env: dict, answer, timeout: float) -> list[str]:
    """Run the block in bash in `workdir`; answer(call) -> (exit code, stdout, stderr) for each shimmed
    command, in order. Returns bash's own failure (a command not found, a failing printf), if any."""
    calls = Path(tempfile.mkdtemp(prefix="calls", dir=workdir.parent))
    scripts = Path(tempfile.mkdtemp(prefix="script", dir=workdir.parent))
    (scripts / "shim.sh").write_text(SHIM)
    (scripts / "block.sh").write_text(block.script)
    env = {**env, "AIAYN_DOCS_CALLS": str(calls), "AIAYN_DOCS_TERMINAL": TERMINAL_LINE}
    base = {k: v for k, v in env.items()}
    log = scripts / "bash.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-c", 'source "$1"; source "$2"', "bash",
                                 str(scripts / "shim.sh"), str(scripts / "block.sh")],
                                cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        answered, deadline = set(), time.monotonic() + timeout
        try:
            while True:
                ready = sorted(d for d in calls.iterdir() if d not in answered and (d / "ready").exists())
                for d in ready:
                    answered.add(d)
                    name, *words = (d / "argv").read_bytes().decode("utf-8").split("\0")[:-1]
                    changed = {k: v for k, v in _read_env((d / "env").read_bytes()).items()
                               if base.get(k) != v and k not in IGNORED_ENV}
                    line = block.line + int((d / "line").read_text().strip() or 1) - 1
                    call = Call(name, words, changed, Path((d / "cwd").read_text().strip()),
                                (d / "stdin").read_bytes(), f"{block.page}:{line}")
                    code, stdout, stderr = answer(call)
                    (d / "stdout").write_bytes(stdout)
                    (d / "stderr").write_bytes(stderr)
                    (d / "done.tmp").write_text(str(code))
                    (d / "done.tmp").rename(d / "done")
                if not ready and proc.poll() is not None:
                    break
                if time.monotonic() > deadline:
                    return [f"{block.name}: still running after {timeout:.0f} s"]
                time.sleep(0.01)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if proc.returncode:
        said = log.read_text(errors="replace")
        said = re.sub(r"\S*block\.sh: line (\d+):", lambda m: f"{block.page}:{block.line + int(m.group(1)) - 1}:",
                      said)
        return [f"{block.name}: bash exited {proc.returncode}: {said[-2000:]}"]
    return []


# ---------------------------------------------------------------------------------------- the checks

class Bad(Exception):
    """A command that does not parse or names what is not there: its page and line, and why."""


def _quiet_parse(parser, words):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(words)
    except SystemExit as exit_:
        if exit_.code:
            raise Bad(err.getvalue().strip() or f"exit {exit_.code}") from None
        return None  # --help, --version


def _check_repo_paths(words):
    for word in words:
        if REPO_PATH.match(word) and not (REPO / word).exists():
            raise Bad(f"{word} is not in the repository")


@functools.cache
def _aiayn_parser():
    from aiayn.cli import build_parser

    return build_parser()


def check_aiayn(words: list[str]):
    """The aiayn command line's parse of `words` (None for --help), its config for train and demo."""
    words = [PLACEHOLDERS.get(w, w) for w in words]
    _check_repo_paths(words)
    args = _quiet_parse(_aiayn_parser(), words)
    if args is None:
        return None
    if args.command is None:
        raise Bad("no command")
    if args.command in ("train", "demo"):
        from aiayn.cli.train import DEMO_CONFIG
        from aiayn.config import load_config

        config = REPO / args.config if getattr(args, "config", None) else DEMO_CONFIG
        try:
            load_config(config, args.overrides)
        except Exception as err:  # noqa: BLE001  a config error, whatever its class: the message says it
            raise Bad(f"its config does not load: {err}") from None
    return args


def check_script(path: str, words: list[str]) -> None:
    """python bench/X.py WORDS: the script's own parser, from its main(argv), stopped after parse_args."""
    file = REPO / path
    if not REPO_PATH.match(path) or not file.is_file():
        raise Bad(f"{path} is not a script of the repository")
    spec = importlib.util.spec_from_file_location(f"docs_script_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Parsed(Exception):
        pass

    real = argparse.ArgumentParser.parse_args

    def parse_and_stop(self, args=None, namespace=None):
        raise Parsed(real(self, args, namespace))

    err = io.StringIO()
    try:
        with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_and_stop), \
                contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            module.main(words)
    except Parsed:
        return
    except SystemExit as exit_:
        if exit_.code:
            raise Bad(err.getvalue().strip()) from None
        return
    except (AttributeError, TypeError):  # no main(argv): at least its options are in its source
        source = file.read_text(encoding="utf-8")
        missing = [w.split("=")[0] for w in words if w.startswith("--") and w.split("=")[0] not in source]
        if missing:
            raise Bad(f"{path} has no option {', '.join(missing)}") from None
        return
    raise Bad(f"{path}: main() did not parse its arguments")


def check_torchrun(words: list[str]):
    from torch.distributed.run import get_args_parser

    args = _quiet_parse(get_args_parser(), words)
    if args is not None and args.module and args.training_script == "aiayn":
        check_aiayn(args.training_script_args)
    elif args is not None:
        _check_repo_paths([args.training_script])
    return args


def check_make(words: list[str]) -> None:
    targets = set(re.findall(r"^([\w.-]+)\s*:", (REPO / "Makefile").read_text(), re.M))
    for word in words:
        if not word.startswith("-") and word not in targets:
            raise Bad(f"the Makefile has no target {word!r}")


@functools.cache
def _extras() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def check_pip(words: list[str]) -> None:
    if words[:1] != ["install"]:
        raise Bad("no rule for this pip command (tests/docs/test_docs_commands.py)")
    for word in words[1:]:
        match = re.fullmatch(r"aiayn(?:\[([\w,-]+)\])?", word)
        if not match:
            raise Bad(f"no rule for installing {word!r} (tests/docs/test_docs_commands.py)")
        unknown = [e for e in (match.group(1) or "").split(",") if e and e not in _extras()]
        if unknown:
            raise Bad(f"pyproject.toml has no extra {', '.join(unknown)}")


def check_tensorboard(words: list[str]) -> None:
    if not any(re.match(r"tensorboard\b", dep) for deps in _extras().values() for dep in deps):
        raise Bad("no extra of pyproject.toml installs tensorboard")
    if words[:1] != ["--logdir"] or len(words) != 2:
        raise Bad("no rule for this tensorboard command (tests/docs/test_docs_commands.py)")


def _curl_parser():
    p = argparse.ArgumentParser(prog="curl", add_help=False, exit_on_error=False)
    p.add_argument("-s", "--silent", action="store_true")
    p.add_argument("-H", "--header", action="append", default=[])
    p.add_argument("-d", "--data")
    p.add_argument("-X", "--request")
    p.add_argument("url")
    return p


def check_curl(words: list[str]):
    """-> (port, path, headers, body) of a request to aiayn serve."""
    import json

    try:
        args = _curl_parser().parse_args(words)
    except (argparse.ArgumentError, SystemExit) as err:
        raise Bad(f"curl: {err}") from None
    match = re.fullmatch(r"(?:http://)?(?:localhost|127\.0\.0\.1):(\d+)(/\S*)", args.url)
    if not match:
        raise Bad(f"{args.url}: not a URL of aiayn serve here")
    port, path = int(match.group(1)), match.group(2)
    method = args.request or ("POST" if args.data is not None else "GET")
    routes = "".join(p.read_text(encoding="utf-8") for p in (REPO / "aiayn" / "web" / "routes").glob("*.py"))
    if f'@routes.{method.lower()}("{path}"' not in routes:
        raise Bad(f"aiayn serve has no {method} {path}")
    headers = dict(h.split(":", 1) for h in args.header)
    headers = {k.strip().lower(): v.strip() for k, v in headers.items()}
    if args.data is not None:
        if headers.get("content-type") != "application/json":
            raise Bad("the body is sent without -H 'content-type: application/json'")
        try:
            json.loads(args.data)
        except ValueError as err:
            raise Bad(f"the body is not JSON: {err}") from None
    return port, path, headers, args.data


def parse_only(call: Call, args) -> str | None:
    """Why a command is checked but not run (None: it runs). PARSE_ONLY lists what this leaves today."""
    if call.name == "aiayn":
        if args is not None and args.command in ("train", "demo"):
            return "trains"
        if args is not None and args.command == "import-hf" and re.fullmatch(r"[\w.-]+/[\w.-]+", args.src) \
                and not (call.cwd / args.src).exists():
            return "downloads from the hub"
        return None
    if call.name in ("python", "python3"):
        return None if call.words[:2] == ["-m", "aiayn"] else "a script of bench/ or docs/"
    return {"torchrun": "trains", "make": "make", "pip": "an install", "tensorboard": "a server"}.get(call.name)


def check(call: Call):
    """Parse `call` by its rule: -> what parse_only and the run need (the aiayn Namespace, or curl's request)."""
    if call.name == "aiayn":
        return check_aiayn(call.words)
    if call.name in ("python", "python3"):
        if call.words[:2] == ["-m", "aiayn"]:
            return check_aiayn(call.words[2:])
        if call.words and call.words[0].endswith(".py"):
            return check_script(call.words[0], call.words[1:])
    rules = {"torchrun": check_torchrun, "make": check_make, "pip": check_pip, "pip3": check_pip,
             "tensorboard": check_tensorboard, "curl": check_curl}
    if call.name not in rules:
        raise Bad(f"no rule for `{call.name}` commands: add one to tests/docs/test_docs_commands.py")
    return rules[call.name](call.words)


# --------------------------------------------------------------------------------- parsing every block

class Checker:
    """answer() for parse mode: every command checked, nothing run, every command answers 0."""

    def __init__(self):
        self.failures, self.not_run = [], []

    def answer(self, call: Call):
        try:
            parsed = check(call)
            if parse_only(call, parsed):
                self.not_run.append(call.text)
        except Bad as err:
            self.failures.append(f"{call.where}: {call.text}\n    {err}")
        return 0, b"", b""


@functools.cache
def parsed_blocks() -> dict:
    """block name -> (failures, commands left unrun), for every block, in one scratch directory each."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="docs-commands") as tmp:
        for number, block in enumerate(BLOCKS):
            work = Path(tmp) / f"b{number}" / "work"
            work.mkdir(parents=True)
            checker = Checker()
            env = {**os.environ, "AIAYN_MULTI30K_DIR": str(work / "path" / "to" / "multi30k")}
            bash = run_block(block, work, env, checker.answer, timeout=120)
            results[block.name] = (checker.failures + bash, checker.not_run)
    return results


def test_the_pages_have_shell_blocks():
    assert len(BLOCKS) >= 30
    pages = {b.page for b in BLOCKS}
    assert "README.md" in pages and "docs/guides/serve.md" in pages


def test_opting_out_gives_a_reason():
    bare = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines[:-1], start=1):
            marker = NO_TEST.match(line.strip())
            if marker and not marker.group(1) and FENCE.match(lines[number] + "\n\n```"):
                bare.append(f"{page.relative_to(REPO)}:{number}")
    assert not bare, f"<!-- no-test --> above a shell block needs its reason: <!-- no-test: REASON -->: {bare}"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_commands_parse(block):
    failures, _ = parsed_blocks()[block.name]
    assert not failures, "\n".join(failures)


def test_parse_only_is_the_listed_set():
    not_run = {command for _, unrun in parsed_blocks().values() for command in unrun}
    assert not_run - PARSE_ONLY.keys() == set(), "commands that only parse now: list them in PARSE_ONLY"
    assert PARSE_ONLY.keys() - not_run == set(), "PARSE_ONLY lists commands the pages no longer have, or that run"


def test_a_wrong_command_fails_with_its_page_and_line(tmp_path):
    block = Block("docs/x.md", 10, "echo hi > in.txt\naiayn translate --model m \\\n  --beem 4\n"
                  "aiayn heads --model m [--json]\nmake nothing\n")
    checker = Checker()
    work = tmp_path / "work"
    work.mkdir()
    assert run_block(block, work, dict(os.environ), checker.answer, timeout=60) == []
    assert (work / "in.txt").read_text() == "hi\n"
    first, second, third = checker.failures
    assert first.startswith("docs/x.md:11: aiayn translate") and "--beem" in first
    assert second.startswith("docs/x.md:13: ") and "[--json]" in second
    assert third.startswith("docs/x.md:14: make nothing") and "no target" in third


# ----------------------------------------------------------------------------------- running them

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


class Servers:
    """The `aiayn serve` processes of one block, by the port the page gave them."""

    def __init__(self):
        self.running = {}  # doc port -> (process, real port, log path, page:line)

    def start(self, words: list[str], cwd: Path, env: dict, where: str) -> None:
        args = check_aiayn(words)
        doc_port, port = args.port, _free_port()
        self.stop(doc_port)
        words = [PLACEHOLDERS.get(w, w) for w in words]
        words = [w for i, w in enumerate(words) if w != "--port" and (i == 0 or words[i - 1] != "--port")
                 and not w.startswith("--port=")]
        log = cwd / f".serve-{port}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([sys.executable, "-m", "aiayn", *words, "--port", str(port)], cwd=cwd,
                                    env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        self.running[doc_port] = (proc, port, log, where)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise Bad(f"aiayn serve exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            try:
                if _get(f"http://127.0.0.1:{port}/api/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.3)
        else:
            raise Bad("aiayn serve did not answer within 180 s")
        if args.engine == "native":
            status, page = _get(f"http://127.0.0.1:{port}/")
            if status != 200 or b"<html" not in page.lower():
                raise Bad(f"aiayn serve's page / answered {status}")

    def port_of(self, doc_port: int) -> int | None:
        entry = self.running.get(doc_port)
        return entry[1] if entry else None

    def stop(self, doc_port: int) -> str | None:
        """Stop the server of this port; what went wrong with it while it ran, if anything."""
        entry = self.running.pop(doc_port, None)
        if entry is None:
            return None
        proc, _, log, where = entry
        crashed = proc.poll()
        if crashed is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        said = log.read_text(errors="replace")
        if crashed is not None or "Traceback" in said:
            how = "logged a traceback" if crashed is None else f"exited {crashed}"
            return f"{where}: aiayn serve {how}: {said[-2000:]}"
        return None

    def stop_all(self) -> list[str]:
        return [problem for port in list(self.running) if (problem := self.stop(port))]


def run_aiayn(words: list[str], cwd: Path, env: dict, stdin: bytes) -> tuple[int, bytes, bytes]:
    """`aiayn WORDS` in this process: in `cwd`, with `env` set and `stdin` as its standard input."""
    import torch

    from aiayn.cli import main

    saved_env = {k: os.environ.get(k) for k in env}
    saved = os.getcwd(), sys.stdin, torch.get_num_threads()
    out, err = io.BytesIO(), io.BytesIO()
    out_text = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    err_text = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
    try:
        os.chdir(cwd)
        os.environ.update(env)
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text):
            code = main([PLACEHOLDERS.get(w, w) for w in words])
    except SystemExit as exit_:  # --help, --version
        code = exit_.code if isinstance(exit_.code, int) else 1
    except BaseException:  # noqa: BLE001  a bug of the command: its traceback is the failure
        code = 1
        err_text.write(traceback.format_exc())
    finally:
        os.chdir(saved[0])
        sys.stdin = saved[1]
        torch.set_num_threads(saved[2])
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out_text.flush()
    err_text.flush()
    return code, out.getvalue(), err.getvalue()


class Runner:
    """answer() for run mode: each command checked as in parse mode, then run unless parse_only() says."""

    DEFAULT_SERVER = ["serve", "--model", "runs/demo/average"]

    def __init__(self):
        self.failures, self.ran, self.servers = [], [], Servers()

    def answer(self, call: Call):
        try:
            parsed = check(call)
            if parse_only(call, parsed):
                return 0, b"", b""
            return self._run(call, parsed)
        except Bad as err:
            self.failures.append(f"{call.where}: {call.text}\n    {err}")
            return 1, b"", b""

    def _run(self, call: Call, parsed):
        words = call.words[2:] if call.name.startswith("python") else call.words  # python -m aiayn
        if call.name == "curl":
            return self._curl(call, *parsed)
        if parsed is not None and parsed.command == "serve":
            self.servers.start(words, call.cwd, call.env, call.where)
            self.ran.append(call.text)
            return 0, b"", b""
        code, out, err = run_aiayn(words, call.cwd, call.env, call.stdin)
        if code != 0:
            raise Bad(f"exit {code}:\n{(out + err).decode(errors='replace')[-3000:]}")
        self.ran.append(call.text)
        return code, out, err

    def _curl(self, call: Call, doc_port, path, headers, body):
        import json

        if self.servers.port_of(doc_port) is None:  # curl alone: the page's server is assumed to be running
            self.servers.start([*self.DEFAULT_SERVER, "--port", str(doc_port)], call.cwd, {}, call.where)
        port = self.servers.port_of(doc_port)
        request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers,
                                         data=None if body is None else body.encode("utf-8"))
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                status, answer = response.status, response.read()
        except urllib.error.HTTPError as err:
            status, answer = err.code, err.read()
        if status != 200:
            raise Bad(f"HTTP {status}: {answer.decode(errors='replace')[:1000]}")
        json.loads(answer)
        self.ran.append(call.text)
        return 0, answer, b""


GERMAN = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.", "Eine Frau liest ein Buch.",
          "Kinder spielen im Park.", "Ein Hund rennt über eine Wiese."]
ENGLISH = ["A man rides a bicycle.", "Two dogs play in the snow.", "A woman reads a book.",
           "Children play in the park.", "A dog runs across a meadow."]


def _multi30k(directory: Path) -> None:
    directory.mkdir(parents=True)
    for split, rows in (("train", slice(0, 5)), ("val", slice(1, 3)), ("test_2016_flickr", slice(3, 5))):
        for lang, lines in (("de", GERMAN), ("en", ENGLISH)):
            with gzip.open(directory / f"{split}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines[rows]))


def _de_en_model(directory: Path) -> None:
    """An untrained tiny Transformer with a byte-fallback vocabulary: it reads and writes any text."""
    import torch

    from aiayn.checkpoint import save_checkpoint
    from aiayn.config import load_config
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.model import ModelConfig, build_model

    tokenizer = Tokenizer.train((GERMAN + ENGLISH) * 3, vocab_size=320, byte_fallback=True)
    cfg = load_config(None, ["data.src_lang=de", "data.tgt_lang=en", "data.byte_fallback=true",
                             "decode.max_len_b=5"])  # an untrained model writes to its length limit: a short one
    cfg.model = ModelConfig.preset("tiny", src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                                   pad_id=tokenizer.pad_id, dropout=0.0)
    torch.manual_seed(0)
    save_checkpoint(directory, build_model(cfg.model), cfg, tokenizer)


@pytest.fixture(scope="session")
def prepared(tmp_path_factory):
    """The directory the pages assume a reader works in (the module docstring lists what it holds)."""
    root = tmp_path_factory.mktemp("docs-commands") / "prepared"
    root.mkdir()

    def aiayn(*words):
        code, out, err = run_aiayn(list(words), root, {}, b"")
        assert code == 0, (out + err).decode(errors="replace")

    aiayn("demo", "--out", "runs/demo", "--set", "train.max_steps=20", "--set", "train.save_every=10",
          "--set", "train.eval_every=10", "--set", "data.synthetic_train=2000", "--set", "data.synthetic_valid=40")
    hf = root.parent / "hf"
    aiayn("export-hf", "--model", "runs/demo/average", "--out", str(hf))
    aiayn("import-hf", str(hf), "--out", "models/opus-de-en")
    _de_en_model(root / "runs" / "de-en" / "average")
    for stand_in, model in STAND_INS.items():
        (root / stand_in).symlink_to(model)
    aiayn("heads", "--model", "runs/demo/average", "--write-gold", "test.align")
    # moved, not copied: the README writes test.align.src / .tgt itself, as a new user's first commands do
    # (an existing one is kept unless --force)
    shutil.move(root / "test.align.src", root / "test.en")
    shutil.move(root / "test.align.tgt", root / "test.de")
    (root / "in.de").write_text("Ein Mann fährt Fahrrad.\nZwei Hunde spielen im Schnee.\n", encoding="utf-8")
    (root / "prefixes.en").write_text("A man\n\n", encoding="utf-8")
    _multi30k(root / "path" / "to" / "multi30k")
    for name in ("configs", "bench", "examples"):
        (root / name).symlink_to(REPO / name)
    return root


def _distinct(blocks: list[Block]) -> list[Block]:
    """Each distinct block once (the same commands on pages of two languages), on its English page."""
    chosen = {}
    for block in sorted(blocks, key=lambda b: ".ko." in b.page):
        chosen.setdefault(block.key, block)
    return list(chosen.values())


RUN_BLOCKS = _distinct(BLOCKS)


def test_a_failing_command_stops_its_block(tmp_path):
    block = Block("docs/x.md", 3, "aiayn translate --model nowhere --input in.de\necho ran > after.txt\n")
    work = tmp_path / "work"
    work.mkdir()
    runner = Runner()
    bash = run_block(block, work, dict(os.environ), runner.answer, timeout=60)
    assert len(runner.failures) == 1 and runner.failures[0].startswith("docs/x.md:3: aiayn translate")
    assert "exit 2" in runner.failures[0] and "nowhere" in runner.failures[0]
    assert bash and not (work / "after.txt").exists()


@pytest.mark.slow
@pytest.mark.parametrize("block", RUN_BLOCKS, ids=[b.name for b in RUN_BLOCKS])
def test_commands_run(block, prepared, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(prepared, work, symlinks=True)
    runner = Runner()
    env = {**os.environ, "AIAYN_MULTI30K_DIR": str(work / "path" / "to" / "multi30k")}
    try:
        bash = run_block(block, work, env, runner.answer, timeout=900)
    finally:
        stopped = runner.servers.stop_all()
    failures = runner.failures + stopped + (bash if not runner.failures else [])
    assert not failures, "\n".join(failures)
