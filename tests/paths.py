"""Paths the tests compute, in one place: a test file's own depth under tests/ never matters."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent  # the repository root: aiayn/, configs/, docs/, examples/, tests/
