"""configure's own ansible.cfg (rackcert.configure.runner._ansible_cfg): the settings Ansible
takes from a config file only, given where the operator has no config file of their own.

internal_poll_interval has no environment variable; its default (1 ms) wakes
ansible-playbook a thousand times a second while a node works. The key is checked against
ansible-core's own table of settings, so a rename there fails here, not silently in a run.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest
import yaml

from rackcert.configure import runner


def _ansible_setting(name: str) -> dict:
    import ansible.config  # the package's data only: ansible-core's modules are not loaded

    table = Path(ansible.config.__file__).with_name("base.yml")
    return yaml.safe_load(table.read_text())[name]


def test_without_an_operator_config_the_run_reads_rackcerts(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "_OPERATOR_CFGS", (str(tmp_path / "home" / ".ansible.cfg"),))
    env = runner._ansible_cfg(tmp_path)
    assert env == {"ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg")}
    cfg = configparser.ConfigParser()
    cfg.read(env["ANSIBLE_CONFIG"])
    assert float(cfg["defaults"]["internal_poll_interval"]) == pytest.approx(0.005)
    setting = _ansible_setting("DEFAULT_INTERNAL_POLL_INTERVAL")
    assert {"key": "internal_poll_interval", "section": "defaults"} in setting["ini"]
    assert setting["default"] == 0.001 and not setting.get("env")  # why a file is needed


def test_an_operator_config_stays_in_charge(tmp_path, monkeypatch):
    own = tmp_path / "home" / ".ansible.cfg"
    own.parent.mkdir()
    own.write_text("[defaults]\nforks = 7\n")
    monkeypatch.setattr(runner, "_OPERATOR_CFGS", ("/nonexistent/ansible.cfg", str(own)))
    assert runner._ansible_cfg(tmp_path) == {}
    assert not (tmp_path / "ansible.cfg").exists()
