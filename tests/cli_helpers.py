"""Running the command line in-process, and what every bad-input case asserts."""

from aiayn.cli import main


def run_cli(argv, capsys) -> tuple[int, str]:
    """aiayn's exit code and everything it printed (stdout + stderr)."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def assert_user_error(code, output, *needles):
    """Exit code 2, no traceback, and the message names each needle (a file, a field, an option)."""
    assert code == 2, output
    assert "Traceback" not in output
    for needle in needles:
        assert str(needle) in output, f"{needle!r} not in: {output}"
