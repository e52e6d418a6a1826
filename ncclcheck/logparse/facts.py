"""What one NCCL INFO message says about the process that printed it.

Each ``parse_*`` function reads one kind of message, quoted below as NCCL prints it (formats from
src/init.cc, src/bootstrap.cc, src/transport/net_ib*.cc, src/transport/net_socket.cc,
src/graph/*.cc and the 2.3 ... 2.30 logs in the test corpus). :func:`parse_info` dispatches on the
first characters of a message so that most INFO lines cost one dictionary look-up.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Optional

from ncclcheck.logparse.version_hints import plugin_version_range

_IFACE = re.compile(r"(?:\[\d+\])?([^\s:\[\]<>]+):(\S+?)<\d+>")
_IB_DEV = re.compile(r"\[\d+\]\s?([^\s:\[\]]+):(\d{1,4})/(IB|RoCE)\b(/SHARP)?")
_OOB = re.compile(r"OOB ([^\s:]+):(\S+?)<\d+>")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:[-+.]?[\w.]*?\+cuda(\d+\.\d+))?")
_ENV = re.compile(r"^(NCCL_[A-Z0-9_]+) set (?:by environment )?to (.*?)\s*$")
_PLUGIN_ENV = re.compile(r'^NET/OFI (?:Adding (NCCL_[A-Z0-9_]+)=(\S*) to environment|'
                         r'Setting (NCCL_PROTO) to "(simple)")\s*$')
_INIT = re.compile(r"comm (0x[0-9a-fA-F]{1,16}) rank (\d{1,9}) nranks (\d{1,9}) cudaDev (\d{1,6})"
                   r"(?: nvmlDev \d+)?(?: busId ([0-9a-fA-F]+))?.*? - Init (START|COMPLETE)")
_TOPO = re.compile(r"comm (0x[0-9a-fA-F]{1,16}) rank (\d{1,9}) nRanks (\d{1,9}) nNodes (\d{1,9}) "
                   r"localRanks (\d{1,9}) localRank (\d{1,9})")
_RING_LIST = re.compile(r"^(?:Channel|Ring) (\d{1,4})(?:/(\d{1,4}))? :\s+(\d+(?:\s+\d+)*)\s*$")
_CONN = re.compile(r"^(?:Channel|Ring) (\d{1,4})(?:/\d+)? : (\d+)(?:\[\w+\])? -> (\d+)(?:\[\w+\])?"
                   r"(?: \[(send|receive)\])? via (.+?)\s*$")
_TREE_GROUP = re.compile(r"\[\d+\]")
_GDR = re.compile(r"^NET/([^:]+?) ?: GPU Direct RDMA (?:\(([\w-]+)\) )?(Enabled|enabled|Disabled|"
                  r"disabled|enable) for (?:GPU [^/]*/ )?HCA (\d+)(?: '([^']*)'?)?\s*(.*)$")
_PLUGIN = re.compile(r"Loaded (?:net|coll|collnet) plugin (.+?) \(v\d+\)")
_NETWORK = re.compile(r"^Using (?:internal )?[Nn]etwork (.+?)\s*$")
_COLL = re.compile(r"^(\d{1,4}) coll channels")


class Fact(NamedTuple):
    """One fact: a kind (``version``, ``network``, ...) and its value."""

    kind: str
    value: Any


def parse_interfaces(text: str) -> list[tuple[str, str]]:
    """``(interface, address)`` pairs of an NCCL interface list.

    >>> parse_interfaces("[0]ens5:172.31.0.137<0> [1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>")
    [('ens5', '172.31.0.137'), ('veth75fa783', 'fe80::14ad:64ff:fe64:b31e%veth75fa783')]
    """
    return [(m.group(1), m.group(2)) for m in _IFACE.finditer(text)][:16]


def parse_bootstrap(msg: str) -> Optional[Fact]:
    """``Bootstrap : Using eth0:10.0.0.1<0>`` (also ``Bootstrap: Using``, and lists).

    >>> parse_bootstrap("Bootstrap : Using [0]eth0:172.17.0.2<0>")
    Fact(kind='bootstrap', value=[('eth0', '172.17.0.2')])
    """
    cut = msg.find("Using")
    if cut < 0:
        return None
    ifaces = parse_interfaces(msg[cut:])
    return Fact("bootstrap", ifaces) if ifaces else None


def parse_net_ib(msg: str) -> Optional[Fact]:
    """``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.5<0>``.

    >>> parse_net_ib("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.5<0>").value
    {'devices': [('mlx5_0', 1, 'IB'), ('mlx5_1', 1, 'RoCE')], 'oob': ('eth0', '10.0.0.5')}
    """
    devs = [(m.group(1), int(m.group(2)), m.group(3)) for m in _IB_DEV.finditer(msg)][:64]
    if not devs:
        return None
    oob = _OOB.search(msg)
    return Fact("net_ib", {"devices": devs, "oob": (oob.group(1), oob.group(2)) if oob else None})


def parse_net_socket(msg: str) -> Optional[Fact]:
    """``NET/Socket : Using [0]eth0:10.1.1.1<0>``; 2.3-2.4 ``NET : Using interface eth0:...<0>``.

    >>> parse_net_socket("NET/Socket : Using [0]bond0:200.1.93.2<0>")
    Fact(kind='net_socket', value=[('bond0', '200.1.93.2')])
    """
    cut = msg.find("Using")
    ifaces = parse_interfaces(msg[cut:]) if cut >= 0 else []
    if not ifaces:
        return None
    return Fact("net_socket_add" if msg.startswith("NET : Using interface") else "net_socket", ifaces)


def parse_version(text: str) -> Optional[Fact]:
    """``NCCL version 2.18.3+cuda12.2`` (bare or as an INFO message), and torch's ``NCCL version 2.19.3``.

    >>> parse_version("NCCL version 2.18.3+cuda12.2")
    Fact(kind='version', value=('2.18.3', '12.2'))
    >>> parse_version("NCCL version 2.30.3+cuda13.0").value
    ('2.30.3', '13.0')
    """
    m = _VERSION.search(text)
    return Fact("version", (m.group(1), m.group(2))) if m else None


def parse_env(msg: str) -> Optional[Fact]:
    """``NCCL_SOCKET_IFNAME set by environment to eth0`` and ``NCCL_IB_DISABLE set by environment to 1.``

    >>> parse_env("NCCL_IB_DISABLE set by environment to 1.")
    Fact(kind='env', value=('NCCL_IB_DISABLE', '1'))
    >>> parse_env("NCCL_IB_HCA set to mlx5_4")
    Fact(kind='env', value=('NCCL_IB_HCA', 'mlx5_4'))
    """
    m = _ENV.match(msg)
    if not m:
        return None
    value = m.group(2)
    if value.endswith(".") and not value.endswith(".."):
        value = value[:-1]
    return Fact("env", (m.group(1), value[:256]))


def parse_plugin_env(msg: str) -> Optional[Fact]:
    """A variable the AWS net plugin put in the environment for NCCL to read (aws-ofi-nccl
    include/nccl_ofi_environ.h ``"Adding %s to environment"`` from 1.14; src/platform-aws.c
    ``Setting NCCL_PROTO to "simple"`` up to 1.13), so not the user's setting.

    >>> parse_plugin_env("NET/OFI Adding NCCL_BUFFSIZE=8388608 to environment")
    Fact(kind='plugin_env', value=('NCCL_BUFFSIZE', '8388608'))
    >>> parse_plugin_env('NET/OFI Setting NCCL_PROTO to "simple"').value
    ('NCCL_PROTO', 'simple')
    """
    m = _PLUGIN_ENV.match(msg)
    if not m:
        return None
    return Fact("plugin_env", (m.group(1) or m.group(3), (m.group(2) or m.group(4) or "")[:256]))


def parse_init(msg: str) -> Optional[Fact]:
    """``comm 0x.. rank 0 nranks 2 cudaDev 0 [nvmlDev 0] [busId 1000] [commId 0x..] - Init COMPLETE``.

    >>> parse_init("ncclCommInitRank comm 0x559d5aa8ca00 rank 4 nranks 8 cudaDev 0 nvmlDev 0 "
    ...            "busId 42000 commId 0x996ee6f117cb8e1e - Init COMPLETE").value
    {'comm': '0x559d5aa8ca00', 'rank': 4, 'nranks': 8, 'cuda_dev': 0, 'bus_id': '42000', 'state': 'COMPLETE'}
    """
    m = _INIT.search(msg)
    if not m:
        return None
    return Fact("init", {"comm": m.group(1), "rank": int(m.group(2)), "nranks": int(m.group(3)),
                         "cuda_dev": int(m.group(4)), "bus_id": m.group(5), "state": m.group(6)})


def parse_topology(msg: str) -> Optional[Fact]:
    """``comm 0x.. rank 6 nRanks 16 nNodes 2 localRanks 8 localRank 6 MNNVL 0``.

    >>> parse_topology("comm 0x8ec0ac0 rank 6 nRanks 16 nNodes 2 localRanks 8 localRank 6 MNNVL 0").value
    {'comm': '0x8ec0ac0', 'rank': 6, 'nranks': 16, 'nnodes': 2, 'local_ranks': 8}
    """
    m = _TOPO.search(msg)
    if not m:
        return None
    return Fact("topology", {"comm": m.group(1), "rank": int(m.group(2)), "nranks": int(m.group(3)),
                             "nnodes": int(m.group(4)), "local_ranks": int(m.group(5))})


def transport_of(via: str) -> tuple[str, bool]:
    """The transport a ``via ...`` clause names, and whether it uses GPUDirect RDMA.

    >>> transport_of("NET/IB/0/GDRDMA"), transport_of("P2P/IPC/read"), transport_of("NET/AWS Libfabric/0")
    (('NET/IB', True), ('P2P', False), ('NET/AWS Libfabric', False))
    """
    gdr = "GDRDMA" in via
    if via.startswith("NET/"):
        parts = [p for p in via[4:].split("/") if p and p != "GDRDMA" and not p.isdigit()]
        return "NET/" + (parts[0] if parts else "?"), gdr
    if via.startswith("P2P") or via.startswith("direct pointer"):
        return "P2P", gdr
    if via.startswith("SHM") or "shared memory" in via:
        return "SHM", gdr
    return via.split("/")[0].split()[0] if via.split() else "?", gdr


def parse_channel(msg: str) -> Optional[Fact]:
    """Ring listings (``Channel 00/08 :    0   5   4   7``, old ``Ring 00 : 0 1``) and connections
    (``Channel 00/0 : 0[0] -> 1[1] via NET/IB/0/GDRDMA``, ``Ring 01 : 15 -> 0 [send] via NET/Socket/0``).

    >>> parse_channel("Channel 01/08 :    0   5   4   7")
    Fact(kind='ring', value=(1, 8))
    >>> parse_channel("Channel 00/0 : 3[3] -> 8[0] [send] via NET/IB/0/GDRDMA")
    Fact(kind='connection', value=(0, 'NET/IB', True))
    """
    m = _CONN.match(msg)
    if m:
        transport, gdr = transport_of(m.group(5))
        return Fact("connection", (int(m.group(1)), transport, gdr))
    m = _RING_LIST.match(msg)
    if m:
        return Fact("ring", (int(m.group(1)), int(m.group(2)) if m.group(2) else None))
    return None


def parse_trees(msg: str) -> Optional[Fact]:
    """``Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1``: the number of trees.

    >>> parse_trees("Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1")
    Fact(kind='trees', value=2)
    """
    n = len(_TREE_GROUP.findall(msg))
    return Fact("trees", n) if n else None


def parse_gdr(msg: str) -> Optional[Fact]:
    """GPUDirect RDMA per HCA: ``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)``,
    ``NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 0 'mlx5_bond_0``, 2.4 ``... for GPU x / HCA 0 (distance 1 < 2)``.

    >>> parse_gdr("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)").value
    {'net': 'IB', 'enabled': False, 'hca': "0 'mlx5_0'", 'how': None, 'note': '(no module)'}
    """
    m = _GDR.match(msg)
    if not m:
        return None
    hca = m.group(4) + (f" '{m.group(5)}'" if m.group(5) else "")
    return Fact("gdr", {"net": m.group(1).strip(), "enabled": m.group(3).lower().startswith("enable"),
                        "hca": hca, "how": m.group(2), "note": m.group(6) or None})


def parse_network(msg: str) -> Optional[Fact]:
    """``Using network IB`` / ``Using network AWS Libfabric``; NCCL 2.3 ``Using internal Network Socket``.

    >>> parse_network("Using network AWS Libfabric")
    Fact(kind='network', value='AWS Libfabric')
    """
    m = _NETWORK.match(msg)
    return Fact("network", m.group(1)[:64]) if m else None


def parse_plugin(msg: str) -> Optional[Fact]:
    """``NET/Plugin: Loaded net plugin FastSocket (v4)``, ``P2P plugin IBext``.

    >>> parse_plugin("NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)")
    Fact(kind='plugin', value='NCCL RDMA Plugin v8')
    """
    m = _PLUGIN.search(msg)
    if m:
        return Fact("plugin", m.group(1)[:64])
    if msg.startswith("P2P plugin "):
        return Fact("plugin", msg[11:].strip()[:64])
    rng = plugin_version_range(msg)
    return Fact("version_hint", rng) if rng else None


def parse_info(msg: str) -> Optional[Fact]:
    """The fact an INFO message states, if it is one of the kinds above.

    >>> parse_info("cudaDriverVersion 12020")
    Fact(kind='cuda_driver', value=12020)
    >>> parse_info("Connected all rings") is None
    True
    """
    if not msg:
        return None
    c = msg[0]
    if c == "C":
        if msg.startswith("Channel "):
            return parse_channel(msg)
        return None
    if c == "N":
        if msg.startswith("NET/IB") and "Using [" in msg:
            return parse_net_ib(msg)
        if msg.startswith("NET/") and "GPU Direct RDMA" in msg:
            return parse_gdr(msg)
        if msg.startswith("NET/Plugin"):
            return parse_plugin(msg)
        if msg.startswith("NET") and " Using " in msg and "<" in msg:
            return parse_net_socket(msg)
        if msg.startswith("NCCL version"):
            return parse_version(msg)
        if msg.startswith("NCCL_"):
            return parse_env(msg)
        if msg.startswith("NET/OFI ") and "NCCL_" in msg:
            return parse_plugin_env(msg)
        return None
    if c == "T":
        if msg.startswith("Trees "):
            return parse_trees(msg)
        return None
    if c == "R":
        if msg.startswith("Ring "):
            return parse_channel(msg)
        return None
    if c == "B":
        if msg.startswith("Bootstrap"):
            return parse_bootstrap(msg)
        return None
    if c == "U":
        if msg.startswith("Using ") and "etwork" in msg:
            return parse_network(msg)
        return None
    if c == "c":
        if msg.startswith("cudaDriverVersion "):
            tail = msg[18:].strip()
            return Fact("cuda_driver", int(tail)) if tail.isdigit() and len(tail) < 9 else None
        if msg.startswith("comm "):
            return parse_init(msg) if "- Init " in msg else parse_topology(msg)
        return None
    if "- Init " in msg and "comm 0x" in msg:      # ncclCommInitRank..., [Rank 5] ncclComm...
        return parse_init(msg)
    if c == "P" and msg.startswith("P2P plugin "):
        return parse_plugin(msg)
    if c == "D" and msg.startswith("DMA-BUF is available"):
        return Fact("dmabuf", True)
    if c.isdigit():
        m = _COLL.match(msg)
        if m:
            return Fact("coll_channels", int(m.group(1)))
    return None
