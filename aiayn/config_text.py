"""Config text in and out: strict YAML (a key written twice in one mapping is an error, where PyYAML would
keep the last), a config file's top-level mapping, values applied to the config's dataclass sections with
their types checked and where each was set recorded, `--set` items parsed, and a config written back as
YAML. What the sections are and which values they accept is aiayn.config's."""

import dataclasses
import difflib
import typing
from pathlib import Path

import yaml

from aiayn.errors import ConfigError


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key, line: int, first_line: int):
        super().__init__(f"duplicate key {key!r}")
        self.key, self.line, self.first_line = key, line, first_line


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping (SafeLoader silently keeps the last)."""

    def construct_mapping(self, node, deep=False):
        first_line = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden: not a duplicate
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, (str, int, float, bool)):
                continue  # an unhashable key: SafeLoader's own error follows
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise DuplicateKeyError(key, line, first_line[key])
            first_line[key] = line
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, where: str, hint: str = ""):
    """Parse with _StrictLoader; errors become one line naming `where` (a file, or the --set item)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except DuplicateKeyError as err:
        lines = f" at line {err.line} (first at line {err.first_line})" if err.first_line != err.line else ""
        raise ConfigError(f"{where}: duplicate key {err.key!r}{lines}; YAML would keep only the last, so keep "
                          f"only one") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{where}: not valid YAML ({err.problem or err.context}{at}){hint}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{where}: not valid YAML ({err}){hint}") from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise ConfigError(f"{where}: YAML nested too deeply for a config (thousands of levels); a config needs "
                          f"two levels, e.g. model: {{d_model: 512}}") from None


def read_mapping(path: Path) -> dict:
    """The top-level mapping of a YAML config file, with an error naming the file for each way it can fail."""
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    if path.is_dir():
        raise ConfigError(f"config file {path} is a directory; give a YAML file such as configs/demo.yaml")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start}); save the config as UTF-8") from None
    except OSError as err:
        raise ConfigError(f"config file {path}: cannot read it ({err.strerror}); check its permissions") from None
    values = parse_yaml(text, str(path))
    if values is None:  # an empty file (or only comments): the defaults
        return {}
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a mapping of sections (data:, model:, train:, decode:), "
                          f"got {type(values).__name__} {values!r:.60}")
    return values


def coerce(value, annotation, where: str):
    """Check/convert a YAML value to the field's declared type."""
    if annotation is typing.Any:
        return value
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is float and isinstance(value, str):  # YAML 1.1 reads 1e-9 (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    if annotation is tuple and isinstance(value, list):
        return tuple(value)
    if isinstance(annotation, type) and not isinstance(value, annotation):
        raise ConfigError(f"{where}: expected {annotation.__name__}, got {type(value).__name__} {value!r}")
    if isinstance(value, bool) and annotation in (int, float):
        raise ConfigError(f"{where}: expected {annotation.__name__}, got bool {value!r}")
    return value


def apply_values(obj, values, prefix: str, source: str, origins: dict):
    """Set the fields of obj from values (a mapping), recording in origins where each field was set."""
    if values is None and prefix:  # a section with every key commented out
        return
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: section {prefix.rstrip('.') or '<top>'} must be a mapping, got {values!r}")
    fields = {f.name: f for f in dataclasses.fields(obj)}
    hints = typing.get_type_hints(type(obj))
    for key, value in values.items():
        if key not in fields:
            near = difflib.get_close_matches(str(key), list(fields), n=1)
            hint = f"; did you mean {prefix}{near[0]}?" if near else f"; valid keys: {sorted(fields)}"
            raise ConfigError(f"{source}: unknown key {prefix}{key}{hint}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            apply_values(current, value, f"{prefix}{key}.", source, origins)
        else:
            setattr(obj, key, coerce(value, hints[key], f"{source}: {prefix}{key}"))
            origins[f"{prefix}{key}"] = source


def parse_override(item: str) -> tuple[list[str], object]:
    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=value, for example train.max_steps=200")
    key, raw = item.split("=", 1)
    keys = key.strip().split(".")
    if not all(keys):
        raise ConfigError(f"--set {item!r}: empty key; expected section.key=value, for example train.max_steps=200")
    return keys, parse_yaml(raw, f"--set {item!r}", "; quote a text value") if raw != "" else ""


def nest(path: list[str], value) -> dict:
    return {path[0]: value} if len(path) == 1 else {path[0]: nest(path[1:], value)}


def to_dict(cfg) -> dict:
    def plain(v):
        return list(v) if isinstance(v, tuple) else v
    return {k: (to_dict(v) if dataclasses.is_dataclass(v) else plain(v)) for k, v in vars(cfg).items()}


def config_yaml(cfg) -> str:
    """The config as YAML text (written to disk by aiayn.checkpoint's atomic helpers)."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False)
