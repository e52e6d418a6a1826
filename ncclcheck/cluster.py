"""Facts from every node: probe over ssh, or load facts collected any other way; what differs.

The cluster document (``"schema": "ncclcheck/cluster"``)::

    {"schema": "ncclcheck/cluster", "schema_version": 1, "ncclcheck_version": "0.1.0",
     "created_at": "2026-11-21T12:00:00Z", "source": "ssh" | "files",
     "hosts": ["node1", "node2"],                     # every node asked (hostfile labels, or files)
     "nodes": [<facts document>, ...],                # the healthy ones, each with "probed_as"
     "failed": [{"host": "node3", "reason": "node3: timed out after 60 s"}],
     "differences": {"nccl": {"values": {"2.21.5": ["node1"], "2.18.3": ["node2"]},
                              "common": "2.21.5", "outliers": ["node2"], "differs": true}, ...}}

:func:`probe_hosts` runs ``<remote python> -m ncclcheck probe --json`` on every host over the
system ssh (:mod:`ncclcheck.remote`: bounded concurrency, connect and total timeouts, a remote
watchdog); a host that fails is listed with its reason and the others are kept.
:func:`load_sources` reads facts from files and folders written by srun, pdsh, Kubernetes jobs
or ``probe -o``: facts documents, cluster documents, or several JSON documents in one file.
"""

from __future__ import annotations

import gc
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ncclcheck import schema
from ncclcheck.errors import BadInput, NcclcheckError
from ncclcheck.schema import split_documents

FACTS = "ncclcheck/facts"
CLUSTER = "ncclcheck/cluster"
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_CONCURRENCY = 32
_SAFE_FILE = re.compile(r"[^A-Za-z0-9_.-]+")


# -- loading facts collected elsewhere -----------------------------------------------------------

def _files(paths: Iterable[str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        try:
            path.stat()
        except FileNotFoundError:
            pass
        except OSError as exc:  # a name too long, a loop of links
            raise BadInput(f"{raw}: cannot read ({exc.strerror or exc})") from None
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
            if not found:
                raise BadInput(f"{raw}: no .json files in this folder")
            out.extend(found)
        elif path.exists():
            out.append(path)
        else:
            raise BadInput(f"{raw}: no such file or folder")
    return out


def load_sources(paths: Iterable[str], with_differences: bool = True) -> dict[str, Any]:
    """A cluster document from facts files, folders of them, and cluster documents.

    Raises:
        BadInput: a file is unreadable, not JSON, not a facts or cluster document, or two
            documents describe the same hostname.
    """
    nodes: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    seen: dict[str, str] = {}
    files = _files(paths)
    if not files:
        raise BadInput("no facts files given")
    with gc_paused():
        for path in files:
            _load_file(path, nodes, failed, seen)
        return cluster_document(nodes, failed, source="files",
                                hosts=[n["hostname"] for n in nodes]
                                + [f.get("host", "?") for f in failed],
                                with_differences=with_differences)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while JSON is parsed.

    Each facts file is thousands of small dicts and lists; every few hundred allocations the
    collector walks all the objects still alive, so loading 1,000 files walks the first ones
    hundreds of times (measured: 1.4-2.6 s with it, 0.3-0.6 s without, on 1,000 files of
    ~100 KB). Parsed JSON holds no reference cycles, so nothing is left for it to collect.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load_file(path: Path, nodes: list[dict[str, Any]], failed: list[dict[str, str]],
               seen: dict[str, str]) -> None:
    """Add the facts documents of one file (facts or cluster documents) to ``nodes``."""
    from ncclcheck.infile import read_text

    text = read_text(path)
    from ncclcheck.remote.pdsh import split_pdsh

    per_host = split_pdsh(text)  # pdsh -w ... probe --json: "host: line" lines
    docs = [] if per_host else split_documents(text, str(path))
    for host, body in (per_host or {}).items():
        try:
            docs.extend(split_documents(body, f"{path} ({host})"))
        except BadInput as exc:
            last = body.splitlines()[-1][:200]
            failed.append({"host": host, "reason": f"{host}: {exc} ({last})"})
    if not docs and not failed:
        raise BadInput(f"{path}: empty file")
    for doc in docs:
        doc = schema.check(doc, str(path), (FACTS, CLUSTER))
        found = [doc] if doc["schema"] == FACTS else list(doc.get("nodes") or [])
        if doc["schema"] == CLUSTER:
            failed.extend(f for f in doc.get("failed") or [] if isinstance(f, dict))
        for facts in found:
            check_facts(facts, str(path), validate=doc is not facts)
            name = facts["hostname"]
            if name in seen:
                raise BadInput(f"{path}: node {name} appears twice (also in {seen[name]}); "
                               "probe each node once")
            seen[name] = str(path)
            nodes.append(facts)


def check_facts(facts: Any, source: str, validate: bool = True) -> dict[str, Any]:
    """A facts document's envelope and section shapes, checked before any rule reads it.

    >>> check_facts({"schema": "ncclcheck/facts", "schema_version": 1, "hostname": "n1",
    ...              "sections": {"gpu": {"status": "ok", "data": {}}}}, "f.json")["hostname"]
    'n1'
    >>> check_facts({"schema": "ncclcheck/facts", "schema_version": 1, "hostname": "n1",
    ...              "sections": {"gpu": {"status": "ok", "data": [1]}}}, "f.json")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: f.json: $.sections.gpu.data must be object or null

    Raises:
        BadInput: not a facts document, no hostname, or a section that is not ``{"status": ...,
            "data": {...} | null}``.
    """
    schema.check(facts, source, (FACTS,), validate=validate)
    name, sections = facts.get("hostname"), facts.get("sections")
    if not isinstance(name, str) or not name or not isinstance(sections, dict):
        raise BadInput(f"{source}: a facts document without hostname or sections")
    for key, sec in sections.items():
        status = sec.get("status") if isinstance(sec, dict) else None
        data = sec.get("data") if isinstance(sec, dict) else None
        if not isinstance(status, str):
            raise BadInput(f"{source}: node {name}: section {key} is not a facts section "
                           "(no status)")
        if status == "ok" and not isinstance(data, dict):
            raise BadInput(f"{source}: node {name}: section {key} is not a facts section "
                           f"(status {status!r} needs a data object)")
    return facts


# -- probing over ssh ----------------------------------------------------------------------------

def probe_argv(remote_python: str, only: str | None = None) -> list[str]:
    """What each node runs.

    >>> probe_argv("/usr/bin/python3", "nccl,ib")
    ['/usr/bin/python3', '-m', 'ncclcheck', 'probe', '--json', '--only', 'nccl,ib']
    """
    argv = [remote_python, "-m", "ncclcheck", "probe", "--json"]
    return argv + ["--only", only] if only else argv


def parse_remote_facts(label: str, stdout: str) -> dict[str, Any]:
    """The facts document a node printed; BadInput saying why when it is not one."""
    docs = split_documents(stdout, label) if stdout.strip() else []
    facts = [d for d in docs if isinstance(d, dict) and d.get("schema") == FACTS]
    if len(facts) != 1:
        raise BadInput(f"{label}: printed {len(facts)} facts documents, expected one")
    return check_facts(facts[0], label)


def probe_hosts(targets: list[Any], ssh: Any, timeout: float = DEFAULT_TIMEOUT_S,
                concurrency: int = DEFAULT_CONCURRENCY, only: str | None = None,
                run_all: Callable[..., dict[str, Any]] | None = None) -> dict[str, Any]:
    """Probe every target over ssh into a cluster document; failures are listed, never raised.

    Args:
        targets: :class:`ncclcheck.hostfile.Target` nodes.
        ssh: an :class:`ncclcheck.remote.ssh.SSH`.
        timeout: seconds per node, connection included.
    """
    if run_all is None:
        from ncclcheck.remote.ssh import run_all
    results = run_all(ssh, targets, probe_argv(ssh.remote_python, only), timeout, concurrency)
    nodes: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    names: dict[str, str] = {}
    for label, result in results.items():
        if not result.ok:
            failed.append({"host": label, "reason": result.error or f"{label}: failed"})
            continue
        try:
            facts = parse_remote_facts(label, result.stdout)
        except BadInput as exc:
            failed.append({"host": label, "reason": str(exc)})
            continue
        facts["probed_as"] = label
        name = str(facts.get("hostname"))
        if name in names:
            failed.append({"host": label, "reason": f"{label}: reports hostname {name}, like "
                                                    f"{names[name]}: the same node twice?"})
            continue
        names[name] = label
        nodes.append(facts)
    return cluster_document(nodes, failed, source="ssh", hosts=list(results))


def write_per_host(doc: dict[str, Any], folder: str) -> list[str]:
    """``--out-dir``: one facts file per healthy node (``<label>.json``), written atomically."""
    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--out-dir {folder}: cannot create ({exc.strerror or exc})") from None
    written: list[str] = []
    for facts in doc.get("nodes", []):
        name = _SAFE_FILE.sub("_", str(facts.get("probed_as") or facts.get("hostname")))
        stem = name.strip("._") or "node"
        path, n = out / f"{stem}.json", 1
        while str(path) in written:  # two labels that read the same once made safe
            n += 1
            path = out / f"{stem}-{n}.json"
        schema.dump(facts, path)
        written.append(str(path))
    return written


# -- what differs between nodes ------------------------------------------------------------------

def _gpu_model(facts: dict[str, Any]) -> str | None:
    from ncclcheck.rules.base import fact

    gpus = fact(facts, "gpu.gpus", [])
    names = sorted({str(g.get("name")) for g in gpus if g.get("name")})
    return f"{len(gpus)}x {' + '.join(names)}" if gpus and names else (f"{len(gpus)} GPUs" if gpus else None)


def _mtu(facts: dict[str, Any], names: list[str]) -> str | None:
    from ncclcheck.rules.base import fact

    ifaces = {i.get("name"): i for i in fact(facts, "network.interfaces", [])}
    mtus = [f"{n}={ifaces[n].get('mtu')}" for n in names if n in ifaces]
    return ", ".join(mtus) or None


def _ib_ports_up(facts: dict[str, Any]) -> str | None:
    from ncclcheck.rules.base import absent, fact
    from ncclcheck.rules.net_transport import active_ports

    if absent(facts, "ib"):
        return "0 (no RDMA)"
    if not fact(facts, "ib.devices"):
        return None
    ports = active_ports(facts)
    total = sum(len(d.get("ports") or []) for d in fact(facts, "ib.devices", []))
    return f"{len(ports)}/{total}"


def differences(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per field (NCCL, driver, CUDA, GPU model, MTU of the chosen interfaces, IB ports up):
    which nodes have which value, the most common value, and the outliers."""
    from ncclcheck.rules.base import fact
    from ncclcheck.rules.cluster_nccl_version_mismatch import node_version
    from ncclcheck.rules.common import outliers
    from ncclcheck.rules.net_socket_ifname import select

    try:
        names = select(nodes).names if nodes else {}
    except (AttributeError, KeyError, TypeError, ValueError):
        names = {}  # malformed interface facts: the MTU row reads as unknown
    getters: dict[str, Callable[[dict[str, Any]], Any]] = {
        "nccl": node_version,
        "driver": lambda n: fact(n, "gpu.driver_version"),
        "cuda": lambda n: fact(n, "gpu.cuda_driver_version"),
        "torch": lambda n: (fact(n, "nccl.torch") or {}).get("version"),
        "gpu": _gpu_model,
        "mtu": lambda n: _mtu(n, names.get(str(n.get("hostname")), [])),
        "ib_ports_up": _ib_ports_up,
    }
    out: dict[str, dict[str, Any]] = {}
    for field, get in getters.items():
        values: dict[str, list[str]] = defaultdict(list)
        per_host = {}
        for node in nodes:
            try:
                value = get(node)
            except (AttributeError, KeyError, TypeError, ValueError):
                value = None  # a malformed fact reads as unknown; the rules report their own
            key = "unknown" if value is None else str(value)
            values[key].append(str(node.get("hostname")))
            per_host[str(node.get("hostname"))] = key
        known = {h: v for h, v in per_host.items() if v != "unknown"}
        common, odd = outliers(known) if known else (None, [])
        out[field] = {"values": dict(values), "common": common, "outliers": odd,
                      "differs": len(set(known.values())) > 1}
    return out


def cluster_document(nodes: list[dict[str, Any]], failed: list[dict[str, str]], source: str,
                     hosts: list[str] | None = None, with_differences: bool = True) -> dict[str, Any]:
    """Assemble the cluster document (``with_differences=False``: leave ``differences`` empty,
    for a caller that works them out itself, as ``recommend`` does)."""
    from ncclcheck.probe import judge_as_cluster

    judge_as_cluster(nodes)
    diffs = differences(nodes) if with_differences else {}
    return schema.envelope(CLUSTER, created_at=schema.now_utc(), source=source,
                           hosts=hosts if hosts is not None else [n.get("hostname") for n in nodes],
                           nodes=nodes, failed=failed, differences=diffs)


def collect_cluster(hostfile: str | None, nodes: int | None, ssh_config: str | None,
                    remote_python: str | None, timeout: float, connect_timeout: float,
                    concurrency: int, from_paths: list[str], only: str | None,
                    launcher: str | None = None) -> dict[str, Any]:
    """``probe --hostfile``/``--from``/``--launcher slurm``: the cluster document."""
    if hostfile and from_paths:
        raise BadInput("use --hostfile or --from, not both")
    if from_paths:
        return load_sources(from_paths)
    if launcher == "slurm":
        import os

        from ncclcheck.probe import select
        if only:
            select(only.split(","))
        return probe_via_srun(dict(os.environ), timeout, only, remote_python)
    if not hostfile:
        raise BadInput("--launcher ssh needs --hostfile")
    from ncclcheck.hostfile import load_hostfile
    from ncclcheck.probe import select
    from ncclcheck.remote.ssh import SSH

    if only:
        select(only.split(","))  # refuse unknown sections here, not on every node
    targets = load_hostfile(str(hostfile), nodes)
    ssh = SSH(ssh_config=ssh_config, connect_timeout=min(connect_timeout, timeout),
              remote_python=remote_python)
    return probe_hosts(targets, ssh, timeout, concurrency, only)


def probe_via_srun(environ: dict[str, str], timeout: float, only: str | None,
                   python: str | None = None) -> dict[str, Any]:
    """``probe --launcher slurm``: the cluster document of every node in the allocation (srun
    from :mod:`ncclcheck.remote.slurm`, which stays below the documents it launches)."""
    import sys

    from ncclcheck.remote.slurm import (LABEL_RE, allocation_nodes, run_srun, split_labelled,
                                        srun_argv)

    nodes = allocation_nodes(environ)
    argv = srun_argv(len(nodes), probe_argv(python or sys.executable, only), False,
                     "ncclcheck-probe", timeout)
    code, out, err = run_srun(argv, timeout, env=dict(environ))
    outs, errs = split_labelled(out), split_labelled(err)
    good: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    srun_tail = [ln for ln in err.splitlines() if ln.strip() and not LABEL_RE.match(ln)]
    for task, node in enumerate(nodes):
        try:
            facts = parse_remote_facts(node, "\n".join(outs.get(task, [])))
        except BadInput as exc:
            last = (errs.get(task) or [ln for ln in srun_tail if node in ln] or [str(exc)])[-1]
            why = "timed out" if code == 124 else "failed"
            failed.append({"host": node, "reason": f"{node}: {why}: {last.strip()[:300]}"})
            continue
        facts["probed_as"] = node
        good.append(facts)
    if not good and not failed:
        raise NcclcheckError(f"srun ran nothing ({(srun_tail or ['no output'])[-1]})")
    return cluster_document(good, failed, source="slurm", hosts=nodes)


def exit_code(doc: dict[str, Any]) -> int:
    """0 when every host answered, 1 (a node failed) otherwise; the healthy results are kept."""
    return 1 if doc.get("failed") else 0
