"""CLI subcommands that use trained models: translate, evaluate, average, attention, serve."""

COMMANDS = {}


def add_parsers(sub) -> None:
    pass
