"""Facts of two CPU nodes with three shared links, a management NIC of their own and docker0
(the netns acceptance cluster's shape), built with the cluster rule fixtures' helpers."""

from __future__ import annotations

from pathlib import Path

from scriptload import load

fx = load(Path("tests/fixtures/facts/make_cluster_rule_fixtures.py"), "cluster_rule_fixtures")

LINKS = ("eno1", "ens1f0", "ens2f0")


def node(i, gpus=0, links=LINKS, ib=None):
    ifaces = [fx.iface(name, addr=f"198.18.{k}.{10 + i}", speed=10000, driver="veth",
                       default=k == 0) for k, name in enumerate(links)]
    ifaces += [fx.iface("mgmt0", addr=f"198.19.{i}.2", speed=10000, driver="veth"),
               fx.iface("docker0", "docker", "198.18.255.1", driver=None)]
    sections = {"network": fx.network(*ifaces), "nccl": fx.nccl(loaded=False),
                "ib": ib or fx.UNAVAILABLE_IB,
                "gpu": fx.ok({"count": gpus, "gpus": []})}
    return fx.node(f"node{i}", **sections)


def cluster(gpus=0, **kw):
    from ncclcheck.cluster import cluster_document

    return cluster_document([node(1, gpus, **kw), node(2, gpus, **kw)], [], "test",
                            with_differences=False)
