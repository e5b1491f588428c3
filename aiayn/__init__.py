"""aiayn: Attention Is All You Need, as software you can train, decode, score and look inside."""

from aiayn.model import ModelConfig, build_model, count_parameters

__version__ = "0.1.0"
__all__ = ["ModelConfig", "build_model", "count_parameters", "__version__"]
