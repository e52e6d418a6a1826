"""cluster-mnnvl-not-ready: GB200/GB300 trays in an NVLink domain (MNNVL) that NCCL cannot use
across nodes: the IMEX service down, no IMEX channel device in the container, trays of the job
in different domains or cliques, or an NCCL without MNNVL.

NCCL enables MNNVL when every rank's fabric state is Completed and ranks share a ClusterUUID
(and a CliqueId, for the clique); it then exports memory as FABRIC handles through IMEX and
stops with "MNNVL (cliqueSize N) is available but not working on this system. Check the IMEX
channel configuration (/dev/nvidia-caps-imex-channels)" or "... Check the IMEX configuration
(nvidia-imex-ctl -N)" when that fails (src/mnnvl.cc@v2.30.7-1 ncclMnnvlCheck; the IMEX hints
since v2.27.3-1). NCCL_MNNVL_ENABLE first appears at v2.21.5-1 (src/init.cc).
"""

from __future__ import annotations

from typing import Any

from ncclcheck.rules.base import Finding, Rule, Severity, fact, hostname, version_tuple
from ncclcheck.rules.cluster_nccl_version_mismatch import node_version

MNNVL_SINCE = (2, 21, 5)


def domain(node: dict[str, Any]) -> tuple[str, str] | None:
    """(ClusterUUID, CliqueId) of the node's GPUs when they joined an NVLink domain, else None."""
    joined = {(f.get("cluster_uuid"), f.get("clique_id")) for f in fact(node, "platform.fabric", [])
              if f.get("cluster_uuid") and f.get("state") == "Completed"}
    return sorted(joined, key=str)[0] if joined else None


def check(nodes: list[dict[str, Any]]) -> list[Finding]:
    """Name what stops MNNVL on the nodes whose GPUs joined an NVLink domain."""
    tray = {hostname(n): (n, d) for n in nodes if (d := domain(n))}
    if not tray:
        return []
    findings = []
    down = sorted(h for h, (n, _) in tray.items()
                  if (fact(n, "platform.imex") or {}).get("service") not in (None, "active"))
    if down:
        findings.append(Finding(
            message=(f"the nvidia-imex service is not active on {', '.join(down[:6])}: NCCL's "
                     "MNNVL cannot import FABRIC memory handles and stops at init ('MNNVL ... is "
                     "available but not working ... Check the IMEX configuration')"),
            fix="sudo systemctl enable --now nvidia-imex (its nodes_config.cfg listing every "
                "tray of the domain); check with nvidia-imex-ctl -N",
            evidence={"platform.imex.service": {h: (fact(tray[h][0], "platform.imex") or {})
                                                .get("service") for h in down}},
            hosts=tuple(down)))
    nochan = sorted(h for h, (n, _) in tray.items()
                    if "channels" in (fact(n, "platform.imex") or {})
                    and not (fact(n, "platform.imex") or {}).get("channels"))
    if nochan:
        findings.append(Finding(
            message=(f"no IMEX channel device (/dev/nvidia-caps-imex-channels/channel<N>) is "
                     f"visible on {', '.join(nochan[:6])}: NCCL's MNNVL fails at init ('Check "
                     "the IMEX channel configuration')"),
            fix=("Create the channel on the host (NVreg_CreateImexChannel0=1, or mknod from "
                 "/proc/devices nvidia-caps-imex-channels) and pass it to the container "
                 "(--device /dev/nvidia-caps-imex-channels/channel0; on Kubernetes a "
                 "ComputeDomain); or NCCL_MNNVL_ENABLE=0 to go through the network"),
            evidence={"platform.imex.channels": {h: [] for h in nochan}}, hosts=tuple(nochan)))
    domains = {h: d for h, (_, d) in tray.items()}
    if len(set(domains.values())) > 1:
        groups: dict[tuple[str, str], list[str]] = {}
        for h, d in domains.items():
            groups.setdefault(d, []).append(h)
        listing = "; ".join(f"ClusterUUID {u[:8]} clique {c}: {', '.join(sorted(hs)[:4])}"
                            for (u, c), hs in sorted(groups.items(), key=str))
        findings.append(Finding(
            message=(f"the job's trays are in {len(groups)} NVLink domains or cliques "
                     f"({listing}): MNNVL joins only ranks with the same ClusterUUID and "
                     "CliqueId, so traffic between the groups goes through the network"),
            fix="Run the job on trays of one NVLink domain and clique (nvidia-smi -q: Fabric)",
            evidence={"platform.fabric": {h: list(d) for h, d in domains.items()}},
            hosts=tuple(sorted(domains)), severity=Severity.WARNING))
    old = {h: v for h, (n, _) in tray.items()
           if (v := node_version(n)) and (version_tuple(v) or ()) < MNNVL_SINCE}
    if old:
        findings.append(Finding(
            message=(f"NCCL {', '.join(sorted(set(old.values())))} on {', '.join(sorted(old)[:6])} "
                     "predates MNNVL (NCCL_MNNVL_ENABLE from 2.21.5): the NVLink domain goes "
                     "unused across trays"),
            fix="Use a current NCCL (the GB200 guides name 2.25 or newer)",
            evidence={"nccl.version": old}, hosts=tuple(sorted(old)), severity=Severity.WARNING))
    return findings


RULE = Rule(
    id="cluster-mnnvl-not-ready",
    title="Make MNNVL usable on GB200/GB300: IMEX, channel, one clique",
    severity=Severity.ERROR,
    reads=("platform.fabric", "platform.imex?", "nccl.versions?", "nccl.torch_loads?",
           "nccl.system_loads?"),
    sets=(),
    why=("NCCL uses multi-node NVLink when every rank's fabric registration is Completed and "
         "ranks share the ClusterUUID and CliqueId; it exports memory as FABRIC handles through "
         "the IMEX service and its channel device, and stops at init when that fails ('MNNVL "
         "(cliqueSize N) is available but not working on this system. Check the IMEX channel "
         "configuration (/dev/nvidia-caps-imex-channels)': src/mnnvl.cc@v2.30.7-1)."),
    docs="https://github.com/NVIDIA/nccl/blob/v2.30.7-1/src/mnnvl.cc",
    fix="Run nvidia-imex on every tray, pass an IMEX channel into the container, keep a job in "
        "one clique.",
    check=check,
    scope="cluster",
)
