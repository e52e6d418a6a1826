"""IB/RoCE candidates of ``ncclcheck tune`` (pure): the HCA sets and GID indexes in question.

* ``NCCL_IB_HCA``: the rules' exact list (ib-hca-select: mixed link layers, front-end NICs and
  slower ports left out) against every active port every node has, as an exact ``=`` list
  (``mlx5_1`` would also match ``mlx5_10`` without it; src/misc/utils.cc ``matchIfList``);
  measured only when they differ.
* ``NCCL_IB_GID_INDEX`` on RoCE: each RoCE v2 IPv4 index (``show_gids``' v2 entry with an IPv4
  address) that every node's ports share, and unset (NCCL >= 2.21 picks that entry itself per
  port, ``ncclIbGetGidIndex`` in src/transport/net_ib.cc).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.common import natural
from ncclcheck.rules.ib_hca_select import wanted_ports
from ncclcheck.rules.ib_roce_gid_index import roce_ports

HCA, GID = "NCCL_IB_HCA", "NCCL_IB_GID_INDEX"


def hca_values(nodes: list[dict[str, Any]], rules_value: str | None) -> list[str]:
    """Exact HCA lists worth measuring: the rules' value and all shared active ports."""
    shared = None
    for node in nodes:
        ports = set(wanted_ports(node)[0])
        shared = ports if shared is None else shared & ports
    values = [rules_value] if rules_value else []
    if shared:
        every = "=" + ",".join(sorted(shared, key=natural))
        if every not in values:
            values.append(every)
    return values if len(values) > 1 else []


def gid_values(nodes: list[dict[str, Any]]) -> list[str | None]:
    """RoCE v2 IPv4 GID indexes every node's ports share, and None (unset), when on RoCE."""
    common: set[int] | None = None
    for node in nodes:
        found = {p["roce_v2_ipv4_gid_index"] for p in roce_ports(node)
                 if isinstance(p.get("roce_v2_ipv4_gid_index"), int)}
        common = found if common is None else common & found
    if not common:
        return []
    return [None] + [str(i) for i in sorted(common)]


def ib_candidates(rec_env: dict[str, str], nodes: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, str], str]]:
    """(id, label, env, source) for each IB alternative over the rules' env."""
    out = []
    for value in hca_values(nodes, rec_env.get(HCA)):
        out.append((f"{HCA}={value}", f"{HCA}={value}", {**rec_env, HCA: value},
                    "IB: the HCA set in question (rules' choice vs every active port)"))
    for value in gid_values(nodes):
        env = {k: v for k, v in rec_env.items() if k != GID}
        if value is not None:
            env[GID] = value
        label = f"{GID}={value}" if value is not None else f"{GID} unset (NCCL >= 2.21 picks)"
        out.append((label, label, env, "RoCE: the GID index in question"))
    return out
