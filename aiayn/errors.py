"""User-facing errors: one base class, so the command line can tell a user's mistake (a one-line
message naming the file, line or field and what to do) from a bug (a traceback)."""


class AiaynError(ValueError):
    """A mistake in what the user gave: a file, a config value, a request, an option.

    Subclasses ValueError so library callers that catch ValueError keep working."""


class OutputError(AiaynError):
    """An output path that would overwrite or delete something the user made."""


class BudgetExceeded(AiaynError):
    """A request that would run past the time budget it was given (the server's per-request limit)."""


class ConfigError(AiaynError):
    """A user mistake in a config file or override (aiayn.config; data sources check theirs too)."""


class CheckpointError(AiaynError):
    """A model, checkpoint or run directory that is missing, damaged or not aiayn's (aiayn.checkpoint,
    aiayn.run_dir)."""
