"""The `aiayn` command line: one module per command group, each with `add_parsers(sub)` and
`COMMANDS = {name: handler}`; this module builds the parser from them and turns what goes wrong into one
line. Wiring only: the logic lives in the library.

A new command group is a new module here plus its name in COMMAND_GROUPS."""

import argparse
import importlib
import logging
import os
import signal
import sys
import threading

from aiayn import __version__

# modules of aiayn.cli
COMMAND_GROUPS = ("train", "translate", "score", "models", "attention", "serve", "heads", "audit", "onnx_export",
                  "export_site", "calibrate")


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error. argparse prints its usage block first, a dozen lines that bury the
    one that says what was wrong; --help still prints everything."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


def _groups() -> list:
    return [importlib.import_module(f"aiayn.cli.{name}") for name in COMMAND_GROUPS]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="aiayn", description="Attention Is All You Need: train, translate, evaluate and look "
                    "inside Transformer and RNN attention models")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details (default: off)")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error (also: AIAYN_DEBUG=1)")
    parser.add_argument("--version", action="version", version=f"aiayn {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for group in _groups():
        group.add_parsers(sub)
    return parser


def _user_message(err: BaseException) -> str | None:
    """One line for the known families of user mistakes; None for anything else, which is a bug and
    keeps its traceback."""
    from aiayn.errors import AiaynError

    if isinstance(err, AiaynError):
        return str(err)
    if isinstance(err, OSError) and err.filename:
        return f"{err.filename}: {err.strerror or err}; check the path and its permissions"
    return None


def _exit_now(code: int) -> None:
    """Leave at once and quietly: what is written is flushed, nothing more runs (no shutdown traceback)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe: nothing more can reach the reader anyway
            pass
    os._exit(code)


class _Interrupt:
    """SIGINT. While the command's libraries load (torch: a KeyboardInterrupt raised inside its native
    import can abort the interpreter) nothing is being written, so a Ctrl-C ends the process at once with
    its one line. Once the command runs, the first one stops it (KeyboardInterrupt: every `finally` runs and
    temporary files go); a second one while it leaves ends the process at once, quietly."""

    def __init__(self, words: list[str]):
        self.line = f"{_command_name(words)}: interrupted\n".encode()
        self.starting, self.leaving = True, False

    def __call__(self, signum, frame):
        if self.starting:
            os.write(2, self.line)
            _exit_now(130)
        if self.leaving:
            _exit_now(130)
        self.leaving = True
        raise KeyboardInterrupt


def _command_name(argv: list[str]) -> str:
    known = [a for a in argv if not a.startswith("-")][:1]
    return f"aiayn {known[0]}" if known else "aiayn"


def main(argv=None) -> int:
    """The command line. Ctrl-C at any moment, from the first import on, is one line and exit 130."""
    program = argv is None  # the command line itself (not a caller in Python): it owns the process's exit
    words = sys.argv[1:] if argv is None else [str(a) for a in argv]
    debug = "--debug" in words or os.environ.get("AIAYN_DEBUG", "") not in ("", "0")
    in_main_thread = threading.current_thread() is threading.main_thread()
    interrupt = _Interrupt(words)
    previous = signal.signal(signal.SIGINT, interrupt) if in_main_thread else None
    try:
        return _run(words, debug, interrupt)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{_command_name(words)}: interrupted", file=sys.stderr)
        return 130
    finally:
        if in_main_thread:
            # the program: a Ctrl-C while the interpreter shuts down (torch, worker pools) ends it quietly
            signal.signal(signal.SIGINT, (lambda signum, frame: _exit_now(130)) if program else previous)


# options whose value may start with "-": argparse takes "--alignment-head -1:1" for two options and says
# only "expected one argument"; joined as "--alignment-head=-1:1", the value reaches the check that says
# what is wrong with it
VALUES_LIKE_OPTIONS = ("--alignment-head",)


def _join_values(words: list[str]) -> list[str]:
    out = []
    for word in words:
        if out and out[-1] in VALUES_LIKE_OPTIONS and word.startswith("-") and not word.startswith("--"):
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


def _run(words: list[str], debug: bool, interrupt: _Interrupt) -> int:
    parser = build_parser()
    args = parser.parse_args(_join_values(words))
    if args.command is None:
        parser.print_help()
        return 0
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    handler = {name: h for group in _groups() for name, h in group.COMMANDS.items()}[args.command]
    import torch  # noqa: F401  every command's models: loaded while a Ctrl-C simply ends the process

    from aiayn.threads import limit_to_usable

    limit_to_usable()  # a container's CPU quota, which torch does not count
    interrupt.starting = False
    try:
        return handler(args) or 0
    except BrokenPipeError:  # the reader left (e.g. `| head -1`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141
    except Exception as err:
        message = _user_message(err)
        if message is None or debug:
            raise
        print(f"aiayn {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
