"""IP interfaces: none usable, a garbage peer address, or the wrong one (§9 rows 4-7, 21)."""

from __future__ import annotations

import re

from ncclcheck.signatures.base import (
    NCCL_ENV,
    Detail,
    Signature,
    compile_all,
)


def _no_iface_detail(m: re.Match[str]) -> Detail:
    text = m.group(0)
    if "listening interface" in text or "same subnet" in text:
        return Detail(
            message="NCCL found no local interface in the subnet of NCCL_COMM_ID",
            variant="comm id subnet",
            cause="NCCL_COMM_ID is set, and no local interface is in the same subnet as its address, "
                  "so the bootstrap has nothing to listen on.",
            fix="Fix NCCL_COMM_ID (or the node's addressing); frameworks normally leave it unset "
                "and exchange a unique id themselves.")
    if "Address family" in text:
        return Detail(message="NCCL could not create a socket: no usable IP interface",
                      variant="address family")
    return Detail(message=f"NCCL found no usable socket interface ({text.strip()})",
                  variant="none found")


NO_SOCKET_INTERFACE = Signature(
    id="log-no-socket-interface",
    title="no usable network interface for NCCL's bootstrap or sockets",
    severity="error",
    cause="No interface passed NCCL's filter: NCCL_SOCKET_IFNAME names an interface that does not "
          "exist on this node (or uses a prefix/'=' syntax the NCCL version does not know), the "
          "interface is down (NCCL >= 2.28 requires it to be running), it has no IPv4/IPv6 "
          "address, or NCCL_SOCKET_FAMILY excludes all of them.",
    fix="Set NCCL_SOCKET_IFNAME to an existing, UP interface that has an address on every node "
        "(a comma list covers nodes whose names differ, e.g. eno1,eth0); check with `ip -br addr`.",
    docs=f"{NCCL_ENV}#nccl-socket-ifname; src/bootstrap.cc; src/misc/socket.cc; "
         "https://github.com/NVIDIA/nccl/issues/210",
    patterns=compile_all(
        r"Bootstrap ?: no socket interface found",
        r"no NCCL_SOCKET_IFNAME interface found",
        r"NET/Socket ?: no interface found",
        r"NET/IB ?: No IP interface found",
        r"No usable listening interface found",
        r"No interface found in the same subnet",
        r"Socket creation failed : Address family not supported"),
    keywords=("no socket interface", "interface found", "IP interface", "listening interface",
              "Address family not supported"),
    explain=_no_iface_detail)


def _bad_address_detail(m: re.Match[str]) -> Detail:
    return Detail(message=f"a rank tried to connect to an address of family {m.group(1)}: it "
                          "received garbage instead of a peer address")


BAD_PEER_ADDRESS = Signature(
    id="log-socket-bad-address",
    title="a rank received an invalid peer address",
    severity="error",
    cause="The ranks disagree about the bootstrap/socket exchange: NCCL_SOCKET_IFNAME matches no "
          "interface on some rank (NCCL 2.27 then sends an empty address), or ranks run different "
          "NCCL builds or network plugins.",
    fix="Make NCCL, its network plugin and the NCCL_* environment identical on every rank; set "
        "NCCL_SOCKET_IFNAME to names that exist on every node.",
    docs="https://github.com/NVIDIA/nccl/issues/1837; https://github.com/NVIDIA/nccl/issues/1267; "
         "src/misc/socket.cc",
    patterns=compile_all(r"connecting to address\s+(?:\S+\s+)?with family (\d+) is neither AF_INET"),
    keywords=("is neither AF_INET",),
    explain=_bad_address_detail)

WRONG_INTERFACE = Signature(
    id="net-socket-ifname",
    title="NCCL picked a virtual or loopback interface between nodes",
    severity="warning",
    cause="Without NCCL_SOCKET_IFNAME, NCCL takes the first interface that is not docker*, lo or "
          "(>= 2.28) virbr*; bridges and veth pairs (br-*, veth*, cni*, flannel*) are not "
          "excluded, and docker0/virbr0 carry the same address on every node. Bootstrap uses the "
          "first interface only, the Socket transport spreads traffic over all of them.",
    fix="Set NCCL_SOCKET_IFNAME to the data NIC, as an exact list (=eth0) or an exclusion list "
        "(^docker,lo,veth,virbr,br-), identically on every node.",
    docs=f"{NCCL_ENV}#nccl-socket-ifname; src/misc/socket.cc (ncclFindInterfaces); "
         "https://github.com/NVIDIA/nccl/issues/697; https://github.com/NVIDIA/nccl/issues/913")

#: interface names NCCL should not use between nodes (§3 of the knowledge base).
VIRTUAL_IFACE = re.compile(
    r"^(?:docker\d*|lo|virbr\d*|veth[\w.@\-]*|br-[\w]+|cni\d*|flannel[\w.]*|cali[\w]+|"
    r"tailscale\d*|kube-ipvs\d*|podman\d*|lxcbr\d*|vmnet\d*|ip6tnl\d*|tun\d*)$")
#: addresses that cannot reach another node (loopback, link-local, docker0/virbr0 defaults).
LOCAL_ADDRESS = re.compile(r"^(?:127\.|::1$|fe80:|169\.254\.|172\.17\.0\.1$|192\.168\.122\.1$)")

def why_wrong(name: str, addr: str) -> str:
    """Why an interface NCCL printed cannot carry traffic between nodes.

    >>> why_wrong("lo", "127.0.0.1")
    'lo is the loopback interface: 127.0.0.1 only reaches this host'
    >>> why_wrong("docker0", "172.17.0.1")
    "docker0 is Docker's bridge: 172.17.0.1 is the same on every host and routes nowhere"
    """
    if name == "lo" or addr.startswith("127.") or addr == "::1":
        return f"{name} is the loopback interface: {addr} only reaches this host"
    if name.startswith("docker") or addr == "172.17.0.1":
        return f"{name} is Docker's bridge: {addr} is the same on every host and routes nowhere"
    if name.startswith("virbr") or addr == "192.168.122.1":
        return (f"{name} is libvirt's NAT bridge: {addr} is the same on every host and routes "
                "nowhere")
    if name.startswith("br-"):
        return f"{name} is a Docker user-network bridge, local to this host"
    if name.startswith(("veth", "cali", "cni", "flannel")):
        return f"{name} is one end of a container's virtual link (veth/CNI), not a route out"
    if addr.startswith("169.254."):
        return f"{name}:{addr} is a link-local IPv4 address, which no router forwards"
    if addr.startswith("fe80:"):
        return f"{name}:{addr} is a link-local IPv6 address, unusable without a scope between hosts"
    return f"{name} is a virtual interface ({addr})"


def socket_ifname_fix(good: list[str], before_2_5: bool = False) -> str:
    """The exact ``NCCL_SOCKET_IFNAME`` to set, from the routable interfaces NCCL printed.

    The ``=`` prefix (exact names) exists since NCCL 2.5 (``searchExact`` in src/include/socket.h
    of v2.5.6-1, absent in v2.4.2-1); older versions only match prefixes.

    >>> socket_ifname_fix(["eth0"])
    'Set NCCL_SOCKET_IFNAME==eth0 on every node (the leading = makes NCCL take exactly eth0, not every name starting with it), the same for every rank.'
    >>> socket_ifname_fix(["eth0"], before_2_5=True)[:62]
    'Set NCCL_SOCKET_IFNAME=eth0 on every node (NCCL before 2.5 mat'
    >>> socket_ifname_fix([])[:60]
    'Set NCCL_SOCKET_IFNAME to the data NIC that carries the node'
    """
    if good:
        names = ",".join(good[:4])
        if before_2_5:
            return (f"Set NCCL_SOCKET_IFNAME={names} on every node (NCCL before 2.5 matches it as "
                    f"a prefix; from 2.5 on, ={names} takes exactly these names).")
        return (f"Set NCCL_SOCKET_IFNAME=={names} on every node (the leading = makes NCCL take "
                f"exactly {names}, not every name starting with it), the same for every rank.")
    return ("Set NCCL_SOCKET_IFNAME to the data NIC that carries the node's routable address "
            "(see `ip -br addr`), as an exact name (=eth0) or an exclusion list "
            "(^docker,lo,veth,virbr,br-), identically on every node.")


SIGNATURES = (NO_SOCKET_INTERFACE, BAD_PEER_ADDRESS)
DERIVED = (WRONG_INTERFACE,)
