"""What more than one test module needs from the old test_bench_transport.py:
tests/integration/test_bench_transport.py, tests/unit/test_bench_transport.py.
"""

from __future__ import annotations

from rackcert.core.ssh_target import SshTarget
from validation.bench.transport import (
    Node,
)

A, B = Node("a", SshTarget(host="10.0.0.1")), Node("b", SshTarget(host="10.0.0.2"))
