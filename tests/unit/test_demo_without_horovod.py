"""The demo need not wait for Horovod: what the lab nodes' image holds (rackcert.lab.dlstack),
and the spec the demo certifies while Horovod is not in it yet."""

from __future__ import annotations

from pathlib import Path

from rackcert.core.paths import inventories_dir
from rackcert.core.spec_loader import load_spec
from rackcert.lab import dlstack

STAMP = """\
4a39a522f831804f
script 985c610c3ce7eb32
numpy==2.3.5 0123456789abcdef
torch==2.14.1 fedcba9876543210
torchvision==0.29.1 0011223344556677
"""


def test_no_stack_lacks_nothing(tmp_path):
    assert dlstack.distributions(tmp_path) is None
    # No stack at all: the nodes' framework comes from elsewhere, the spec's answer stands.
    assert not dlstack.lacks("horovod", tmp_path)


def test_a_stack_laid_before_horovod_lacks_it_until_its_line_is_there(tmp_path):
    (tmp_path / dlstack.STAMP).write_text(STAMP)
    assert dlstack.distributions(tmp_path) == {
        "numpy": "2.3.5",
        "torch": "2.14.1",
        "torchvision": "0.29.1",
    }
    assert dlstack.lacks("horovod", tmp_path)
    # Its files half laid (the dist-info comes last, the stamp after it): still lacking.
    (tmp_path / "horovod").mkdir()
    assert dlstack.lacks("horovod", tmp_path)
    (tmp_path / dlstack.STAMP).write_text(STAMP + "horovod==0.28.1 1234567890abcdef\n")
    assert not dlstack.lacks("horovod", tmp_path)
    assert not dlstack.lacks("Horovod", tmp_path)


def test_an_older_stamp_is_answered_by_the_dist_info_folders(tmp_path):
    (tmp_path / dlstack.STAMP).write_text("4a39a522f831804f\n")
    (tmp_path / "torch-2.14.1.dist-info").mkdir()
    assert dlstack.lacks("horovod", tmp_path)
    (tmp_path / "horovod-0.28.1.dist-info").mkdir()
    assert dlstack.distributions(tmp_path) == {"torch": "2.14.1", "horovod": "0.28.1"}
    assert not dlstack.lacks("horovod", tmp_path)


def test_the_spec_without_horovod_differs_from_the_lab_spec_in_that_alone(tmp_path):
    lab = inventories_dir() / "lab.yaml"
    out = dlstack.spec_without_horovod(lab, tmp_path / "state")
    assert out.parent == tmp_path / "state"
    original, derived = load_spec(lab).spec, load_spec(out).spec
    assert original.guest.horovod is True
    assert derived.guest.horovod is False
    assert "Horovod left out" in (derived.metadata.description or "")
    # Everything else is the lab's: the same rack, VMs and thresholds are certified.
    strip = {"guest": {"horovod"}, "metadata": {"description"}}
    assert derived.model_dump(exclude=strip) == original.model_dump(exclude=strip)
    assert Path(out).read_text().startswith("# Written by `rackcert demo`")
