"""configure's Ansible strategy: Mitogen's linear strategy unless the spec says linear."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pydantic import ValidationError

from rackcert.configure.strategy import MITOGEN, strategy_envvars
from rackcert.core.errors import InputError
from rackcert.core.spec import Guest


def test_the_default_is_mitogen_and_its_plugin_is_where_ansible_is_told_to_look():
    assert Guest().ansible_strategy == MITOGEN
    env = strategy_envvars(MITOGEN)
    assert env["ANSIBLE_STRATEGY"] == "mitogen_linear"
    # Ansible loads a strategy by file name from the directories it is given.
    assert (Path(env["ANSIBLE_STRATEGY_PLUGINS"]) / "mitogen_linear.py").is_file()


def test_linear_is_ansibles_own_with_no_plugin_path():
    assert strategy_envvars("linear") == {"ANSIBLE_STRATEGY": "linear"}


def test_a_strategy_the_spec_does_not_know_is_refused():
    with pytest.raises(ValidationError, match="mitogen_linear"):
        Guest.model_validate({"ansible_strategy": "free"})


def test_mitogen_missing_is_one_line_naming_the_way_out(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ansible_mitogen" else real(name, *a),
    )
    with pytest.raises(InputError, match=r"pip install mitogen.*ansible_strategy: linear"):
        strategy_envvars(MITOGEN)
