"""A vAPI JSON-RPC session with vCenter's Automation API (`/api`), where vLCM lives.

The protocol is the one Broadcom's vSphere Automation SDK for Python speaks (its runtime's
`vmware/vapi/data/serializers/jsonrpc.py`): a JSON-RPC 2.0 `invoke` naming the service and
operation, the input as a structure, and a security context (user and password for
`com.vmware.cis.session` create, the session id after). Values travel wrapped by kind:
`{"STRUCTURE": {type: {fields}}}`, `{"OPTIONAL": v}`, `{"SECRET": s}`, errors as
`{"ERROR": {type: {messages, ...}}}`, maps as lists of `map-entry` structures. `plain()` turns an
answer into Python values; `st()`, `opt()` and `vmap()` build inputs.

TLS is the pyVmomi session's (provision.session.ssl_context): the spec's CA file, its pinned
SHA-256 thumbprint, or (only where the spec says so) none. The transport is the standard
library's http.client with that context, so nothing in the environment (REQUESTS_CA_BUNDLE,
CURL_CA_BUNDLE, SSL_CERT_FILE) can widen or replace what the spec trusts. The password is sent
once, in the session create; it is never logged nor part of an error.
"""

from __future__ import annotations

import http.client
import itertools
import json
import logging
import ssl
from typing import Any

from provision.session import SessionError, ssl_context
from rackcert.core.errors import RackcertError
from rackcert.core.secrets import resolve_secret
from rackcert.core.spec import Spec

log = logging.getLogger(__name__)


class VapiError(RackcertError):
    """vCenter answered an Automation API call with an error (its type and message)."""

    exit_code = 1

    def __init__(self, where: str, kind: str, text: str) -> None:
        super().__init__(f"{where}: {kind}: {text}" if text else f"{where}: {kind}")
        self.kind = kind
        self.text = text


def st(name: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A structure value of the named vAPI type."""
    return {"STRUCTURE": {name: fields}}


def opt(value: Any = None) -> dict[str, Any]:
    """An optional value; None is unset."""
    return {"OPTIONAL": value}


def vmap(items: dict[str, Any]) -> list[Any]:
    """A map value: map-entry structures, in key order."""
    return [st("map-entry", {"key": k, "value": items[k]}) for k in sorted(items)]


def plain(value: Any) -> Any:
    """An answer as Python values: structures as dicts, optionals unwrapped, maps as dicts."""
    if isinstance(value, dict) and len(value) == 1:
        ((kind, inner),) = value.items()
        if kind in ("STRUCTURE", "ERROR") and isinstance(inner, dict) and len(inner) == 1:
            ((_name, fields),) = inner.items()
            return {k: plain(v) for k, v in (fields or {}).items()}
        if kind in ("OPTIONAL", "SECRET"):
            return plain(inner)
    if isinstance(value, list):
        entries = [plain(v) for v in value]
        if value and all(_is_entry(v) for v in value):
            return {e["key"]: e["value"] for e in entries}
        return entries
    return value


def _is_entry(value: Any) -> bool:
    return isinstance(value, dict) and "map-entry" in (value.get("STRUCTURE") or {})


def _error(value: Any) -> tuple[str, str]:
    """An ERROR value's short type (not_found) and its first message."""
    inner = value.get("ERROR", {}) if isinstance(value, dict) else {}
    for name, fields in inner.items():
        messages = plain((fields or {}).get("messages", [])) or []
        text = messages[0].get("default_message", "") if messages else ""
        return name.rsplit(".", 1)[-1], text
    return "error", str(value)[:200]


class VapiSession:
    """A logged-in Automation API session; `with VapiSession(spec) as api: api.invoke(...)`."""

    def __init__(self, spec: Spec, *, timeout: float = 30) -> None:
        vc = spec.vcenter
        self.where = f"vCenter {vc.host}:{vc.port}"
        self._vc = vc
        self._timeout = timeout
        self._context: ssl.SSLContext | None = ssl_context(vc)
        self._conn: http.client.HTTPConnection | None = None
        self._ids = itertools.count()
        self._session: str | None = None

    def __enter__(self) -> VapiSession:
        password = resolve_secret(
            self._vc.password_env, self._vc.password_file, f"{self.where} password"
        )
        security = {
            "schemeId": "com.vmware.vapi.std.security.user_pass",
            "userName": self._vc.user,
            "password": password,
        }
        try:
            answer = self._call("com.vmware.cis.session", "create", {}, security)
        except VapiError as exc:
            self._drop()
            if exc.kind == "unauthenticated":
                raise SessionError(
                    f"{self.where}: login refused for user {self._vc.user!r}: wrong user name or"
                    " password"
                ) from None
            raise
        self._session = str(plain(answer))
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._session:
                self.invoke("com.vmware.cis.session", "delete", {})
        except (RackcertError, OSError):
            pass  # a session already gone is not an error
        finally:
            self._session = None
            if self._conn is not None:
                self._conn.close()

    def invoke(self, service: str, operation: str, fields: dict[str, Any]) -> Any:
        """Call an operation with the session; its answer as Python values (plain)."""
        security = {
            "schemeId": "com.vmware.vapi.std.security.session_id",
            "sessionId": self._session,
        }
        return plain(self._call(service, operation, fields, security))

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            vc = self._vc
            if self._context is None:  # protocol: http (a simulator on loopback only)
                self._conn = http.client.HTTPConnection(vc.host, vc.port, timeout=self._timeout)
            else:
                self._conn = http.client.HTTPSConnection(
                    vc.host, vc.port, timeout=self._timeout, context=self._context
                )
        return self._conn

    def _call(
        self, service: str, operation: str, fields: dict[str, Any], security: dict[str, Any]
    ) -> Any:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "invoke",
                "id": str(next(self._ids)),
                "params": {
                    "serviceId": service,
                    "operationId": operation,
                    "input": st("operation-input", fields),
                    "ctx": {"appCtx": {}, "securityCtx": security},
                },
            }
        )
        log.debug("vapi %s %s", service, operation)  # never the body: it may hold the password
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        try:
            conn = self._connection()
            try:
                conn.request("POST", "/api", body=body, headers=headers)
                response = conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn.close()  # a kept-alive connection the server closed: once more, afresh
                conn.request("POST", "/api", body=body, headers=headers)
                response = conn.getresponse()
            raw = response.read()
        except ssl.SSLCertVerificationError as exc:
            self._drop()
            raise SessionError(
                f"{self.where}: TLS certificate does not verify ({exc.verify_message}); set"
                " tls.ca_file or tls.thumbprint in the spec"
            ) from None
        except ssl.SSLError as exc:
            self._drop()
            raise SessionError(f"{self.where}: TLS failed: {exc.reason or exc}") from None
        except OSError as exc:
            self._drop()
            reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise SessionError(f"cannot reach {self.where}: {reason}") from None
        if response.status != 200:
            raise VapiError(f"{self.where} /api", f"HTTP {response.status}", response.reason)
        try:
            answer = json.loads(raw)
        except ValueError:
            raise VapiError(f"{self.where} /api", "unreadable answer", "") from None
        if "error" in answer:  # a JSON-RPC level error (the request itself)
            err = answer["error"] or {}
            raise VapiError(
                f"{self.where} {service}.{operation}", "json-rpc", str(err.get("message"))
            )
        result = answer.get("result") or {}
        if "error" in result:
            kind, text = _error(result["error"])
            raise VapiError(f"{self.where} {service}.{operation}", kind, text)
        return result.get("output")

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
