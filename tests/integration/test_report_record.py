"""run.json: assembled from stage files, schema-checked, verdict combined from recorded verdicts."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.support.plugins.report import TABLE2
from tests.support.report_record import SCHEMA


def test_run_json_validates_against_published_schema(built_pair):
    _root, run_a, _run_b = built_pair
    doc = json.loads((run_a.path / "run.json").read_text())
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)
    assert doc["schema"] == "rackcert/run" and doc["version"] == 1
    broken = dict(doc, verdict={"verdict": "MAYBE", "reasons": []})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_full_run_record_has_every_part(built_pair):
    _root, run_a, _ = built_pair
    doc = json.loads((run_a.path / "run.json").read_text())
    assert doc["verdict"]["verdict"] == "PASS"
    assert doc["missing_stages"] == []
    assert doc["run"]["rack"] == "r750xa-4node" and doc["run"]["spec_intact"] is True
    hosts = {h["name"]: h for h in doc["hardware"]["hosts"]}
    assert sorted(hosts) == ["esx01", "esx02", "esx03", "esx04"]
    assert len(hosts["esx01"]["gpus"]) == 4 and hosts["esx01"]["gpus"][0]["passthru_active"]
    assert hosts["esx01"]["nics"][0]["model"] == "MT2892 Family [ConnectX-6 Dx]"
    assert doc["software"]["mn-node2"]["nvidia_driver"] == "470.82.01"
    assert doc["software"]["mn-node2"]["ofed"] == "5.4-3.1.0.0"  # from the check, not the package
    assert doc["software"]["mn-node2"]["os"] == "Ubuntu 20.04"
    assert doc["settings"]["mn-node1"]["pciPassthru.64bitMMIOSizeGB"] == "256"
    assert doc["settings"]["esx01"]["ats_enabled"] == "true"
    assert doc["check_counts"]["total"] == 50 and doc["check_counts"]["skipped"] == 1
    figures = {p["nodes"]: p["images_per_sec"] for p in doc["bench"]["resnet50"]["points"]}
    assert figures == {n: round(v, 2) for n, v in TABLE2.items()}
    assert [r["nodes"] for r in doc["bench"]["reference_resnet50"]] == [1, 2, 4]
    assert len(doc["bench"]["allreduce"]["points"]) == 28
    assert doc["configure"][0]["ok"] == 42


def test_cli_import_stays_light():
    import subprocess
    import sys

    code = (
        "import sys, rackcert.cli, rackcert.cli.report_cmds;"
        "heavy = [m for m in ('matplotlib', 'weasyprint', 'selenium')"
        " if m in sys.modules];"
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
