"""Garbled specs never crash the loader: each yields exactly one SpecError line, or loads.

Two corpora, both from the valid examples: text-level garbling (bytes deleted,
duplicated, replaced, lines dropped or re-indented) and structure-level edits
(keys removed, values replaced by wrong types, list entries duplicated).
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rackcert.core.errors import SpecError
from rackcert.core.spec_loader import parse_spec
from tests.support.spec_helpers import LAB, R750

TEXTS = [R750.read_text(), LAB.read_text()]
LINE_RE = re.compile(r"^spec\.yaml:\d+: \S")


def _outcome(text: str) -> str:
    """'ok' or 'error'; anything else (an exception escaping) fails the test."""
    try:
        parse_spec(text, "spec.yaml")
    except SpecError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert LINE_RE.match(message), message
        assert "Traceback" not in message
        return "error"
    return "ok"


@st.composite
def garbled_text(draw):
    text = draw(st.sampled_from(TEXTS))
    lines = text.splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["drop", "dup", "indent", "chars", "swap", "truncate"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "indent":
            lines[i] = draw(st.sampled_from([" ", "   ", "\t", ""])) + lines[i].lstrip()
        elif op == "chars":
            line = lines[i]
            j = draw(st.integers(0, max(0, len(line) - 1)))
            junk = draw(st.text(alphabet=":-[]{}#&*!|>'\"%@` ,?0x\u00e9\x00", max_size=3))
            lines[i] = line[:j] + junk + line[j + 1 :]
        elif op == "swap" and len(lines) > 1:
            k = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[k] = lines[k], lines[i]
        elif op == "truncate":
            lines = lines[:i]
        if not lines:
            break
    return "".join(lines)


WRONG_VALUES = st.one_of(
    st.none(),
    st.integers(-5, 10**6),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.booleans(),
    st.floats(allow_nan=True),
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


@st.composite
def edited_structure(draw):
    data = copy.deepcopy(yaml.safe_load(draw(st.sampled_from(TEXTS))))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        path = draw(st.sampled_from(paths))
        parent = data
        for part in path[:-1]:
            parent = parent[part]
        op = draw(st.sampled_from(["delete", "replace", "duplicate"]))
        key = path[-1]
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(WRONG_VALUES)
        elif isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        if not isinstance(data, dict) or not data:
            break
    return yaml.safe_dump(data, sort_keys=False)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(garbled_text())
def test_garbled_text_never_crashes(text):
    _outcome(text)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_structure())
def test_structural_edits_never_crash(text):
    _outcome(text)


def test_cli_on_garbled_specs_one_line_exit_2(tmp_path):
    """Through the real console entry point: exit 2, one stderr line, no traceback."""
    samples = [
        TEXTS[0].replace("gpus:", "gpus: [", 1),
        TEXTS[0].replace("vcpus: 32", "vcpus: many", 1),
        TEXTS[1].replace("hosts:", "hostz:", 1),
        "\x00\x01binary",
    ]
    for n, text in enumerate(samples):
        path = tmp_path / f"b{n}.yaml"
        path.write_text(text)
        out = subprocess.run(
            [sys.executable, "-m", "rackcert.cli", "spec", "check", str(path)],
            capture_output=True,
            text=True,
        )
        assert out.returncode == 2, (text[:80], out.stdout, out.stderr)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, out.stderr
        assert "Traceback" not in out.stderr
        assert lines[0].startswith(f"error: {path}:")


REQUIRED = [
    ("metadata", "name"),
    ("vcenter", "host"),
    ("vcenter", "user"),
    ("hosts", 0, "profile"),
    ("hosts", 1, "address"),
    ("vms", 0, "template"),
    ("vms", 1, "address"),
    ("hardware_profiles", 0, "server_model"),
    ("hardware_profiles", 0, "gpus", 0, "memory_gb"),
    ("hardware_profiles", 0, "gpus", 1, "pci"),
]


def _node(data, path):
    for part in path:
        data = data[part]
    return data


def _lookup(data, path):
    """The node at `path`, or None where an earlier edit replaced a step of it (a list
    turned into {"zz": 1} by scalar_to_map has no item 0)."""
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


@st.composite
def broken_spec(draw):
    """A spec with at least one certain defect: each edit alone makes it invalid."""
    data = copy.deepcopy(yaml.safe_load(draw(st.sampled_from(TEXTS))))
    names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=10)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["unknown_key", "scalar_to_map", "drop", "ref", "secret"]))
        mappings = [p for p in _paths(data) if isinstance(_node(data, p), dict)]
        if op == "unknown_key":
            target = _node(data, draw(st.sampled_from(mappings)))
            target["zz_" + draw(names)] = draw(WRONG_VALUES)
        elif op == "scalar_to_map":
            leaves = [p for p in _paths(data) if p and not isinstance(_node(data, p), dict)]
            path = draw(st.sampled_from(leaves))
            _node(data, path[:-1])[path[-1]] = {"zz": 1}
        elif op == "drop":
            path = draw(st.sampled_from(REQUIRED))
            parent = _lookup(data, path[:-1])
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            else:
                data["zz_dropped"] = True
        elif op == "ref":
            field = draw(st.sampled_from([("hosts", "profile"), ("vms", "template")]))
            entries = data.get(field[0])
            if isinstance(entries, list) and entries and isinstance(entries[0], dict):
                entries[0][field[1]] = "no-such-" + draw(names)
            else:
                data["zz_ref"] = True
        else:
            target = _node(data, draw(st.sampled_from(mappings)))
            target[draw(st.sampled_from(["password", "api_token", "secret"]))] = draw(names)
    return yaml.safe_dump(data, sort_keys=False)


@settings(max_examples=220, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_spec())
def test_corpus_of_broken_specs_all_exit_2_with_one_line(text):
    """The fault corpus of the end-to-end issue: >= 200 broken specs, each one clean error."""
    assert _outcome(text) == "error"
