"""Inventory from the spec, event reading, and the CLI's one-line input errors (no Ansible run)."""

from __future__ import annotations

from pathlib import Path

import yaml

from rackcert.configure.events import EventCollector, task_message
from rackcert.configure.inventory import build_inventory, write_inventory
from rackcert.core.spec import PackageSource
from rackcert.core.spec_loader import load_spec
from tests.support.configure_inventory import LAB


def test_lab_inventory_hosts_groups_and_role_vars(tmp_path):
    spec = load_spec(LAB).spec
    inv = build_inventory(spec)
    children = inv["all"]["children"]
    nodes = children["rackcert_nodes"]["hosts"]
    assert list(nodes) == ["lab-node1", "lab-node2"]
    n1 = nodes["lab-node1"]
    assert (n1["ansible_host"], n1["ansible_port"], n1["ansible_user"]) == (
        "10.77.0.11",
        22,
        "root",
    )
    assert n1["ansible_ssh_private_key_file"].endswith(".cache/rackcert/lab/id_ed25519")
    assert not n1["ansible_ssh_private_key_file"].startswith("~")
    assert n1["rackcert_gpus_expected"] == 2
    assert list(children["rackcert_head"]["hosts"]) == ["lab-node1"]
    assert list(children["rackcert_workers"]["hosts"]) == ["lab-node2"]
    assert set(children["rackcert_gpu_nodes"]["hosts"]) == {"lab-node1", "lab-node2"}
    assert "template_lab_2gpu" in children
    v = inv["all"]["vars"]
    assert v["nvidia_driver_version"] == "470.82.01"
    assert v["ofed_version"] == "5.4-3.1.0.0"
    assert v["container_toolkit_runtime"] == "none"
    assert v["network_mtu"] == 9000
    assert (v["storage_nfs_fstype"], v["storage_nfs_options"]) == ("none", ["bind"])
    path = write_inventory(inv, tmp_path)
    assert _load_inventory(path) == inv


class _UnsafeCountingLoader(yaml.SafeLoader):
    """Reads Ansible's `!unsafe` scalars as plain strings; fails on any untagged string value."""


def _unsafe_scalar(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> str:
    return loader.construct_scalar(node)


_UnsafeCountingLoader.add_constructor("!unsafe", _unsafe_scalar)


def _load_inventory(path):
    """The written inventory, checking every string value with "{" carries `!unsafe`."""
    node = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    tagged: list[str] = []

    def walk(n, is_key=False):
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                walk(k, True)
                walk(v)
        elif isinstance(n, yaml.SequenceNode):
            for item in n.value:
                walk(item)
        elif n.tag == "tag:yaml.org,2002:str" and not is_key and "{" in n.value:
            raise AssertionError(f"string value {n.value!r} is not !unsafe")
        elif n.tag == "!unsafe":
            tagged.append(n.value)

    walk(node)
    return yaml.load(path.read_text(), Loader=_UnsafeCountingLoader)


def test_sources_become_role_vars():
    spec = load_spec(Path("inventories/r750xa-4node.yaml")).spec
    spec.guest.sources = {
        "ofed": PackageSource(path="/mnt/ofed/DEBS"),
        "dl_runtime": PackageSource(path="/srv/wh"),
    }
    v = build_inventory(spec)["all"]["vars"]
    assert v["ofed_local_path"] == "/mnt/ofed/DEBS"
    assert v["nvidia_driver_local_path"] == ""
    assert v["dl_runtime_wheelhouse"] == "/srv/wh"


def _ev(kind: str, **data):
    return {"event": kind, "event_data": data}


def test_collector_reads_failures_unreachable_and_recap():
    c = EventCollector()
    c.handle(_ev("playbook_on_task_start", task="Set the MTU", role="network"))
    c.handle(
        _ev("runner_on_ok", host="a", task="Set the MTU", role="network", res={"changed": True})
    )
    c.handle(
        _ev(
            "runner_on_failed",
            host="b",
            task="Install",
            role="vendor_package",
            res={"msg": "non-zero return code", "stderr": "x\nE: Unable to locate package foo"},
        )
    )
    c.handle(
        _ev("runner_on_unreachable", host="c", task="Gather", res={"msg": "Connection refused"})
    )
    c.handle(
        _ev(
            "playbook_on_stats",
            ok={"a": 5, "b": 2},
            changed={"a": 1},
            failures={"b": 1},
            dark={"c": 1},
        )
    )
    assert c.hosts["a"].status == "changed" and c.hosts["a"].changed_tasks == [
        "network : Set the MTU"
    ]
    assert c.hosts["b"].status == "failed"
    assert c.hosts["b"].failures[0].message == (
        "non-zero return code | E: Unable to locate package foo"
    )
    assert c.hosts["c"].status == "unreachable"
    assert c.totals() == {"hosts": 3, "ok": 1, "changed": 1, "failed": 1, "unreachable": 1}


def test_task_message_names_failed_loop_items_and_keeps_censorship():
    res = {
        "msg": "One or more items failed",
        "results": [
            {"item": "node1", "failed": False},
            {"item": "node2", "failed": True, "msg": "rc 255", "stderr": "Connection timed out"},
        ],
    }
    assert task_message(res) == "node2: rc 255 | Connection timed out"
    assert "no_log" in task_message({"censored": "hidden: no_log: true was specified"})


def test_live_board_and_summary_render_hosts_tasks_and_failures():
    from rich.console import Console

    from rackcert.configure.progress import board, summary_table

    c = EventCollector()
    c.handle(_ev("playbook_on_task_start", task="Set the MTU", role="network"))
    c.handle(_ev("runner_on_start", host="a", task="Set the MTU", role="network"))
    c.handle(
        _ev("runner_on_ok", host="a", task="Set the MTU", role="network", res={"changed": True})
    )
    c.handle(_ev("runner_on_unreachable", host="b", task="Set the MTU", role="network", res={}))
    console = Console(record=True, width=160)
    console.print(board(c, ["a", "b", "c"]))
    live = console.export_text()
    assert "task 1" in live and "network : Set the MTU" in live
    assert [
        ln.split()[1] for ln in live.splitlines() if ln.split()[:1] in (["a"], ["b"], ["c"])
    ] == [
        "changed",
        "unreachable",
        "waiting",
    ]
    console.print(summary_table(list(c.hosts.values()), check=True))
    text = console.export_text()
    assert "would change: network : Set the MTU" in text
    assert "unreachable:" in text


def test_a_hosts_long_failure_is_cut_in_configure_json_and_points_to_the_events(tmp_path):
    from rackcert.configure.runner import _write_record
    from rackcert.core.runs import RunDir

    loaded = load_spec(LAB)
    run = RunDir.create(tmp_path / "runs", "lab", loaded.sha256, loaded.text)
    artifacts = run.artifacts("configure")
    c = EventCollector()
    c.handle(
        _ev(
            "runner_on_failed",
            host="a",
            task="Install",
            role="vendor_package",
            res={"msg": "failed", "stderr": "E" * 20_000},
        )
    )
    record = _write_record(
        run, c, "2026-12-03T00:00:00Z", False, (), (), None, artifacts / "site.yml", 2,
        artifacts, artifacts / "inventory.yml", "ident", "failed", {"known_hosts": "kh"},
    )  # fmt: skip
    message = record.data.hosts["a"].failures[0].message
    assert len(message) < 1_000 and "more characters in artifacts/configure" in message
    assert "E" * 20_000 not in (run.path / "configure.json").read_text()
