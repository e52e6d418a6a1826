"""``ncclcheck k8s render``: every manifest (5 APIs x 3 commands x {defaults, host network with
RDMA and annotations}) validates against the pinned CRDs' openAPIV3Schema and matches its golden
file. The CRD schemas (tests/fixtures/k8s/crds, written by scripts/k8s-crd-schemas.py from the
projects' repositories at the tags in SOURCES.json) are made strict: an object with
``properties`` takes no other key unless the CRD says so (``additionalProperties``,
``x-kubernetes-preserve-unknown-fields``), as ``kubectl apply --validate=strict`` would."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import fastjsonschema
import pytest

from ncclcheck.k8s.apis import render
from ncclcheck.k8s.render import RenderOptions, to_text

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "k8s"
CRDS = FIX / "crds"
GOLDEN = FIX / "golden"
SOURCES = json.loads((CRDS / "SOURCES.json").read_text())
APIS = ("mpijob", "jobset", "trainjob", "pytorchjob", "lws")
COMMANDS = ("probe", "bench", "pairwise")
IMAGE = "ghcr.io/example/ncclcheck:0.1"
VARIANTS = {
    "defaults": [],
    "hostnet-rdma": ["--host-network", "--rdma-resource", "rdma/ib", "--rdma-count", "4",
                     "--annotation", "k8s.v1.cni.cncf.io/networks=rdma-net-1,rdma-net-2",
                     "--queue", "gpu-queue", "--topology-level",
                     "cloud.google.com/gce-topology-block", "--label-nodes"],
}


def strict(node):
    """The schema with ``additionalProperties: false`` wherever the CRD lists properties and
    keeps nothing else; ``format`` dropped (int32 and friends are not JSON Schema formats)."""
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items() if k != "format"}
    if ("properties" in node and "additionalProperties" not in node
            and not node.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def used_paths(value, path=(), out=None) -> set:
    """Every key path in ``value`` (list items as ``*``)."""
    out = set() if out is None else out
    out.add(path)
    if isinstance(value, dict):
        for k, v in value.items():
            used_paths(v, path + (k,), out)
    elif isinstance(value, list):
        for v in value:
            used_paths(v, path + ("*",), out)
    return out


def prune(node, path, used):
    """The schema with the subschemas of properties no manifest uses made ``{}`` (their names
    stay, so a misspelt key still fails): the same verdict on our manifests, and a validator
    that compiles in a second instead of half a minute (the CRDs carry whole PodSpecs)."""
    if isinstance(node, list):
        return [prune(n, path, used) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "properties":
            out[k] = {name: (prune(sub, path + (name,), used) if path + (name,) in used else {})
                      for name, sub in v.items()}
        elif k == "items":
            out[k] = prune(v, path + ("*",), used)
        elif k == "additionalProperties" and isinstance(v, dict):  # a map: every key's paths
            n = len(path)
            merged = used | {path + ("*",) + p[n + 1:] for p in used
                             if len(p) > n and p[:n] == path}
            out[k] = prune(v, path + ("*",), merged)
        else:
            out[k] = prune(v, path, used) if k in ("anyOf", "allOf", "oneOf") else v
    return out


def all_manifests() -> list[dict]:
    out = []
    for api in APIS:
        for command in COMMANDS:
            out += render(RenderOptions(command, api, IMAGE))
            out += render(RenderOptions(command, api, IMAGE, host_network=True,
                                        rdma_resource="rdma/ib", queue="q",
                                        label_nodes=(api, command) != ("mpijob", "pairwise"),
                                        topology_level="x/y", annotations={"a/b": "c"}))
    return out


@functools.lru_cache(maxsize=None)
def validator(kind: str):
    api = next(a for a, s in SOURCES.items() if s["kind"] == kind)
    used = set()
    for obj in all_manifests():
        if obj["kind"] == kind:
            used_paths(obj, (), used)
    used.add(("spec", "replicatedJobs", "*", "template", "spec", "template", "spec",
              "hostNetwrok"))  # test_a_broken_manifest_fails_the_schema's key
    schema = prune(strict(json.loads((CRDS / f"{api}.json").read_text())), (), used)
    return fastjsonschema.compile(schema)


def check_object(obj: dict) -> None:
    source = next((s for s in SOURCES.values() if s["kind"] == obj["kind"]), None)
    if source is None:  # core objects: ServiceAccount, ClusterRole, ClusterRoleBinding
        assert obj["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"), obj["kind"]
        return
    assert obj["apiVersion"] == f"{source['group']}/{source['version']}"
    validator(obj["kind"])(obj)


def cli_render(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ncclcheck", "k8s", "render", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("api", APIS)
def test_rendered_manifest_validates_and_matches_golden(api, command, variant, update_golden):
    from ncclcheck.cli.main import cli
    from click.testing import CliRunner

    argv = ["k8s", "render", command, "--api", api, "--image", IMAGE, *VARIANTS[variant]]
    if (api, command) == ("mpijob", "pairwise") and "--label-nodes" in argv:  # refused
        argv.remove("--label-nodes")
    result = CliRunner().invoke(cli, argv + ["--format", "json"])
    assert result.exit_code == 0, result.output
    objects = json.loads(result.output)["items"]
    for obj in objects:
        check_object(obj)
    text = CliRunner().invoke(cli, argv).output
    golden = GOLDEN / f"{api}-{command}-{variant}.yaml"
    if update_golden or not golden.exists():
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()
    try:
        import yaml  # not a dependency: only where the developer has it
    except ImportError:
        return
    assert list(yaml.safe_load_all(text)) == objects


def test_host_network_always_brings_cluster_first_with_host_net():
    for api in APIS:
        text = to_text(render(RenderOptions("bench", api, IMAGE, host_network=True)), "json")
        pods = text.count('"hostNetwork": true')
        assert pods and pods == text.count('"dnsPolicy": "ClusterFirstWithHostNet"'), api


def test_mpijob_launcher_runs_mpirun_one_rank_per_node_without_a_gpu():
    (job,) = render(RenderOptions("bench", "mpijob", IMAGE, nodes=4))
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][:8] == ["mpirun", "--allow-run-as-root", "-np", "4", "--map-by",
                                       "ppr:1:node", "--bind-to", "none"]
    assert "resources" not in launcher
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 4
    assert worker["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": 8}


def test_mpijob_worker_sshd_gives_ssh_sessions_the_pods_variables():
    """The worker's ssh sessions get no container env (sshd builds their environment), so its
    sshd sets the role and every downward-API variable with one ``SetEnv``; each ``$(VAR)`` names
    a variable of the container (the kubelet leaves an unknown one unexpanded)."""
    import re

    for command in ("probe", "bench", "pairwise"):
        (job,) = render(RenderOptions(command, "mpijob", IMAGE))
        worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        argv = worker["command"]
        assert argv[:3] == ["/usr/sbin/sshd", "-De", "-o"] and len(argv) == 4
        assert [a for a in argv if a.startswith("SetEnv=")] == [argv[3]]  # sshd keeps the first
        pairs = dict(p.split("=", 1) for p in argv[3][len("SetEnv="):].split(" "))
        names = {e["name"] for e in worker["env"]}
        assert pairs == {"K_MPI_JOB_ROLE": "worker", **{v: f"$({v})" for v in
                                                        ("POD_NAME", "POD_NAMESPACE", "NODE_NAME")}}
        assert set(re.findall(r"\$\((\w+)\)", argv[3])) <= names


def test_a_broken_manifest_fails_the_schema():
    """The strict schemas do catch a misspelt field (a test that cannot fail is a defect)."""
    (job,) = render(RenderOptions("bench", "jobset", IMAGE))
    job["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["hostNetwrok"] = 1
    with pytest.raises(fastjsonschema.JsonSchemaException):
        check_object(job)


@pytest.mark.parametrize("args, message", [
    (["--api", "slurm"], "--api 'slurm'"),
    (["--api", "lws", "--annotation", "bad key=1"], "annotation key 'bad key'"),
    (["--api", "lws", "--rdma-resource", "rdma ib"], "--rdma-resource"),
    (["--api", "lws", "--nodes", "0"], "--nodes 0"),
    (["--api", "lws", "--label-nodes"], "needs --host-network"),
    (["--api", "mpijob", "--label-nodes", "--host-network"], None),
])
def test_bad_options_are_one_line_exit_2(args, message):
    if message is None:  # the MPIJob hunt with --label-nodes
        out = cli_render("pairwise", "--image", IMAGE, *args)
        assert out.returncode == 2 and "pod DNS names" in out.stderr
        return
    out = cli_render("bench", "--image", IMAGE, *args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr


def test_a_bad_value_under_a_map_of_replica_specs_fails_the_schema():
    """mpiReplicaSpecs is a map (additionalProperties): the Worker's container is checked too."""
    (job,) = render(RenderOptions("bench", "mpijob", IMAGE))
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["volumeMounts"][0]["mountPath"] = 7
    with pytest.raises(fastjsonschema.JsonSchemaException):
        check_object(job)
