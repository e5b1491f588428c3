"""What captured attention maps cannot answer: the error, and the check of a --layer or --head index. A leaf
of the maps package, so that the writers and the notebook display need not import the maps' own module."""

from aiayn.errors import AiaynError


class InspectError(AiaynError):
    """A request the captured maps cannot answer: an empty sentence, a layer, head or kind the model lacks."""


def check_index(value: int | None, size: int, name: str) -> None:
    """--layer / --head: 0-based, within the model's count (None = all)."""
    if value is not None and not 0 <= value < size:
        raise InspectError(f"--{name} {value} out of range: the model has {size} {name}s (0-based: 0 to {size - 1})")
