"""ib-timeout-retry: ``NCCL_IB_TIMEOUT`` and ``NCCL_IB_RETRY_CNT`` by NCCL version and cluster size.

The verbs ACK timeout is 4.096 us x 2^NCCL_IB_TIMEOUT, tried NCCL_IB_RETRY_CNT times before the
QP fails with ``IBV_WC_RETRY_EXC_ERR`` (status 12). NCCL's default was 14 (~67 ms) before 2.14,
18 (~1.1 s) in 2.14-2.22 and is 20 (~4.3 s, ~30 s with 7 retries) since 2.23; the retry count
is 7, its maximum. Here:

* IB or RoCE carries the traffic (every node can use it, see net-transport);
* the target is 20 (today's default), 22 (~17 s per try, what OCI sets on large RoCE fabrics)
  from :data:`LARGE_CLUSTER_NODES` nodes on (ncclcheck's threshold: NCCL's docs say to raise it
  on "very large networks" without a number), because congestion pauses grow with the fabric;
* the variable is set when some node's effective value (the one configured in its environment
  or NCCL config files, else its NCCL's default; the oldest NCCL counts) is below the target;
  a higher value already configured somewhere becomes the target, never lowered;
* ``NCCL_IB_RETRY_CNT`` is set back to 7 when the environment lowers it.
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, hostname
from ncclcheck.rules.cluster_nccl_version_mismatch import oldest, versions
from ncclcheck.rules.common import configured
from ncclcheck.rules.net_transport import ib_ready, net_plugin

#: From this many nodes on the target is :data:`LARGE_TIMEOUT`. NCCL's docs only say "very large
#: networks"; 128 nodes (1,024 GPUs on 8-GPU nodes) is ncclcheck's own threshold.
LARGE_CLUSTER_NODES = 128
DEFAULT_TIMEOUT = 20  #: NCCL's default since 2.23
LARGE_TIMEOUT = 22    #: what OCI's per-shape table sets on its large RoCE fabrics
RETRY_MAX = 7


def default_timeout(version: tuple[int, ...]) -> int:
    """NCCL's built-in NCCL_IB_TIMEOUT for a version.

    >>> default_timeout((2, 12, 12)), default_timeout((2, 18, 3)), default_timeout((2, 23, 4))
    (14, 18, 20)
    """
    if version < (2, 14):
        return 14
    return 18 if version < (2, 23) else 20


def seconds(timeout: int, retries: int = RETRY_MAX) -> float:
    """Total time before a QP gives up: 4.096 us x 2^timeout x retries.

    >>> round(seconds(20), 1), round(seconds(22), 1)
    (30.1, 120.3)
    """
    return 4.096e-6 * (2 ** timeout) * retries


def _timeout_set(facts: dict[str, Any]) -> int | None:
    """A finite NCCL_IB_TIMEOUT configured on the node (1-31), else None (0 and >= 32 mean
    'wait forever' in verbs and are left alone)."""
    value = (configured(facts, "NCCL_IB_TIMEOUT") or "").strip()
    return int(value) if value.isdigit() and 0 < int(value) < 32 else None


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Raise the timeout where a node's effective value is short for this cluster's size."""
    if any(net_plugin(n) for n in nodes) or not all(ib_ready(n)[0] for n in nodes):
        return []
    low, low_text = oldest(nodes)
    if low is None:
        return []
    default = default_timeout(low)
    wanted = LARGE_TIMEOUT if len(nodes) >= LARGE_CLUSTER_NODES else DEFAULT_TIMEOUT
    current = {hostname(n): v for n in nodes if (v := _timeout_set(n)) is not None}
    target = max([wanted, *current.values()])  # never lower a value someone raised
    effective = {hostname(n): current.get(hostname(n), default) for n in nodes}
    env: dict[str, str] = {}
    notes = []
    if any(v < target for v in effective.values()):
        env["NCCL_IB_TIMEOUT"] = str(target)
        size = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}" + (f" (>= {LARGE_CLUSTER_NODES})" if wanted > 20 else "")
        if default < target and len(current) < len(nodes):
            notes.append(f"NCCL {low_text} defaults NCCL_IB_TIMEOUT to {default} "
                         f"({seconds(default):.1f} s with 7 retries)")
        short = {h: v for h, v in current.items() if v < target}
        if short:
            notes.append("NCCL_IB_TIMEOUT is set to "
                         + ", ".join(f"{h}={v}" for h, v in list(short.items())[:4])
                         + (" ..." if len(short) > 4 else ""))
        why = (f"the {target} already configured on "
               f"{', '.join(h for h, v in current.items() if v == target)[:120]}, for every node"
               if target > wanted else f"right for {size}")
        notes.append(f"{target} waits {seconds(target):.0f} s, {why}")
    lowered = {hostname(n): v for n in nodes
               if (v := configured(n, "NCCL_IB_RETRY_CNT")) is not None
               and v.strip().isdigit() and int(v) < RETRY_MAX}
    if lowered:
        env["NCCL_IB_RETRY_CNT"] = str(RETRY_MAX)
        notes.append("NCCL_IB_RETRY_CNT is lowered to "
                     f"{', '.join(f'{h}={v}' for h, v in list(lowered.items())[:4])}; 7 is the "
                     "default and the maximum")
    if not env:
        return []
    shortest = min(effective.values())
    return [Finding(message="; ".join(notes), env=env,
                    severity=Severity.WARNING if shortest < 18 or lowered else None,
                    evidence={"nccl.version": versions(nodes), "nodes": len(nodes),
                              "NCCL_IB_TIMEOUT": effective})]


RULE = Rule(
    id="ib-timeout-retry",
    title="Give IB retries enough time for the cluster's size",
    severity=Severity.INFO,
    reads=("nccl.versions", "nccl.ibverbs", "nccl.net_plugin", "ib.devices?",
           "ib.dev_infiniband?", "env.nccl?", "nccl.conf_env?", "nccl.torch_loads?",
           "nccl.system_loads?"),
    sets=("NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT"),
    why=("NCCL_IB_TIMEOUT is the verbs ACK timeout exponent (4.096 us x 2^value) and "
         "NCCL_IB_RETRY_CNT the retries; when they run out the job dies with 'Got completion "
         "from peer ... status=12 (IBV_WC_RETRY_EXC_ERR)', whose hint since 2.30.7 says the "
         "timeout is often too short (src/transport/net_ib/common.h, v2.30.7-1). The default "
         "rose from 14 to 18 (2.14) to 20 (2.23) (NCCL_PARAM(IbTimeout): src/transport/"
         "net_ib.cc in v2.14.3-1 and v2.23.4-1, net_ib/connect.cc in v2.30.7-1); the docs "
         "say a larger value helps on very large networks that fail with error 12. ncclcheck "
         "raises 20 to 22 from 128 nodes on, as OCI's large RoCE fabrics do."),
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-timeout",
    fix="Export the recommended NCCL_IB_TIMEOUT (and NCCL_IB_RETRY_CNT=7) on every node.",
    check=check,
    scope="cluster",
)
