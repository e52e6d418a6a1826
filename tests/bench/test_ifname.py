"""NCCL_SOCKET_IFNAME made concrete for gloo, and the route to the rendezvous address."""

from __future__ import annotations

import socket

import pytest

from ncclcheck.bench.ifname import (
    gloo_ifname,
    local_interfaces,
    match_interfaces,
    parse_ifname_spec,
    route_interface,
)

NODE = [("lo", "127.0.0.1"), ("docker0", "172.17.0.1"), ("eth0", "10.0.0.2"),
        ("eth01", "10.1.0.2"), ("ib0", "192.168.0.2"), ("veth12", None)]
NAMES = [n for n, _ in NODE]


@pytest.mark.parametrize("spec, chosen", [
    ("eth", ["eth0", "eth01"]),            # prefixes
    ("=eth0", ["eth0"]),                   # exact
    ("=eth0,ib0", ["eth0", "ib0"]),
    ("^docker,lo", ["eth0", "eth01", "ib0", "veth12"]),  # exclude
    ("^=eth0", ["lo", "docker0", "eth01", "ib0", "veth12"]),
    ("eth0:1234", ["eth0", "eth01"]),      # a port is ignored for matching
    ("x", NAMES),                          # one character: NCCL ignores the variable
    ("bond", []),
])
def test_matching_follows_nccl(spec, chosen):
    assert match_interfaces(spec, NAMES) == chosen


def test_gloo_gets_the_first_match_with_an_address():
    assert gloo_ifname("^docker,lo", NODE) == "eth0"
    assert gloo_ifname("veth", NODE) is None          # matches, but no IPv4 address
    assert gloo_ifname("=ib0", NODE) == "ib0"
    assert parse_ifname_spec("^=a,b") == (True, True, ["a", "b"])


def test_this_node_routes_loopback_through_lo():
    names = [n for n, _ in local_interfaces()]
    assert "lo" in names
    assert dict(local_interfaces())["lo"] == "127.0.0.1"
    assert route_interface("127.0.0.1") == "lo"
    assert route_interface("not-an-address.invalid") is None


def test_route_to_an_own_address_is_that_interface():
    own = [(n, a) for n, a in local_interfaces() if a and not a.startswith("127.")]
    if not own:
        pytest.skip("no non-loopback IPv4 interface here")
    name, addr = own[0]
    assert route_interface(addr) in (name, "lo")
    socket.inet_aton(addr)
