"""The generated reference pages (docs/reference/cli.md, config.md, rest.md, and their Korean cli.ko.md,
config.ko.md, rest.ko.md) are what docs/gen_reference.py makes from the code now, and they list every option
of every command and every field of the config."""

import dataclasses
import importlib.util
import re

import pytest

from tests.paths import REPO

SPEC = importlib.util.spec_from_file_location("gen_reference", REPO / "docs" / "gen_reference.py")
gen = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gen)


def page(name: str) -> str:
    return (REPO / "docs" / "reference" / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(gen.PAGES))
def test_generated_page_is_current(name):
    if name.startswith("rest."):
        pytest.importorskip("fastapi")
        pytest.importorskip("httpx")
    assert page(name) == gen.PAGES[name](), f"docs/reference/{name} is stale: run python docs/gen_reference.py"


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def help_options(text: str) -> set[str]:
    """The option strings of an argparse --help: those of the lines that start an option's entry."""
    entries = re.findall(r"^ {2}(-\S.*?)(?: {2,}|$)", text, flags=re.M)
    return {o for entry in entries for o in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", entry)}


@pytest.mark.parametrize("name", ["cli.md", "cli.ko.md"])
def test_cli_page_lists_every_command_and_every_option_of_its_help(name):
    from aiayn.cli import build_parser

    sections = _sections(page(name))
    found = gen.commands(build_parser())
    assert {"aiayn train", "aiayn translate", "aiayn attention", "aiayn serve"} <= {c for c, _, _ in found}
    for command, _, parser in found:
        assert command in sections, f"{command} has no section in docs/reference/{name}"
        listed = set(re.findall(r"`(-[\w-]+)`", sections[command]))
        missing = help_options(parser.format_help()) - {"-h", "--help"} - listed
        assert not missing, f"{command}: options of --help missing from docs/reference/{name}: {sorted(missing)}"


@pytest.mark.parametrize("name", ["config.md", "config.ko.md"])
def test_config_page_lists_every_field_with_its_meaning(name):
    from aiayn.config import ExperimentConfig

    cfg, sections = ExperimentConfig(), _sections(page(name))
    for section in dataclasses.fields(cfg):
        cls = type(getattr(cfg, section.name))
        names = [f.name for f in dataclasses.fields(cls)]
        meanings = gen.attributes(cls)
        assert not set(names) - set(meanings), f"{cls.__name__}: fields without a meaning in its docstring's " \
            f"Attributes: {sorted(set(names) - set(meanings))}"
        assert not set(meanings) - set(names), f"{cls.__name__}: Attributes that are no field: " \
            f"{sorted(set(meanings) - set(names))}"
        rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| [^|]+ \| (.+) \|$", sections[section.name], flags=re.M)
        assert [n for n, _ in rows] == names
        assert all(meaning.strip() for _, meaning in rows)


@pytest.mark.parametrize("name", ["rest.md", "rest.ko.md"])
def test_rest_page_has_every_endpoint_and_an_example_per_translate_endpoint(name):
    pytest.importorskip("fastapi")
    text = page(name)
    for endpoint in ("GET /api/health", "POST /api/translate", "POST /api/translate_batch", "POST /api/step",
                     "GET /api/info", "GET /api/positions"):
        assert f"## {endpoint}\n" in text
    sections = _sections(text)
    for endpoint in ("POST /api/translate", "POST /api/translate_batch"):
        assert sections[endpoint].count("```json") == 2, f"{endpoint}: one request and one answer"
