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

Why hand-written SOAP and not the discovery path VMware's esxcli takes (the host's
DynamicTypeManager, its vmodl.reflect type info and the vim.CLIInfo objects): rackcert runs a
few fixed commands whose arguments and columns it knows, so discovery would add two or more
calls per host to learn what this module already states, and its helpers (pyVim's
DynamicTypeManagerHelper, ManagedMethodExecuterHelper) ship only inside the vmware-esxcli
package, with its own bundled pyVmomi that cannot share rackcert's interpreter. The commands'
wire format is checked instead by the tests, where VMware's own esxcli reads the same twin.
`host_facts` reads what operators trust esxcli for: build, VIBs, VAAI status, passthrough.
"""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from rackcert.core.observed import EsxcliDevice, EsxcliHost, EsxcliVib

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


def _executer(si: Any, host_moid: str) -> tuple[str, str]:
    """The host's ReflectManagedMethodExecuter (type, moid); _NoAnswer when it has none."""
    executer = _post(
        si,
        '<RetrieveManagedMethodExecuter xmlns="urn:vim25">'
        f'<_this type="HostSystem">{escape(host_moid)}</_this>'
        "</RetrieveManagedMethodExecuter>",
    )
    if not executer.text:
        raise _NoAnswer("no executer")
    return executer.get("type") or "ReflectManagedMethodExecuter", executer.text


def _run(si: Any, executer: tuple[str, str], command: str, **args: str) -> list[dict[str, str]]:
    """`esxcli <command>` (dotted: system.version.get) through ExecuteSoap; one dict per row.

    A list answer gives its DataObjects; a structure gives one row; a simple value one row
    {"value": ...}. _NoAnswer on a fault or an unreadable answer.
    """
    path, _, method = command.rpartition(".")
    moid = "ha-cli-handler-" + path.replace(".", "-")
    arguments = "".join(
        f"<argument><name>{escape(k)}</name><val>{escape(f'<{k}>{escape(v)}</{k}>')}</val></argument>"
        for k, v in args.items()
    )
    result = _post(
        si,
        '<ExecuteSoap xmlns="urn:vim25">'
        f'<_this type="{escape(executer[0])}">{escape(executer[1])}</_this>'
        f"<moid>{escape(moid)}</moid><version>urn:vim25/5.0</version>"
        f"<method>vim.EsxCLI.{escape(path)}.{escape(method)}</method>{arguments}</ExecuteSoap>",
    )
    fault = result.find(f"{VIM}fault")
    if fault is not None:
        raise _NoAnswer(_fault_text(fault))
    response = result.findtext(f"{VIM}response")
    if response is None:
        raise _NoAnswer("no response")
    try:
        output = ET.fromstring(response)
    except ET.ParseError:
        raise _NoAnswer("unreadable answer") from None
    children = list(output)
    if not children:
        return [{"value": (output.text or "").strip()}]
    if all(c.tag.rsplit("}", 1)[-1] == "DataObject" for c in children):
        return [_fields(c) for c in children]
    return [_fields(output)]


def _fault_text(fault: ET.Element) -> str:
    """What the host said: an esxcli CLIFault's errMsg lines (in faultDetail), else faultMsg.

    esxcli prints a CLIFault as its errMsg lines ("[MaintenanceModeError] ..."); faultMsg is
    only the fault's summary key.
    """
    summary = fault.findtext(f"{VIM}faultMsg") or "fault"
    detail = fault.findtext(f"{VIM}faultDetail") or ""
    try:
        lines = [e.text or "" for e in ET.fromstring(detail).iter() if e.tag.endswith("errMsg")]
    except ET.ParseError:
        lines = []
    return " ".join(" ".join(line.split()) for line in lines if line.strip()) or summary


def _fields(obj: ET.Element) -> dict[str, str]:
    """A structure's fields; an array field (its element repeated) is its values, one a line."""
    out: dict[str, str] = {}
    for child in obj:
        key = child.tag.rsplit("}", 1)[-1]
        out[key] = f"{out[key]}\n{child.text or ''}" if key in out else (child.text or "")
    return out


def host_facts(si: Any, host_moid: str) -> tuple[EsxcliHost, int]:
    """What operators read with esxcli, and the SOAP calls it took.

    `system version get`, `software vib list`, `storage core device vaai status get`,
    `hardware pci pcipassthru list`. Any call the host does not answer leaves the whole
    record unanswered (answered False, error says which): a partial esxcli view is not
    mixed with the API's.
    """
    calls = 0
    try:
        calls += 1
        executer = _executer(si, host_moid)
        calls += 1
        version = _run(si, executer, "system.version.get")[0]
        calls += 1
        vibs = _run(si, executer, "software.vib.list")
        calls += 1
        vaai = _run(si, executer, "storage.core.device.vaai.status.get")
        calls += 1
        passthru = _run(si, executer, "hardware.pci.pcipassthru.list")
    except _NoAnswer as exc:
        return EsxcliHost(answered=False, error=f"no esxcli answer ({exc})"[:200]), calls
    return (
        EsxcliHost(
            answered=True,
            build=version.get("Build", ""),
            version=version.get("Version", ""),
            vibs=[
                EsxcliVib(
                    name=v.get("Name", ""), version=v.get("Version", ""), vendor=v.get("Vendor", "")
                )
                for v in vibs
            ],
            vaai=[
                EsxcliDevice(device=d.get("Device", ""), ats_status=d.get("ATSStatus", ""))
                for d in vaai
            ],
            passthru={
                p.get("DeviceID", ""): p.get("Enabled", "").lower() == "true" for p in passthru
            },
        ),
        calls,
    )


@dataclass(frozen=True)
class VibInstall:
    """What `esxcli software vib install` answered (its InstallationResult)."""

    message: str
    reboot_required: bool
    installed: list[str]
    skipped: list[str]


class EsxcliError(Exception):
    """The host refused an esxcli command; the message is ESXi's own."""


def vib_install(host: Any, depot: str) -> VibInstall:
    """`esxcli software vib install -d DEPOT` on the host (`host`: its pyVmomi object).

    ESXi refuses outside maintenance mode for VIBs that cannot be installed live (NVIDIA's
    manager is one) and when the depot cannot be read; EsxcliError carries its message.
    """
    return _install(host, "software.vib.install", depot=depot)


def vib_update(host: Any, depot: str) -> VibInstall:
    """`esxcli software vib update -d DEPOT`: installed VIBs to the bundle's newer versions."""
    return _install(host, "software.vib.update", depot=depot)


def profile_update(
    host: Any, depot: str, profile: str, *, allow_downgrades: bool = False
) -> VibInstall:
    """`esxcli software profile update -d DEPOT -p PROFILE [--allow-downgrades]`.

    How a host of a cluster managed by baselines takes a new image (base and drivers) from an
    offline bundle: in maintenance mode, then a reboot. Rolling back to an older profile needs
    allow_downgrades (ESXi skips older VIBs without it).
    """
    args = {"depot": depot, "profile": profile}
    if allow_downgrades:
        args["allowdowngrades"] = "true"
    return _install(host, "software.profile.update", **args)


def _install(host: Any, command: str, **args: str) -> VibInstall:
    try:
        executer = _executer(host, host._moId)
        rows = _run(host, executer, command, **args)
    except _NoAnswer as exc:
        raise EsxcliError(str(exc)) from None
    row = rows[0] if rows else {}
    return VibInstall(
        message=row.get("Message", ""),
        reboot_required=row.get("RebootRequired", "").lower() == "true",
        installed=_list(row, "VIBsInstalled"),
        skipped=_list(row, "VIBsSkipped"),
    )


def _list(row: dict[str, str], key: str) -> list[str]:
    return [v for v in row.get(key, "").split("\n") if v]
