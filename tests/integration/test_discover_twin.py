"""`rackcert spec discover` against the vcsim twin: spec -> twin -> discover -> same hardware.

Each test builds a twin from a spec (rackcert.lab.twin), runs the real command line
against it over TLS (verified against the twin's certificate) and compares the draft
with the spec the twin was built from.
"""

from __future__ import annotations

import pytest
import yaml

from rackcert.core.spec_loader import load_spec, parse_spec
from rackcert.discover.hardware_drift import hardware_drift
from tests.support.discover_helpers import (
    LAB,
    R750,
    edited,
    rack_data,
    rackcert,
    running_twin,
    spec_of,
    twin_args,
)
from tests.support.discover_twin import USER


def discover(started, files, *extra: str):
    return rackcert("spec", "discover", *twin_args(started, files, USER), *extra)


@pytest.mark.parametrize("hosts", [1, 4, 16])
def test_round_trip_reproduces_the_hardware(tmp_path, hosts):
    original = spec_of(rack_data(hosts))
    out = tmp_path / "new-rack.yaml"
    with running_twin(original, tmp_path / "twin") as (started, files):
        proc = discover(started, files, "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        first = out.read_bytes()
        again = discover(started, files, "-o", str(tmp_path / "again.yaml"), "--name", "new-rack")
        assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.yaml").read_bytes() == first  # stable: byte-identical
    if hosts == 4:  # the command a user runs; the other sizes check through the loader
        check = rackcert("spec", "check", str(out))
        assert check.returncode == 0, check.stderr
    found = parse_spec(out.read_text(), str(out)).spec
    assert hardware_drift(original, found) == []
    assert [p.model_dump() for p in found.hardware_profiles] == [
        p.model_dump() for p in original.hardware_profiles
    ]
    assert [h.model_dump() for h in found.hosts] == [h.model_dump() for h in original.hosts]
    assert len(found.vms) == 2 * hosts  # one VM per NVLink pair
    assert f"wrote {out}: {hosts} hosts" in " ".join(proc.stderr.split())


def test_lab_twin_discovers_the_labs_hardware(tmp_path):
    """The `rackcert lab up` rack: --from takes the endpoint and name from lab.yaml."""
    lab = load_spec(LAB).spec
    out = tmp_path / "lab-now.yaml"
    with running_twin(lab, tmp_path / "twin") as (started, files):
        proc = rackcert(
            "spec",
            "discover",
            "--from",
            str(LAB),
            *twin_args(started, files, lab.vcenter.user),
            "-o",
            str(out),
            "--diff",
            str(LAB),
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no drift" in proc.stdout
    found = load_spec(out).spec
    assert found.metadata.name == "lab"
    assert [h.name for h in found.hosts] == ["lab-esx01", "lab-esx02"]
    assert hardware_drift(lab, found) == []


def test_one_gpu_removed_shows_in_diff_with_exit_1(tmp_path):
    in_use = rack_data(4)

    def pull_gpu(d):
        profile = {**d["hardware_profiles"][0], "name": "one-short"}
        profile["gpus"] = [dict(g) for g in profile["gpus"] if g["pci"] != "0000:ca:00.0"]
        profile["gpus"][2].pop("nvlink_peer")
        d["hardware_profiles"].append(profile)
        d["hosts"][2]["profile"] = "one-short"

    spec_path = tmp_path / "in-use.yaml"
    spec_path.write_text(yaml.safe_dump(in_use, sort_keys=False))
    draft_path = tmp_path / "draft.yaml"
    with running_twin(spec_of(edited(in_use, pull_gpu)), tmp_path / "twin") as (started, files):
        proc = discover(started, files, "--diff", str(spec_path), "-o", str(draft_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())
    assert "error: drift: 2 difference(s) in hardware" in " ".join(proc.stderr.split())
    assert "esx03: GPU removed: 0000:ca:00.0 NVIDIA A100 PCIe 80GB" in out
    assert "esx03: GPU changed: 0000:b1:00.0: nvlink_peer 0000:ca:00.0 -> None" in out
    assert "esx01" not in out and "esx04" not in out
    # --diff with -o still writes the draft, which has the short host as its own profile.
    draft = parse_spec(draft_path.read_text(), "draft").spec
    assert len(draft.hardware_profiles) == 2
    assert [len(p.gpus) for p in draft.hardware_profiles] == [4, 3]
    assert [h.profile for h in draft.hosts][2] == draft.hardware_profiles[1].name


def test_wrong_password_is_one_line_exit_2_and_writes_nothing(tmp_path):
    out = tmp_path / "draft.yaml"
    with running_twin(spec_of(rack_data(1)), tmp_path / "twin") as (started, files):
        bad = tmp_path / "bad.password"
        bad.write_text("not-the-password\n")
        args = twin_args(started, files, USER)
        args[args.index("--password-file") + 1] = str(bad)
        proc = rackcert("spec", "discover", *args, "-o", str(out))
    assert proc.returncode == 2
    assert "login refused" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "not-the-password" not in proc.stderr + proc.stdout
    assert not out.exists()


def test_unverified_certificate_is_refused(tmp_path):
    with running_twin(spec_of(rack_data(1)), tmp_path / "twin") as (started, files):
        args = twin_args(started, files, USER)
        ca = args.index("--ca-file")
        del args[ca : ca + 2]
        proc = rackcert("spec", "discover", *args)
    assert proc.returncode == 2
    assert "does not verify" in proc.stderr and "Traceback" not in proc.stderr


def test_unreachable_vcenter_and_missing_options_are_clear_errors(tmp_path, capsys, monkeypatch):
    """In-process (rackcert.cli.main), to keep the suite fast: same code path, one line each."""
    from rackcert.cli import main

    def run(*args: str) -> tuple[int, str]:
        code = main(["spec", "discover", *args])
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        return code, " ".join(err.split())

    args = ("--vcenter", "127.0.0.1", "--port", "9", "--user", "u")
    monkeypatch.setenv("RACKCERT_VCENTER_PASSWORD", "pw-for-test")
    assert run(*args) == (2, "error: cannot reach vCenter 127.0.0.1:9: Connection refused")
    code, err = run(*args, "--password-env", "RACKCERT_TEST_UNSET_VAR")
    assert code == 2 and "RACKCERT_TEST_UNSET_VAR is not set" in err
    code, err = run()
    assert code == 2 and "--vcenter HOST" in err
    code, err = run("--vcenter", "x", "--diff", str(tmp_path / "nope.yaml"))
    assert code == 2 and "no such spec file" in err
    code, err = run("--vcenter", "x", "--inventory", str(tmp_path / "nope.json"))
    assert code == 2 and "cannot read the inventory" in err
    code, err = run("--vcenter", "x", "--port", "70000", "--inventory", str(tmp_path))
    assert code == 2 and "vCenter options: port" in err
    spec = tmp_path / "in-use.yaml"
    spec.write_text(R750.read_text())
    code, err = run("--from", str(spec), "-o", str(spec))
    assert code == 2 and "would overwrite" in err
    assert spec.read_text() == R750.read_text()


def test_from_spec_with_a_pinned_thumbprint(rack_twin, tmp_path, capsys):
    """--from alone reaches vCenter (the shared twin fixture's spec) and keeps the pin."""
    from rackcert.cli import main

    lab = rack_twin(tls="thumbprint")
    out = tmp_path / "pinned.yaml"
    code = main(
        ["spec", "discover", "--from", str(lab.spec_path), "-o", str(out), "--diff", str(R750)]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "no drift" in captured.out
    found = load_spec(out).spec
    assert found.vcenter.tls.thumbprint == lab.spec.vcenter.tls.thumbprint
    assert found.vcenter.password_file == lab.spec.vcenter.password_file
    assert found.metadata.name == "r750xa-4node"
