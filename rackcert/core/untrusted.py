"""Text from parties rackcert does not trust, made safe for where it goes.

Nodes (probe output, GPU names), vCenter inventory names and run directories that may
come from elsewhere all reach rackcert's records, terminal, XML and report. None of them
may steer what the reader sees: a `[/]` in a GPU name is Rich markup that crashed the
summary, an ESC sequence moves the cursor or writes the clipboard (OSC 52), an ESC byte
makes junit.xml ill-formed, and one 300 KB value hung the PDF renderer. Each helper here
does one of those jobs, at the place the text enters or leaves:

- `strip_controls`: probe output as it is parsed (C0/C1 controls and DEL go; tab and
  newline stay);
- `visible`: names shown to people (a file name with ESC prints as `\\x1b`, never runs);
- `markup`: a value placed inside a Rich markup line (visible, then markup-escaped);
- `cap` / `cap_strings`: a node-derived value kept to CAP characters where it is
  recorded, with a pointer to the artifact that holds the rest;
- `xml_text`: characters XML 1.0 allows, nothing else;
- `SafeConsole`: the CLI's consoles, which show any control character that still
  reaches them and print a line whose markup does not parse as plain text.

Example:
    console.print(f"[green]OK[/] {markup(name)}")
    value = cap(gpu_name, where="artifacts/validate/facts.json")
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.errors import MarkupError
from rich.markup import escape
from rich.segment import Segment

CAP = 512  # characters of one node-derived value kept in a record or shown in the report

# C0 controls but tab and newline, DEL, C1 controls.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Every control character, plus the bidirectional overrides that reorder what is shown.
_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# What XML 1.0 allows (Char production): anything else makes the document ill-formed.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


# Whole escape sequences (ECMA-48): CSI (ESC [ or 0x9b, parameters, intermediates, final
# byte), OSC (ESC ] ... ended by BEL or ST), and two-byte ESC Fe. Dropped whole, so a colour
# code in a tool's output (`nvidia-smi topo -m` underlines its header) leaves no "[4m".
_SEQUENCES = re.compile(
    "(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]"
    "|(?:\x1b\\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\\\|\x9c)?"
    "|\x1b[@-Z\\\\-_]"
)


# The ASCII controls `_CONTROLS` removes, for bytes.translate.
_ASCII_CONTROLS = bytes([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])


def strip_controls(text: str) -> str:
    """`text` without escape sequences, C0/C1 control characters and DEL; tab and newline
    are kept.

    Every probe's output passes here (about 150 KB per node, mostly `dpkg -l`), so the
    common case is cheap: ASCII text without ESC cannot hold a sequence (they start with
    ESC, or with C1 0x9b/0x9d, which are not ASCII) and loses its controls through
    bytes.translate, ten times faster than the two regular expressions (7 ms a node).
    """
    if text.isascii() and "\x1b" not in text:
        raw = text.encode("ascii")
        kept = raw.translate(None, _ASCII_CONTROLS)
        return text if len(kept) == len(raw) else kept.decode("ascii")
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control (newline included) and bidi override shown as `\\xNN`."""
    return _INVISIBLE.sub(_escaped, text)


def markup(value: object) -> str:
    """An untrusted value to place inside a Rich markup string: shown, never interpreted."""
    return escape(visible(str(value)))


def cap(text: str, limit: int = CAP, where: str | None = None) -> str:
    """`text` cut to `limit` characters, saying how much was cut and where the rest is."""
    if len(text) <= limit:
        return text
    rest = f" in {where}" if where else ""
    return f"{text[:limit]}... [{len(text) - limit} more characters{rest}]"


def cap_strings(value: Any, limit: int = CAP, where: str | None = None) -> Any:
    """`cap` applied to every string (keys included) of nested dicts and lists."""
    if isinstance(value, str):
        return cap(value, limit, where)
    if isinstance(value, dict):
        return {
            cap_strings(k, limit, where): cap_strings(v, limit, where) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [cap_strings(v, limit, where) for v in value]
    return value


def cap_model(value: Any, where: str | None = None, limit: int = CAP) -> Any:
    """`cap_strings` for a typed value too: a pydantic model's string fields are cut in a
    copy of it (a new model, the same class, never re-read from a dict); dicts, lists and
    strings as cap_strings."""
    from pydantic import BaseModel  # here, not above: the CLI's consoles start without pydantic

    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        return value.model_copy(
            update={name: cap_model(getattr(value, name), where, limit) for name in fields}
        )
    if isinstance(value, dict):
        return {cap_strings(k, limit, where): cap_model(v, where, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [cap_model(v, where, limit) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    return cap_strings(value, limit, where)


def xml_text(text: str) -> str:
    """`text` with the characters XML 1.0 cannot hold shown as `\\xNN` (ESC, NUL, ...)."""
    return _NOT_XML.sub(_escaped, text)


class SafeConsole(Console):
    """A Rich console that never lets a control character through and never dies on markup.

    Rich itself strips only a few controls (BEL, BS, CR, VT, FF): ESC, OSC and CSI
    sequences would reach the terminal. Rich's own styling is added after this point, so
    showing the controls here costs nothing of rackcert's colours. A line whose markup
    does not parse (an untrusted `[/]` that a call site failed to escape) prints as
    plain text instead of ending the command.
    """

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().render_str(_shown(text), *args, **kwargs)
        except MarkupError:
            kwargs["markup"] = False
            return super().render_str(_shown(text), *args, **kwargs)

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        # Text objects (rackcert.cli.display prints data as Text) bypass render_str: their
        # segments are cleaned here, before Rich turns styles into escape sequences. Control
        # segments are Rich's own (cursor moves of a progress display) and pass as they are.
        return super()._render_buffer(
            seg if seg.control else Segment(_shown(seg.text), seg.style) for seg in buffer
        )


def _shown(text: str) -> str:
    """Controls shown as `\\x1b`, except the newline and tab Rich lays lines out with."""
    return _INVISIBLE.sub(lambda m: m.group() if m.group() in "\n\t" else _escaped(m), text)
