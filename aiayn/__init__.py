"""aiayn: Attention Is All You Need, as software you can train, decode, score and look inside."""

from aiayn.threads import spin_briefly

__version__ = "0.1.0"
__all__ = ["ModelConfig", "Translator", "build_model", "count_parameters", "__version__"]

spin_briefly()  # before torch loads OpenMP, in a notebook as at the command line (aiayn.threads)


def __getattr__(name: str):
    # these names load on first use: `import aiayn` (and the command line's first moments, where
    # a Ctrl-C must be a clean stop) does not wait for torch
    if name in ("ModelConfig", "build_model", "count_parameters"):
        from aiayn import model

        return getattr(model, name)
    if name == "Translator":
        from aiayn.decoding.translator import Translator

        return Translator
    raise AttributeError(f"module 'aiayn' has no attribute {name!r}")
