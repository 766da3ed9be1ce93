"""The nccl_tests role for real on two SSH test hosts (CPU only, no GPU driver).

One test, three configure runs (tag nccl_tests only, ~10 s each): the pinned tarball's
sha256 is refused when it differs (before anything reaches a node), a node without CUDA's
compiler is skipped with the reason in configure.json, a node whose PATH already has
all_reduce_perf is left alone, and a second run says the same. The build itself needs
nccl-tests' source, which the tests cannot fetch: docs/evidence/h200-nccl-tests-role.sh
runs it on a GPU machine.
"""

from __future__ import annotations

import pytest

from rackcert.configure.inventory import build_inventory
from rackcert.core.errors import SpecError
from rackcert.core.spec_loader import load_spec
from tests.support.spec_helpers import example_data, write_spec

SHA = "ab" * 32


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ({"path": "/src/nccl-tests.tar.gz", "version": "2.19.6"}, "sha256 is missing"),
        ({"path": "/src/nccl-tests.tar.gz", "sha256": SHA}, "version is missing"),
        ({"path": "/src/nccl-tests.tar.gz", "sha256": "abc", "version": "2"}, "sha256"),
        ({"path": "/src/nccl-tests/", "sha256": SHA, "version": "2"}, "the .tar.gz source"),
        ({"path": "/s.tar.gz", "sha256": SHA, "version": "2", "repo_url": "https://x"},
         "path, sha256 and version only"),
        ({"path": "/s.tar.gz", "sha256": SHA, "version": "../x"}, "version"),
    ],
)  # fmt: skip
def test_a_nccl_tests_source_is_a_pinned_tarball(tmp_path, source, expected) -> None:
    data = example_data()
    data["guest"]["sources"] = {"nccl_tests": source}
    with pytest.raises(SpecError) as info:
        load_spec(write_spec(tmp_path, data))
    assert "guest.sources" in str(info.value) and expected in str(info.value)
    assert "\n" not in str(info.value)


def test_sha256_and_version_belong_to_nccl_tests_and_reach_its_role(tmp_path) -> None:
    data = example_data()
    data["guest"]["sources"] = {"ofed": {"path": "/mnt/ofed", "sha256": SHA}}
    with pytest.raises(SpecError, match="sha256 is for nccl_tests only"):
        load_spec(write_spec(tmp_path, data))
    source = {"path": "/src/nccl-tests-2.19.6.tar.gz", "sha256": SHA.upper(), "version": "2.19.6"}
    data["guest"]["sources"] = {"nccl_tests": source}
    inv = build_inventory(load_spec(write_spec(tmp_path, data)).spec)["all"]["vars"]
    assert (inv["nccl_tests_tarball"], inv["nccl_tests_sha256"], inv["nccl_tests_version"]) == (
        "/src/nccl-tests-2.19.6.tar.gz", SHA, "2.19.6")  # fmt: skip
