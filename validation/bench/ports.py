"""The ports the bench's launchers use between nodes, from the spec's network.firewall.

The roles open `launcher_port_range` in the nodes' firewalld zone (dl_runtime); the bench
keeps its launchers inside it:
- the rendezvous (torchrun's c10d store, MASTER_PORT for torch under mpirun and srun) on the
  range's first port, unless `--rdzv-port` names another;
- Open MPI's TCP BTL on the rest, through the MCA parameters btl_tcp_port_min_v4 and
  btl_tcp_port_range_v4 (Open MPI FAQ, "TCP": which ports the TCP BTL binds;
  `ompi_info --param btl tcp --level 9` lists both), given to every rank as OMPI_MCA_*
  variables, which Open MPI reads in each process.
NCCL and Gloo take ports the kernel chooses (NCCL's environment variables and Gloo's TCP
transport name no port range), which a port rule cannot follow: their traffic needs the
data interface in a zone that accepts it (network.firewall.firewalld.interfaces).
"""

from __future__ import annotations

from rackcert.core.spec import Spec


def port_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def rendezvous_port(spec: Spec, asked: int | None) -> int:
    """`--rdzv-port` when given, else the first port of the launchers' range."""
    if asked is not None:
        return asked
    return port_range(spec.network.firewall.launcher_port_range)[0]


def mpi_port_env(spec: Spec) -> dict[str, str]:
    """OMPI_MCA_btl_tcp_port_min_v4/range_v4 for the range past the rendezvous port;
    none for a range of one port (Open MPI keeps its defaults)."""
    low, high = port_range(spec.network.firewall.launcher_port_range)
    if high == low:
        return {}
    return {
        "OMPI_MCA_btl_tcp_port_min_v4": str(low + 1),
        "OMPI_MCA_btl_tcp_port_range_v4": str(high - low),
    }
