"""esxcli over the vSphere API, the way `govc host.esxcli` runs it, for one read: kernel settings.

`esxcli system settings kernel list -o atsSupport` shows a VMkernel boot option's Configured
value (what the next boot uses) and its Runtime value (what the host runs with now, which
changes only at a reboot). vCenter clients reach esxcli through the host's
`RetrieveManagedMethodExecuter()` and the executer's `ExecuteSoap(moid, version, method,
argument)`, whose answer is the command's output as XML. Both methods are internal to the
vSphere API: pyVmomi has no binding for them (govmomi keeps its own in an internal package), so
this module speaks those two SOAP calls itself over the session's own connection (its cookie,
TLS settings and SOAPAction), and answers None whenever the host does not answer esxcli
(no executer, a fault, an unknown command): the caller then keeps what the API alone says.
"""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

KERNEL_MOID = "ha-cli-handler-system-settings-kernel"
KERNEL_LIST = "vim.EsxCLI.system.settings.kernel.list"
VIM = "{urn:vim25}"

_ENVELOPE = (
    '<?xml version="1.0" encoding="UTF-8"?>'
    '<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"'
    ' xmlns:xsd="http://www.w3.org/2001/XMLSchema"'
    ' xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">'
    "<soapenv:Body>{body}</soapenv:Body></soapenv:Envelope>"
)


@dataclass(frozen=True)
class KernelSetting:
    """One row of `esxcli system settings kernel list`."""

    name: str
    configured: str
    runtime: str
    default: str = ""

    @property
    def runtime_on(self) -> bool:
        return self.runtime.strip().upper() in ("TRUE", "1", "YES")


class _NoAnswer(Exception):
    """The host did not answer the esxcli call (fault, HTTP error, unreadable answer)."""


def _post(si: Any, body: str) -> ET.Element:
    """One SOAP call on the session's connection; the element inside <returnval>'s response."""
    stub = si._stub
    headers = {
        "Cookie": stub.cookie,
        "SOAPAction": stub.versionId,
        "Content-Type": "text/xml; charset=UTF-8",
    }
    conn = stub.GetConnection()
    try:
        conn.request("POST", stub.path, _ENVELOPE.format(body=body).encode(), headers)
        resp = conn.getresponse()
        data = resp.read()
    except Exception as exc:
        with contextlib.suppress(Exception):
            conn.close()
        raise _NoAnswer(type(exc).__name__) from None
    stub.ReturnConnection(conn)
    if resp.status != 200:
        raise _NoAnswer(f"HTTP {resp.status}")
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        raise _NoAnswer("unreadable answer") from None
    returnval = root.find(f".//{VIM}returnval")
    if returnval is None:
        raise _NoAnswer("no returnval")
    return returnval


def kernel_settings(si: Any, host_moid: str, option: str) -> list[KernelSetting] | None:
    """`esxcli system settings kernel list -o OPTION` on the host, or None if it does not answer."""
    try:
        executer = _post(
            si,
            '<RetrieveManagedMethodExecuter xmlns="urn:vim25">'
            f'<_this type="HostSystem">{escape(host_moid)}</_this>'
            "</RetrieveManagedMethodExecuter>",
        )
        kind = executer.get("type") or "ReflectManagedMethodExecuter"
        result = _post(
            si,
            '<ExecuteSoap xmlns="urn:vim25">'
            f'<_this type="{escape(kind)}">{escape(executer.text or "")}</_this>'
            f"<moid>{KERNEL_MOID}</moid><version>urn:vim25/7.0.3.0</version>"
            f"<method>{KERNEL_LIST}</method>"
            f"<argument><name>option</name><val>{escape(f'<option>{escape(option)}</option>')}"
            "</val></argument></ExecuteSoap>",
        )
    except _NoAnswer:
        return None
    if result.find(f"{VIM}fault") is not None:
        return None
    response = result.findtext(f"{VIM}response")
    if not response:
        return None
    try:
        output = ET.fromstring(response)
    except ET.ParseError:
        return None
    rows = []
    for obj in output:
        fields = {child.tag.rsplit("}", 1)[-1]: (child.text or "") for child in obj}
        if "Name" in fields:
            rows.append(
                KernelSetting(
                    name=fields["Name"],
                    configured=fields.get("Configured", ""),
                    runtime=fields.get("Runtime", ""),
                    default=fields.get("Default", ""),
                )
            )
    return rows


def kernel_setting(si: Any, host_moid: str, option: str) -> KernelSetting | None:
    """The row of one kernel setting, or None when the host does not answer or has no such row."""
    rows = kernel_settings(si, host_moid, option)
    return next((r for r in rows or [] if r.name == option), None)
