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
LOCAL_ADDRESS = re.compile(r"^(?:127\.|::1$|fe80:|172\.17\.0\.1$|192\.168\.122\.1$)")

SIGNATURES = (NO_SOCKET_INTERFACE, BAD_PEER_ADDRESS)
DERIVED = (WRONG_INTERFACE,)
