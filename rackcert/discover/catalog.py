"""The discovery catalog: PCI ids -> part models, server models -> NVLink-bridged slots.

Why a catalog: vSphere reports a device's vendor and device id, not its memory or line
rate, and vSphere 7 does not report NVLink bridges at all. Those facts are data about
parts and chassis, so they live in YAML files beside this module (devices.yaml,
servers.yaml) that a site can extend with `--catalog FILE` without touching code.

Example:
    catalog = load_catalog()
    catalog.gpu(0x10DE, 0x20B5).model            # 'NVIDIA A100 PCIe 80GB'
    catalog.server("Dell Inc.", "PowerEdge R750xa").profile_prefix   # 'r750xa'
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from rackcert.core.errors import InputError
from rackcert.core.spec import normalize_pci

CATALOG_DIR = Path(__file__).resolve().parent / "catalog"
_HEX4 = re.compile(r"^[0-9a-f]{4}$")


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _hex_id(value: object) -> str:
    text = str(value).strip().lower().removeprefix("0x")
    if not _HEX4.fullmatch(text):
        raise ValueError(f"want a 4-digit hex PCI id such as 10de, not {value!r}")
    return text


class _Part(_Entry):
    vendor_id: str
    device_id: str
    model: str
    subsystem_id: str | None = None  # the vendor's own board (pci.ids); the lab twin reports it

    @field_validator("vendor_id", "device_id", "subsystem_id", mode="before")
    @classmethod
    def _ids(cls, value: object) -> str | None:
        return None if value is None else _hex_id(value)

    def ids(self) -> tuple[int, int, int]:
        """(vendor, device, subsystem device) as the integers lspci and vSphere carry."""
        return int(self.vendor_id, 16), int(self.device_id, 16), int(self.subsystem_id or "0", 16)


_P = TypeVar("_P", bound=_Part)


class GpuPart(_Part):
    short: str = Field(pattern=r"^[a-z0-9]+$")
    memory_gb: int = Field(gt=0)


class NicPart(_Part):
    speed_gbps: int = Field(gt=0)


class NvlinkBridges(_Entry):
    gpu_models: list[str] = Field(min_length=1)
    pairs: list[tuple[str, str]] = Field(min_length=1)

    @field_validator("pairs")
    @classmethod
    def _normal(cls, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return [(normalize_pci(a), normalize_pci(b)) for a, b in pairs]


class ServerModel(_Entry):
    name: str
    vendor: str
    model: str
    profile_prefix: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    certified_reference: str | None = None
    nvlink_bridges: list[NvlinkBridges] = Field(default_factory=list)

    def matches(self, vendor: str, model: str) -> bool:
        return _norm(vendor) == _norm(self.vendor) and _norm(model) == _norm(self.model)


class Catalog(_Entry):
    gpus: list[GpuPart] = Field(default_factory=list)
    nics: list[NicPart] = Field(default_factory=list)
    servers: list[ServerModel] = Field(default_factory=list)

    def gpu(self, vendor_id: int, device_id: int) -> GpuPart | None:
        key = (f"{vendor_id & 0xFFFF:04x}", f"{device_id & 0xFFFF:04x}")
        return next((g for g in self.gpus if (g.vendor_id, g.device_id) == key), None)

    def nic(self, vendor_id: int, device_id: int) -> NicPart | None:
        key = (f"{vendor_id & 0xFFFF:04x}", f"{device_id & 0xFFFF:04x}")
        return next((n for n in self.nics if (n.vendor_id, n.device_id) == key), None)

    def gpu_named(self, model: str, memory_gb: int | None = None) -> GpuPart | None:
        """The GPU part a spec's model name means (see `named`); memory breaks a tie."""
        found = _named(self.gpus, model)
        same = [g for g in found if g.memory_gb == memory_gb]
        return (same or found or [None])[0]

    def nic_named(self, model: str) -> NicPart | None:
        """The NIC part a spec's model name means (see `named`)."""
        return (_named(self.nics, model) or [None])[0]

    def server(self, vendor: str, model: str) -> ServerModel | None:
        return next((s for s in self.servers if s.matches(vendor, model)), None)

    def merged(self, other: Catalog) -> Catalog:
        """`other`'s entries first, so a site file overrides a shipped row with the same ids."""
        return Catalog(
            gpus=[*other.gpus, *self.gpus],
            nics=[*other.nics, *self.nics],
            servers=[*other.servers, *self.servers],
        )


def _norm(text: str) -> str:
    """Vendor/model strings compare without case, punctuation or repeated spaces."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _named(parts: list[_P], model: str) -> list[_P]:
    """Parts a model name means: the one of that name, else those whose name holds all its
    words ("A100 PCIe 80GB", "ConnectX-6 Dx"), in catalog order."""
    want = _norm(model)
    exact = [p for p in parts if _norm(p.model) == want]
    words = set(want.split())
    return exact or [p for p in parts if words and words <= set(_norm(p.model).split())]


def _read(path: Path) -> dict:
    try:
        data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: no such catalog file") from None
    except (OSError, YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read catalog: {' '.join(str(exc).split())}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: a catalog is a mapping with gpus, nics and/or servers")
    return data


def parse_catalog(path: Path) -> Catalog:
    """One catalog file (any of gpus/nics/servers); errors name the file and the field."""
    try:
        return Catalog.model_validate(_read(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"{path}: {where}: {first['msg']}") from None


@lru_cache(maxsize=1)
def shipped_catalog() -> Catalog:
    """devices.yaml + servers.yaml from this package."""
    parts = [parse_catalog(p) for p in sorted(CATALOG_DIR.glob("*.yaml"))]
    return Catalog(
        gpus=[g for c in parts for g in c.gpus],
        nics=[n for c in parts for n in c.nics],
        servers=[s for c in parts for s in c.servers],
    )


def load_catalog(extra: list[Path] | None = None) -> Catalog:
    """The shipped catalog, with each `extra` file's entries taking precedence."""
    catalog = shipped_catalog()
    for path in extra or []:
        catalog = catalog.merged(parse_catalog(Path(path)))
    return catalog
