"""A verified, always-logged-out vCenter session from a spec's `vcenter:` block.

TLS is verified by default: against `tls.ca_file`, or by pinning the SHA-256
fingerprint in `tls.thumbprint`; `tls.verify: false` is honoured only with a
warning. A wrong password, an unreachable vCenter or a certificate that does not
verify becomes one line and exit code 2 (`SessionError`), never a traceback.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import warnings
from collections.abc import Iterator
from typing import Any

from provision.renew import renewing
from rackcert.core.errors import RackcertError
from rackcert.core.secrets import resolve_secret
from rackcert.core.spec import Spec, VCenter
from rackcert.core.vsphere_rules import with_retries


class SessionError(RackcertError):
    """vCenter refused us or could not be reached: the input (address, password, pin) is wrong."""

    exit_code = 2


class InsecureSessionWarning(UserWarning):
    """The spec turned TLS verification off."""


def _where(vc: VCenter) -> str:
    return f"vCenter {vc.host}:{vc.port}"


def ssl_context(vc: VCenter) -> ssl.SSLContext | None:
    """The TLS context the spec asks for; None for plain http (simulators only)."""
    if vc.protocol == "http":
        if vc.allow_plain_http:  # the spec load refuses it otherwise for a non-loopback host
            warnings.warn(
                f"{_where(vc)}: plain http (allow_plain_http: true in the spec): the password"
                " crosses the network in clear",
                InsecureSessionWarning,
                stacklevel=3,
            )
        return None
    tls = vc.tls
    if not tls.verify:
        warnings.warn(
            f"{_where(vc)}: TLS certificate verification is OFF (tls.verify: false in the spec)",
            InsecureSessionWarning,
            stacklevel=3,
        )
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    if tls.ca_file:
        from pathlib import Path

        path = Path(tls.ca_file).expanduser()
        try:
            return ssl.create_default_context(cafile=str(path))
        except (OSError, ssl.SSLError) as exc:
            raise SessionError(f"{_where(vc)}: cannot load tls.ca_file {path}: {exc}") from None
    if tls.thumbprint:
        return pinned_context(vc)
    return ssl.create_default_context()


def pinned_context(vc: VCenter) -> ssl.SSLContext:
    """A context that trusts exactly the certificate whose SHA-256 the spec pins.

    The server's certificate is fetched once without verification and compared
    with tls.thumbprint; on a match it becomes the only trust anchor (partial
    chains allowed, host name not checked: the pin replaces both). Every later
    connection, including pyVmomi's version negotiation, is verified against it,
    so a different certificate is refused there too.
    """
    import hashlib

    probe = ssl.create_default_context()
    probe.check_hostname = False
    probe.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((vc.host, vc.port), timeout=15) as raw,
            probe.wrap_socket(raw, server_hostname=vc.host) as tls_sock,
        ):
            der = tls_sock.getpeercert(binary_form=True)
    except OSError as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise SessionError(f"cannot reach {_where(vc)}: {reason}") from None
    actual = _colons(hashlib.sha256(der).hexdigest())
    if actual != vc.tls.thumbprint:
        raise SessionError(
            f"{_where(vc)}: certificate SHA-256 {_plain(actual)} does not match the pinned"
            f" tls.thumbprint {_plain(vc.tls.thumbprint)}; refusing to connect"
        )
    ctx = ssl.create_default_context(cadata=ssl.DER_cert_to_PEM_cert(der))
    ctx.check_hostname = False
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return ctx


def _thumbprint(vc: VCenter) -> str | None:
    return vc.tls.thumbprint.replace(":", "").lower() if vc.tls.thumbprint else None


def open_session(spec: Spec, *, timeout: float = 30) -> Any:
    """Log in and return a pyVmomi ServiceInstance; the caller must close it (see connect)."""
    from pyVim.connect import SmartConnect
    from pyVmomi import vim
    from pyVmomi.Security import ThumbprintMismatchException

    vc = spec.vcenter
    password = resolve_secret(vc.password_env, vc.password_file, f"{_where(vc)} password")

    def login() -> Any:
        return SmartConnect(
            protocol=vc.protocol,
            host=vc.host,
            port=vc.port,
            user=vc.user,
            pwd=password,
            sslContext=ssl_context(vc),
            thumbprint=_thumbprint(vc) if vc.tls.verify else None,
            httpConnectionTimeout=timeout,
        )

    try:
        # Nobody listening or no answer in time is the address's fault: reported at once.
        si = with_retries(login, final=(ConnectionRefusedError, TimeoutError))
        # A long provision outlives vCenter's session idle timeout: log in again then.
        renewing(si, lambda manager: manager.Login(userName=vc.user, password=password))
        return si
    except vim.fault.InvalidLogin:
        raise SessionError(
            f"{_where(vc)}: login refused for user {vc.user!r}: wrong user name or password"
        ) from None
    except ThumbprintMismatchException as exc:
        raise SessionError(
            f"{_where(vc)}: certificate SHA-256 {_plain(exc.actual)} does not match the"
            f" pinned tls.thumbprint {_plain(vc.tls.thumbprint or '')}; refusing to connect"
        ) from None
    except ssl.SSLCertVerificationError as exc:
        raise SessionError(
            f"{_where(vc)}: TLS certificate does not verify ({exc.verify_message}); set"
            " tls.ca_file or tls.thumbprint in the spec"
        ) from None
    except ssl.SSLError as exc:
        raise SessionError(f"{_where(vc)}: TLS failed: {exc.reason or exc}") from None
    except OSError as exc:  # refused, reset, timed out, name not found
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise SessionError(f"cannot reach {_where(vc)}: {reason}") from None
    except vim.fault.VimFault as exc:
        raise SessionError(f"{_where(vc)}: login failed: {exc.msg}") from None
    except Exception as exc:
        # pyVmomi raises a bare Exception when no supported API version answers (an
        # HTTP 500/503 from a vCenter whose services are down, or another service there).
        if "is not a VIM server" not in str(exc):
            raise
        raise SessionError(
            f"{_where(vc)}: did not answer as a vCenter (its services may be down, or"
            f" {vc.protocol}://{vc.host}:{vc.port} is another service); check host, port and"
            " protocol"
        ) from None


def _plain(fingerprint: str) -> str:
    """A fingerprint as 64 hex digits, no colons: the spec accepts this form too, and a
    terminal renderer cannot mistake `:ab:`-like pieces for emoji codes."""
    return fingerprint.replace(":", "").upper()


def _colons(hexdigest: str) -> str:
    text = hexdigest.upper()
    return ":".join(text[i : i + 2] for i in range(0, len(text), 2))


def close_session(si: Any) -> None:
    """Log out; a session that is already gone is not an error."""
    from pyVim.connect import Disconnect

    with contextlib.suppress(Exception):
        si._stub._rackcert_closed = True  # logged out on purpose: renew no more
        Disconnect(si)


@contextlib.contextmanager
def connect(spec: Spec, *, timeout: float = 30) -> Iterator[Any]:
    """`with connect(spec) as si:` a logged-in ServiceInstance, logged out on exit."""
    si = open_session(spec, timeout=timeout)
    try:
        yield si
    finally:
        close_session(si)
