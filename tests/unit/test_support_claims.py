"""What rackcert says it supports is one statement: role metadata, site.yml, docs/configure.md."""

from __future__ import annotations

from pathlib import Path

import yaml

from rackcert.core.paths import REPO_ROOT, playbooks_dir

CODENAMES = {"focal": "20.04", "jammy": "22.04", "noble": "24.04", "bookworm": "12"}
EL = ("RedHat", "Rocky", "AlmaLinux")


def _site_supported() -> dict[str, list[str]]:
    site = yaml.safe_load((playbooks_dir() / "site.yml").read_text())
    (task,) = [t for t in site[0]["pre_tasks"] if "rackcert_supported" in t.get("vars", {})]
    return task["vars"]["rackcert_supported"]


def _meta_platforms(role: Path) -> dict[str, list[str]]:
    meta = yaml.safe_load((role / "meta/main.yml").read_text())
    return {p["name"]: [str(v) for v in p["versions"]] for p in meta["galaxy_info"]["platforms"]}


def test_every_role_claims_what_site_yml_lets_through():
    site = _site_supported()
    as_meta = {
        "Ubuntu": sorted(c for c, v in CODENAMES.items() if v in site["Ubuntu"]),
        "Debian": sorted(c for c, v in CODENAMES.items() if v in site["Debian"]),
        "EL": sorted(site["RedHat"]),
    }
    assert all(site[name] == site["RedHat"] for name in EL)
    for role in sorted((playbooks_dir() / "roles").iterdir()):
        platforms = {k: sorted(v) for k, v in _meta_platforms(role).items()}
        assert platforms == as_meta, role.name


def test_configure_doc_separates_tested_from_untested_platforms():
    doc = (REPO_ROOT / "docs" / "configure.md").read_text()
    section = doc.split("## Supported platforms", 1)[1].split("\n## ", 1)[0]
    tested, untested = section.split("Has variables, untested here", 1)
    assert "Debian 12" in tested
    # Ubuntu 22.04/24.04 and RHEL 9 run on stand-ins (tests/integration/test_families_driver.py),
    # said to be stand-ins; Ubuntu 20.04 and RHEL 8 run nowhere.
    for name in ("Ubuntu 22.04", "Ubuntu 24.04", "RHEL 9"):
        assert f"{name} stand-in" in tested and name not in untested, name
    for name in ("Ubuntu 20.04", "RHEL 8"):
        assert name in untested and name not in tested, name
    assert "python3.11" in untested  # EL 8's platform Python cannot run ansible-core 2.17+
