"""Load a spec from YAML with errors that name file, line and field.

ruamel.yaml keeps the line of every key, so a pydantic error location such as
('hosts', 2, 'profile') becomes `inventories/a.yaml:14: hosts[2].profile: ...`.
Every failure is a single `SpecError` line; callers never see a traceback.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.parser import RoundTripParser

from rackcert.core.errors import SpecError
from rackcert.core.spec import Spec
from rackcert.core.spec_rules import Loc, find_problems

MAX_SPEC_BYTES = 1024 * 1024  # the largest example is a few KiB; 1 MiB is a rack of thousands
MAX_NODES = 30_000  # scalars, mappings and sequences: a 1,000-VM rack needs about 15,000
MAX_DEPTH = 64  # nesting; the schema itself is under 10 deep

_SECRET_KEY = re.compile(r"(password|passwd|secret|token|passphrase|private_key)$", re.I)


@dataclass(frozen=True)
class LoadedSpec:
    spec: Spec
    path: Path
    sha256: str
    text: str


def format_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def _line_of(data: Any, loc: Loc) -> int:
    """1-based line of the deepest part of `loc` present in the document."""
    line = 1
    node = data
    for part in loc:
        lc = getattr(node, "lc", None)
        try:
            if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
                line = lc.item(part)[0] + 1 if lc else line
                node = node[part]
            elif isinstance(part, str) and isinstance(node, dict) and part in node:
                line = lc.key(part)[0] + 1 if lc else line
                node = node[part]
            else:
                break
        except (KeyError, IndexError, TypeError):
            break
    return line


def _inline_secrets(node: Any, loc: Loc = ()) -> Loc | None:
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and _SECRET_KEY.search(key) and value not in (None, ""):
                return (*loc, key)
            found = _inline_secrets(value, (*loc, str(key)))
            if found:
                return found
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found = _inline_secrets(value, (*loc, index))
            if found:
                return found
    return None


def _pydantic_message(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key (not part of the spec; check its spelling and indentation)"
    if kind == "missing":
        return "required field is missing"
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ")


def _clean_loc(loc: tuple[Any, ...]) -> Loc:
    """Drop pydantic's internal union/function tags from a location."""
    return tuple(p for p in loc if isinstance(p, int) or "[" not in str(p))


class _ShapeCheck:
    """Refuse what makes a small file expensive to load, at the parser event that shows it.

    A billion-laughs spec (342 bytes of nested aliases) took a minute and 1.2 GB:
    anchors and aliases are refused outright (a spec has no use for them), and
    size, node count and nesting are capped. The composer builds nothing but the
    node graph before the whole stream is read (an alias is a reference there, not
    a copy; the blow-up comes after, when values are walked), so checking each event
    as it is consumed refuses the file before anything is built from it, in the one
    parse the load does anyway (a separate pass over the events cost a second parse
    of every spec: about 40 % of a load). A file over a cap is refused after the nodes
    up to the cap are composed (30,000 values: ~3 s instead of ~2 s on a loaded 2-core
    machine), but the worst case is lower: a file inside the caps is parsed once, not twice.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.depth = self.nodes = 0

    def __call__(self, event: Any) -> None:
        name = type(event).__name__
        line = event.start_mark.line + 1 if event.start_mark else 1
        if name == "AliasEvent" or getattr(event, "anchor", None):
            raise SpecError(
                f"{self.source}:{line}: YAML anchors and aliases (&name, *name) are not allowed"
                " in a spec; write the values out"
            )
        if name in ("ScalarEvent", "MappingStartEvent", "SequenceStartEvent"):
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise SpecError(f"{self.source}:{line}: the spec has more than {MAX_NODES} values")
        if name in ("MappingStartEvent", "SequenceStartEvent"):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise SpecError(
                    f"{self.source}:{line}: the spec nests deeper than {MAX_DEPTH} levels"
                )
        elif name in ("MappingEndEvent", "SequenceEndEvent"):
            self.depth -= 1


class _CheckedParser(RoundTripParser):  # type: ignore[misc]
    """ruamel's round-trip parser; every event the composer consumes passes `shape` first."""

    shape: _ShapeCheck | None = None

    def get_event(self) -> Any:
        event = super().get_event()
        if self.shape is not None:
            self.shape(event)
        return event


def _load_yaml(text: str, source: str) -> Any:
    """The document as ruamel's commented containers (they keep every key's line)."""
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise SpecError(f"{source}:1: the spec is larger than {MAX_SPEC_BYTES} bytes")
    yaml = YAML(typ="rt", pure=True)
    yaml.Parser = _CheckedParser
    yaml.parser.shape = _ShapeCheck(source)
    return yaml.load(text)


def parse_spec(text: str, source: str = "<spec>") -> LoadedSpec:
    """Validate spec text; `source` is how errors name the file."""
    if not text.strip():
        raise SpecError(f"{source}:1: the spec is empty")
    try:
        data = _load_yaml(text, source)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        raise SpecError(f"{source}:{line}: malformed YAML: {exc.problem or exc.context}") from None
    except (YAMLError, ValueError, TypeError, RecursionError) as exc:
        raise SpecError(f"{source}:1: malformed YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}:1: the spec must be a mapping of keys (apiVersion, kind, ...)")
    secret = _inline_secrets(data)
    if secret:
        raise SpecError(
            f"{source}:{_line_of(data, secret)}: {format_loc(secret)}: inline secrets are not"
            f" allowed; use {secret[-1]}_env (environment variable) or {secret[-1]}_file"
        )
    try:
        spec = Spec.model_validate(_plain(data))
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        loc = _clean_loc(first["loc"])
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise SpecError(
            f"{source}:{_line_of(data, loc)}: {format_loc(loc)}: {_pydantic_message(first)}{more}"
        ) from None
    problems = find_problems(spec)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise SpecError(
            f"{source}:{_line_of(data, first.loc)}: {format_loc(first.loc)}: {first.message}{more}"
        )
    digest = hashlib.sha256(text.encode()).hexdigest()
    return LoadedSpec(spec=spec, path=Path(source), sha256=digest, text=text)


def _plain(node: Any) -> Any:
    """ruamel's commented containers -> plain dict/list, keys as strings."""
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def load_spec(path: str | Path) -> LoadedSpec:
    """Read and validate a spec file; every failure is one SpecError line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"{path}: no such spec file") from None
    except IsADirectoryError:
        raise SpecError(f"{path}: is a directory, not a spec file") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SpecError(f"{path}:1: not UTF-8 text") from None
    loaded = parse_spec(text, str(path))
    return LoadedSpec(spec=loaded.spec, path=path, sha256=loaded.sha256, text=text)
