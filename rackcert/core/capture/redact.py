"""What never goes into a capture: guestinfo values and values of secret-like keys.

guestinfo.* carries a VM's cloud-init identity (rackcert writes only public keys and
addresses there, but other tools put passwords in it), and a site may keep credentials
in any extraConfig key. Their values are withheld and replaced by their sha256: the
rehearsal puts back a value only where the spec would write exactly that value, so
nothing the capture withheld is ever read back from it. Host thumbprints, PCI ids and
system UUIDs stay: they identify hardware, they do not open it.
"""

from __future__ import annotations

import hashlib
import re

WITHHELD = "<withheld>"
# What a twin serving a capture holds in place of a withheld value: the marker and the
# digest, so a capture of that twin equals the capture it serves.
SERVED_WITHHELD = re.compile(r"<withheld (sha256:[0-9a-f]{64})>")


def served(digest: str | None) -> str:
    """The value a twin serves for a withheld one."""
    return f"<withheld {digest}>" if digest else WITHHELD


_SECRET_WORDS = {
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "token",
    "credential",
    "credentials",
    "key",
    "privatekey",
    "apikey",
    "auth",
    "cookie",
    "userdata",
}


def is_secret_key(key: str) -> bool:
    """True for guestinfo.* and for keys with a secret-like word (password, token, key...)."""
    lower = key.lower()
    if lower.startswith("guestinfo."):
        return True
    return any(word in _SECRET_WORDS for word in re.split(r"[^a-z0-9]+", lower))


def sha256(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()
