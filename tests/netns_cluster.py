"""Network-namespace test clusters for pytest: ``scripts/netns-cluster`` as a module and fixtures.

Use in a test module (tests/ is on sys.path through conftest.py)::

    import pytest
    from conftest import needs_netns
    from netns_cluster import make_cluster  # noqa: F401  (a module-scoped fixture)

    pytestmark = [pytest.mark.netns, needs_netns]

    def test_two_nodes(make_cluster):
        c = make_cluster(2, rate="400mbit")      # same arguments -> the same cluster, per module
        ssh = SSH(ssh_config=c.ssh_config)
        ... c.nodes[0].name, c.nodes[0].ns, c.nodes[0].addr, c.hostfile, c.set_rate("node1", ...)

``make_cluster(n, fresh=False, **kw)`` takes :meth:`Cluster.up`'s keywords (``rate``, ``links``,
``mgmt``, ``fake_docker0``, ``hostname_prefix``); every cluster it made is torn down when the
module's tests end. Names are random, so test runs in parallel do not collide.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "netns-cluster"


def _load():
    if "ncclcheck_netns_cluster" in sys.modules:
        return sys.modules["ncclcheck_netns_cluster"]
    loader = importlib.machinery.SourceFileLoader("ncclcheck_netns_cluster", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[loader.name] = module  # dataclasses need the module registered
    loader.exec_module(module)
    return module


impl = _load()
Cluster = impl.Cluster
ClusterError = impl.ClusterError
Node = impl.Node
LinkSpec = impl.LinkSpec
cluster = impl.cluster
teardown = impl.teardown
netns_pids = impl.netns_pids


def _alive(pid: object) -> bool:
    import os

    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_orphans() -> list[str]:
    """Tear down the clusters (namespaces, sshd, slurmctld, slurmd, munged) that an earlier test
    run left when it was killed: those whose state names an owner process that is gone. Only
    clusters this fixture made carry ``owner_pid``; a cluster started by hand is never touched."""
    import json

    reaped = []
    for path in impl.STATE_ROOT.glob("ncclcheck-netns-*/state.json"):
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(state, dict) and "owner_pid" in state and not _alive(state["owner_pid"]):
            name = path.parent.name.removeprefix("ncclcheck-netns-")
            teardown(name)
            reaped.append(name)
    return reaped


def _owned(c):
    """Mark ``c`` as this test process's (see :func:`reap_orphans`); tear it down at exit too."""
    import atexit
    import os

    c.state["owner_pid"] = os.getpid()
    c._save()
    atexit.register(teardown, c.name)  # a run stopped by SIGTERM or an error still cleans up
    return c


@pytest.fixture(scope="module")
def make_cluster():
    """A factory ``make_cluster(n=2, fresh=False, **kw) -> Cluster``; clusters live for the module.

    Calls with the same arguments share one cluster unless ``fresh=True``. Tests that change a
    shared cluster (``set_rate``) should restore it or ask for a fresh one. Every cluster is torn
    down in the fixture's finalizer and, should that not run, at exit (``atexit``); one left by
    a killed run is torn down by the next (:func:`reap_orphans`, at import).
    """
    made: dict = {}
    fresh_ones: list = []

    def make(n: int = 2, fresh: bool = False, **kw):
        key = (n, tuple(sorted((k, repr(v)) for k, v in kw.items())))
        if fresh:
            c = _owned(Cluster.up(n, **kw))
            fresh_ones.append(c)
            return c
        if key not in made:
            made[key] = _owned(Cluster.up(n, **kw))
        return made[key]

    try:
        yield make
    finally:
        for c in list(made.values()) + fresh_ones:
            c.down()


@pytest.fixture(scope="module")
def two_nodes(make_cluster):
    """A shared 2-node cluster with unlimited links (``make_cluster(2)``)."""
    return make_cluster(2)


slurm = impl.netns_slurm


@pytest.fixture(scope="module")
def slurm_cluster(make_cluster, tmp_path_factory, request):
    """A 2-node cluster (400 Mbit/s links) with real Slurm: ``(cluster, env)``, where ``env``
    has ``SLURM_CONF`` for srun/salloc/scontrol. Node names resolve nowhere but in Slurm's
    NodeAddr. Skips, saying why, when Slurm or munge is not installed (CI: fails instead).

    A module that sets ``SLURM_JOBS_PER_CORE = N`` (N > 1) gets a partition that runs up to N
    jobs on each core at once (``OverSubscribe=FORCE:N``, slurm.conf(5)), so independent jobs
    run side by side; without it, one job holds the cores it was given, as before."""
    import os
    import subprocess

    missing = slurm.missing_tools()
    if missing and not os.environ.get("CI"):
        pytest.skip(f"not installed: {', '.join(missing)} ({slurm.INSTALL})")
    c = make_cluster(2, rate="400mbit", fresh=True)
    slurm.start(c.state)
    env = slurm.client_env(c.state_dir)
    per_core = getattr(request.module, "SLURM_JOBS_PER_CORE", 1)
    if per_core > 1:
        try:
            subprocess.run(["scontrol", "update", "PartitionName=p",
                            f"OverSubscribe=FORCE:{int(per_core)}"], env=env, check=True,
                           timeout=30, capture_output=True)
        except BaseException:
            slurm.stop(c.state)
            raise
    # srun hands its environment to the tasks: their kept rank logs go under pytest's folder
    env["TMPDIR"] = str(tmp_path_factory.mktemp("slurm-tmpdir"))
    yield c, env
    slurm.stop(c.state)


if __import__("os").geteuid() == 0:  # what an earlier, killed run left under its own names
    reap_orphans()
