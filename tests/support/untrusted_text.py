"""What more than one test module needs from the old test_untrusted_text.py:
tests/integration/test_untrusted_text.py, tests/unit/test_untrusted_text.py.
"""

from __future__ import annotations

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"
MARKUP = "[/] [bold red]FAKE[/]"
