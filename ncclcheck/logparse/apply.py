"""How a parsed fact and an RDMA marker change the state: the per-process fields, the evidence
kept for them, and the hints that a host has RDMA hardware. Mixed into
:class:`~ncclcheck.logparse.state.LogState`, whose fields these methods fill.
"""

from __future__ import annotations

from typing import Any, Optional

from ncclcheck.logparse.block import DEFERRED
from ncclcheck.logparse.facts import Fact
from ncclcheck.logparse.proc import MAX_EVIDENCE, MAX_LIST, MAX_SET, Line, Proc, evidence
from ncclcheck.signatures.rdma import (
    IB_NO_DEVICE,
    IBVERBS_MISSING,
    IPOIB_IFACE,
    RDMA_DEVICE,
)


class FactsMixin:
    """Applies facts and RDMA hints to a :class:`~ncclcheck.logparse.state.LogState`."""

    procs: dict[str, Proc]
    bare_versions: dict[str, dict[str, Any]]
    rdma_evidence: dict[Optional[str], list[dict[str, Any]]]
    rdma_devices: dict[Optional[str], set[str]]
    env_evidence: dict[str, dict[str, Any]]
    _pending: Any
    flush: Any

    # -- facts ---------------------------------------------------------------------------------
    def _apply(self, proc: Proc, fact: Fact, file: str, lineno: int, line: Line) -> None:
        kind, value = fact
        if self._pending and kind in DEFERRED:   # the lines counted so far first (block.py)
            self.flush(keep=True)
        if kind == "connection":
            channel, transport, gdr = value
            if len(proc.rings) < MAX_LIST:
                proc.rings.add(channel)
            if transport in proc.transports or len(proc.transports) < 16:
                proc.transports[transport] = proc.transports.get(transport, 0) + 1
            if gdr:
                proc.gdr_connections += 1
            elif "net_conn" not in proc.evidence and transport[:4] == "NET/":
                proc.evidence["net_conn"] = evidence(file, lineno, line)  # GDR off, unsaid why
        elif kind == "ring":
            channel, total = value
            if len(proc.rings) < MAX_LIST:
                proc.rings.add(channel)
            if total:
                proc.channels = max(proc.channels or 0, total)
        elif kind == "trees":
            proc.trees = max(proc.trees or 0, value)
        elif kind == "init":
            self._apply_init(proc, value)
            if value["state"] == "COMPLETE" and "init_complete" not in proc.evidence:
                proc.evidence["init_complete"] = evidence(file, lineno, line)
        elif kind == "topology":
            proc.nnodes = max(proc.nnodes or 0, value["nnodes"])
            comm = proc.comms.get(value["comm"])
            if comm is None and len(proc.comms) < MAX_LIST:
                proc.comms[value["comm"]] = {"rank": value["rank"], "nranks": value["nranks"],
                                             "state": "TOPOLOGY"}
        elif kind == "version":
            proc.nccl_version, proc.cuda_version = value
            proc.evidence.setdefault("version", evidence(file, lineno, line))
            self.bare_versions.setdefault(value[0], evidence(file, lineno, line))
        elif kind == "cuda_driver":
            proc.cuda_driver = value
            proc.evidence.setdefault("cuda_driver", evidence(file, lineno, line))
        elif kind == "bootstrap":
            proc.bootstrap = value
            proc.evidence.setdefault("bootstrap", evidence(file, lineno, line))
            self._iface_hints(value, proc.host or proc.node, file, lineno, line)
        elif kind == "net_ib":
            proc.ib_devices = value["devices"]
            proc.oob = value["oob"]
            proc.evidence.setdefault("net_ib", evidence(file, lineno, line))
            for name, _port, _ll in value["devices"][:4]:
                self._rdma_hint(name, proc.host or proc.node, file, lineno, line)
        elif kind == "net_socket":
            proc.socket_ifs = value
            proc.evidence.setdefault("net_socket", evidence(file, lineno, line))
            self._iface_hints(value, proc.host or proc.node, file, lineno, line)
        elif kind == "net_socket_add":              # NCCL 2.3/2.4: one interface per line
            for iface in value:
                if iface not in proc.socket_ifs and len(proc.socket_ifs) < 16:
                    proc.socket_ifs.append(iface)
            proc.evidence.setdefault("net_socket", evidence(file, lineno, line))
            self._iface_hints(value, proc.host or proc.node, file, lineno, line)
        elif kind == "network":
            proc.network = value
            proc.evidence.setdefault("network", evidence(file, lineno, line))
        elif kind == "env":
            name, val = value
            if name in proc.env or len(proc.env) < MAX_LIST:
                proc.env[name] = val
            setting = f"{name}={val}"
            if setting not in self.env_evidence and len(self.env_evidence) < MAX_LIST:
                self.env_evidence[setting] = evidence(file, lineno, line)
            if name.startswith("NCCL_IB_") and name not in ("NCCL_IB_DISABLE",) \
                    and not (name == "NCCL_IB_HCA" and val.startswith("^")):
                self._rdma_hint(f"{name}={val}", proc.host or proc.node, file, lineno, line)
        elif kind == "plugin_env":
            if len(proc.plugin_env) < MAX_LIST:
                proc.plugin_env[value[0]] = value[1]
        elif kind == "gdr":
            if len(proc.gdr) < MAX_LIST:
                proc.gdr[f"{value['net']}:{value['hca']}"] = value["enabled"] or (
                    proc.gdr.get(f"{value['net']}:{value['hca']}", False))
            if not value["enabled"] and "distance" not in (value["note"] or ""):
                proc.evidence.setdefault("gdr_disabled", evidence(file, lineno, line))
        elif kind == "plugin":
            if value not in proc.plugins and len(proc.plugins) < 8:
                proc.plugins.append(value)
        elif kind == "version_hint":
            proc.version_hint = value
            proc.evidence.setdefault("version_hint", evidence(file, lineno, line))
        elif kind == "dmabuf":
            proc.dmabuf = True
        elif kind == "coll_channels":
            proc.coll_channels = value

    def _apply_init(self, proc: Proc, value: dict[str, Any]) -> None:
        comm = proc.comms.get(value["comm"])
        if comm is None:
            if len(proc.comms) >= MAX_LIST:
                return
            comm = proc.comms[value["comm"]] = {"rank": value["rank"], "nranks": value["nranks"],
                                                "state": value["state"]}
        comm["rank"], comm["nranks"] = value["rank"], value["nranks"]
        if value["state"] == "START":
            comm["started"] = True
            if comm["state"] != "COMPLETE":
                comm["state"] = "START"
        else:
            comm["state"] = "COMPLETE"
        if value["bus_id"] and proc.bus_id is None:
            proc.bus_id = value["bus_id"]
        if value["cuda_dev"] not in proc.devs and len(proc.devs) < MAX_LIST:
            proc.devs.append(value["cuda_dev"])

    # -- RDMA hints ----------------------------------------------------------------------------
    def _rdma_markers(self, proc: Proc, msg: str, file: str, lineno: int, line: Line) -> bool:
        """Note libibverbs / IB device trouble; True when the message was one of these."""
        if "libibverbs" in msg:
            if any(p.search(msg) for p in IBVERBS_MISSING):
                proc.ibverbs_missing = True
                proc.evidence.setdefault("ibverbs", evidence(file, lineno, line))
                return True
        elif "NET/IB" in msg or "Net/IB" in msg:
            if IB_NO_DEVICE.search(msg):
                proc.ib_no_device = True
                proc.evidence.setdefault("ib_no_device", evidence(file, lineno, line))
                return True
            if "Unable to open device" in msg:
                proc.ib_open_failed = True
                m = RDMA_DEVICE.search(msg)
                self._rdma_hint(m.group(0) if m else "an RDMA device", proc.host or proc.node,
                                file, lineno, line)
                return True
        elif "ibv_open_device" in msg:
            proc.ib_open_failed = True
            return True
        return False

    def _iface_hints(self, ifaces: list[tuple[str, str]], host: Optional[str], file: str,
                     lineno: int, line: Line) -> None:
        for name, _addr in ifaces:
            if IPOIB_IFACE.match(name):
                self._rdma_hint(f"IPoIB interface {name}", host, file, lineno, line)
                break

    def _rdma_hint(self, what: str, host: Optional[str], file: str, lineno: int,
                   line: Line) -> None:
        """Remember that RDMA hardware shows on ``host`` (None: a line naming no host)."""
        seen = self.rdma_devices.setdefault(host, set())
        if what in seen or len(seen) >= MAX_LIST or len(self.rdma_devices) > MAX_SET:
            return
        seen.add(what)
        lines = self.rdma_evidence.setdefault(host, [])
        if len(lines) < MAX_EVIDENCE:
            lines.append(evidence(file, lineno, line))

    def rdma_seen(self, proc: Proc) -> tuple[list[str], list[dict[str, Any]]]:
        """RDMA device hints for ``proc``'s host; hints naming no host count when the log has
        only one host."""
        host = proc.host or proc.node
        names = sorted(self.rdma_devices.get(host, set()))
        lines = list(self.rdma_evidence.get(host, []))
        if None in self.rdma_devices and host is not None and not (names and lines):
            hosts = {p.host or p.node for p in self.procs.values() if p.host or p.node}
            if len(hosts) <= 1:
                names += sorted(self.rdma_devices[None])
                lines += self.rdma_evidence.get(None, [])
        elif host is None:
            names = sorted({n for ns in self.rdma_devices.values() for n in ns})
            lines = [e for es in self.rdma_evidence.values() for e in es]
        return names, lines
