"""The corpus: real NCCL logs from public threads, each with its source URL and expected diagnosis.

Every ``tests/fixtures/logs/<name>.log`` has a ``<name>.expected.json`` beside it; the exact set of
finding ids must match (no extras on healthy logs), and so must the optional expectations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclcheck.diagnose import diagnose_files
from ncclcheck.logparse.nccl import parse_nccl_line
from ncclcheck.logparse.prefix import parse_prefix
from ncclcheck.signatures import BY_ID

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
CASES = sorted(p.stem for p in LOGS.glob("*.log"))

#: one id per row of nccl-knowledge §9 that issue 5 lists; the corpus must show each at least once.
REQUIRED_IDS = {
    "limits-shm-too-small", "log-no-socket-interface", "net-socket-ifname",
    "log-net-plugin-failed", "log-ib-completion-error", "ib-roce-gid-index",
    "limits-memlock-limited", "log-connection-refused", "log-duplicate-gpu",
    "cluster-nccl-version-mismatch", "net-transport", "log-nvls-failure",
    "log-cuda-error", "log-watchdog-timeout", "nccl-ibverbs-unloadable",
    "log-silent-socket-fallback",
}


def expected(name: str) -> dict:
    return json.loads((LOGS / f"{name}.expected.json").read_text())


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:
    return {name: diagnose_files([str(LOGS / f"{name}.log")]) for name in CASES}


def test_corpus_is_there():
    assert len(CASES) >= 25
    for name in CASES:
        exp = expected(name)
        assert exp["source"].startswith("https://"), name
        assert isinstance(exp["expect_ids"], list) and isinstance(exp["healthy"], bool), name
        assert set(exp["expect_ids"]) <= set(BY_ID), (name, set(exp["expect_ids"]) - set(BY_ID))
    assert not {p.stem for p in LOGS.glob("*.expected.json")} - {f"{c}.expected" for c in CASES}


def test_corpus_covers_every_failure_family_and_healthy_logs():
    seen = set().union(*(expected(n)["expect_ids"] for n in CASES))
    assert REQUIRED_IDS <= seen, REQUIRED_IDS - seen
    assert sum(expected(n)["healthy"] for n in CASES) >= 3


def test_corpus_covers_launcher_prefixes():
    kinds = set()
    for name in CASES:
        for line in (LOGS / f"{name}.log").read_text(errors="replace").splitlines():
            prefix, _ = parse_prefix(line)
            if prefix.rank is not None:
                kinds.add("rank")
            if prefix.tag is not None:
                kinds.add("tag")
            if prefix.host is not None:
                kinds.add("host")
            if prefix.stamped:
                kinds.add("timestamp")
            if line.startswith("[1,"):
                kinds.add("mpi")
    assert kinds >= {"rank", "tag", "host", "timestamp", "mpi"}


@pytest.mark.parametrize("name", CASES)
def test_diagnosis_matches_expectation(name, docs):
    doc, exp = docs[name], expected(name)
    ids = sorted(f["id"] for f in doc["findings"])
    assert ids == sorted(exp["expect_ids"])
    assert doc["healthy"] is exp["healthy"]
    if "expect_verdict" in exp:
        assert doc["summary"]["verdict"].startswith(exp["expect_verdict"])
    severities = {f["id"]: f["severity"] for f in doc["findings"]}
    for fid, sev in exp.get("expect_severity", {}).items():
        assert severities[fid] == sev, fid
    if "expect_versions" in exp:
        assert doc["summary"]["nccl_versions"] == exp["expect_versions"]
    found = {f["id"]: f for f in doc["findings"]}
    for fid, words in exp.get("expect_text", {}).items():     # the cause and fix, not only the id
        text = " ".join(found[fid][k] for k in ("message", "cause", "fix"))
        for word in words:
            assert word in text, (fid, word, text)
    if "expect_networks" in exp:
        assert doc["summary"]["networks"] == exp["expect_networks"]
    if "expect_hosts" in exp:
        assert doc["summary"]["hosts"] == exp["expect_hosts"]
    if "expect_ranks" in exp:
        assert sorted({r for f in doc["findings"] for r in f["ranks"]}) == exp["expect_ranks"]
    if "expect_ranks_listed" in exp:
        assert sorted(r["rank"] for r in doc["ranks"] if r["rank"] is not None) == \
            exp["expect_ranks_listed"]
    assert "parser" not in doc


@pytest.mark.parametrize("name", CASES)
def test_findings_cite_and_point_at_real_lines(name, docs):
    lines = (LOGS / f"{name}.log").read_text(errors="replace").splitlines()
    for f in docs[name]["findings"]:
        assert f["cause"] and f["fix"] and f["docs"] and f["message"]
        assert "http" in f["docs"] or "src/" in f["docs"]
        assert f["severity"] in ("info", "warning", "error")
        assert f["count"] >= 1
        assert 1 <= len(f["evidence"]) <= 5, f["id"]
        for ev in f["evidence"]:
            assert ev["file"].endswith(f"{name}.log")
            assert ev["text"].rstrip("…") in lines[ev["line"] - 1], (f["id"], ev)


#: logs without findings: healthy ones, and clean ones that stop before Init COMPLETE.
HEALTHY = [name for name in CASES if not expected(name)["expect_ids"]]
#: How each launcher would print a line of process number ``n`` on ``host`` (NCCL >= 2.26 puts
#: ``[%F %T] `` in front of a line when NCCL_DEBUG_TIMESTAMP_LEVELS includes its level).
LAUNCHERS = {
    "torchrun": lambda n, host, line: f"[rank{n}]:{line}",
    "mpi": lambda n, host, line: f"[1,{n}]<stdout>:{line}",
    "slurm": lambda n, host, line: f"{host}: {line}",
    "timestamp": lambda n, host, line: f"[2025-07-21 19:05:{n % 60:02d}] {line}",
}
#: Logs whose lines carry Ray's own ``(RayWorkerWrapper pid=N)`` prefix, which the re-prefixing
#: keeps: a Slurm ``host: `` label then stands before Ray's prefix, not before the NCCL header, and
#: names no node (srun does not wrap Ray workers' output that way); the rest is checked as usual.
RAY_PREFIXED = {"healthy-socket-2.21-vllm-eks-init"}
#: Per-rank facts a launcher prefix adds or renames (the launcher's rank, its host label).
PREFIX_FACTS = ("rank", "node")


def without(facts: dict, *keys: str) -> dict:
    """``facts`` (or each value of a dict of facts) without ``keys``."""
    if all(isinstance(v, dict) for v in facts.values()) and facts:
        return {k: without(v, *keys) for k, v in facts.items()}
    return {k: v for k, v in facts.items() if k not in keys}


def reprefixed(name: str, launcher: str) -> str:
    """A healthy corpus log as ``launcher`` would print it: each line keeps its own text and gets
    the prefix of the process that printed it (lines without an NCCL header belong to the last
    process seen, as diagnose attributes them; lines before any process stay bare)."""
    out, order, last = [], {}, None
    for line in (LOGS / f"{name}.log").read_text().splitlines():
        _, text = parse_prefix(line)                   # drop the log's own launcher prefix
        head = parse_nccl_line(text)
        if head is not None and head.host and head.pid is not None:
            last = (head.host, head.pid)
            order.setdefault(last, len(order))
        if last is None:                               # before any process: nobody's line
            out.append(text)                           # (mpirun's prompt, nccl-tests' header)
            continue
        out.append(LAUNCHERS[launcher](order[last], last[0], text))
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_logs_stay_healthy_under_every_launcher(name, launcher, docs, tmp_path):
    plain = docs[name]
    path = tmp_path / f"{name}.{launcher}.log"
    path.write_text(reprefixed(name, launcher))
    doc = diagnose_files([str(path)])
    assert doc["healthy"] is plain["healthy"] and doc["findings"] == [], doc["findings"]
    assert doc["summary"]["verdict"] == plain["summary"]["verdict"]
    assert without(doc["hosts"], "ranks") == without(plain["hosts"], "ranks")
    assert {r["key"]: without(r, *PREFIX_FACTS) for r in doc["ranks"]} == \
        {r["key"]: without(r, *PREFIX_FACTS) for r in plain["ranks"]}
    if launcher == "slurm" and name not in RAY_PREFIXED:
        assert all(r["node"] == r["host"] for r in doc["ranks"])
    if launcher in ("torchrun", "mpi"):
        assert sorted(r["rank"] for r in doc["ranks"]) == list(range(len(doc["ranks"])))


def test_reprefixing_really_changes_the_lines():
    """The variants above are not the plain log in disguise."""
    name = HEALTHY[0]
    plain = (LOGS / f"{name}.log").read_text()
    for launcher in LAUNCHERS:
        text = reprefixed(name, launcher)
        assert text != plain
        # every line carries a prefix the parser sees (a ``host: `` label only counts in front of
        # an NCCL header, so that ``RuntimeError: ...`` is not taken for a host)
        assert all(parse_prefix(line)[0] != parse_prefix("")[0] for line in text.splitlines()
                   if launcher != "slurm" or parse_nccl_line(line)), launcher


# -- issue 24: real healthy logs of NCCL 2.21-2.30, per transport --------------------------------
#: healthy corpus logs whose NCCL version (``nccl_version``: printed in the log, or stated by the
#: thread / fixed by a line format, as each fixture's notes say) is 2.21-2.30, by transport.
RECENT_HEALTHY = {name: expected(name) for name in HEALTHY
                  if (2, 21) <= tuple(int(x) for x in expected(name).get("nccl_version", "0.0").split(".")[:2])
                  <= (2, 30)}


def test_real_healthy_logs_of_recent_nccl_cover_every_transport():
    """The real samples found so far (issue 24): IB, RoCE (SR-IOV pods) and sockets at 2.21,
    EFA at 2.26, 2.27 and 2.29 (aws-ofi-nccl 1.18, Slurm), RoCE at 2.28 (two DGX Spark); a real
    2.28.9 Socket job is tests/fixtures/device/h200/two-hostid-socket. No public healthy IB log of
    2.28-2.30 was found: the synthetic matrix in test_healthy_versions.py holds those formats. A
    cut that stops before Init COMPLETE is 'no failure seen', never a warning."""
    transports = {exp["transport"] for exp in RECENT_HEALTHY.values()}
    assert {"IB", "RoCE", "EFA", "Socket"} <= transports, transports
    newest = {exp["transport"] for exp in RECENT_HEALTHY.values()
              if tuple(int(x) for x in exp["nccl_version"].split(".")[:2]) >= (2, 28)}
    assert {"RoCE", "EFA"} <= newest, newest
    for name, exp in RECENT_HEALTHY.items():
        assert exp["transport"] in ("IB", "RoCE", "EFA", "Socket"), name
        assert exp["expect_ids"] == [], name
        assert exp["healthy"] is True or exp["expect_verdict"] == "no failure seen, but 0/", name
        if "expect_versions" in exp:
            assert exp["expect_versions"] == [exp["nccl_version"]], name


def test_variables_the_aws_plugin_sets_are_not_debugging_leftovers(docs, tmp_path):
    """aws-ofi-nccl adds NCCL_BUFFSIZE, NCCL_P2P_NET_CHUNKSIZE and NCCL_PROTO=simple itself
    (include/nccl_ofi_environ.h 'Adding %s to environment'); NCCL then reports them 'set by
    environment'. Telling the user to unset them is wrong (EFA without 128-byte ordering needs
    Simple). Without the plugin's lines, the same settings are the user's and still reported."""
    name = "healthy-efa-2.27-eks-pod"
    text = (LOGS / f"{name}.log").read_text()
    assert "NCCL_PROTO set by environment to simple" in text
    assert not [f for f in docs[name]["findings"] if f["id"] == "env-debug-vars-set"]
    mine = tmp_path / "user-set.log"
    mine.write_text("".join(line for line in text.splitlines(keepends=True)
                            if "to environment" not in line))
    (f,) = [f for f in diagnose_files([str(mine)])["findings"] if f["id"] == "env-debug-vars-set"]
    assert f["severity"] == "info"
    assert "NCCL_BUFFSIZE=8388608" in f["message"] and "NCCL_PROTO=simple" in f["message"]


#: real logs of runs that worked (the source says so) which are not in HEALTHY: the excerpt stops
#: before Init COMPLETE, or diagnose adds an info note. None may give a warning or an error, plain
#: or under any launcher's prefixes (issue 24: the NCCL 2.28+ line formats among them).
RUN_OK = [name for name in CASES if expected(name).get("run_ok")]


@pytest.mark.parametrize("launcher", [None, *sorted(LAUNCHERS)])
@pytest.mark.parametrize("name", RUN_OK)
def test_real_runs_that_worked_give_no_warning(name, launcher, docs, tmp_path):
    doc = docs[name]
    if launcher:
        path = tmp_path / f"{name}.{launcher}.log"
        path.write_text(reprefixed(name, launcher))
        doc = diagnose_files([str(path)])
        assert sorted(f["id"] for f in doc["findings"]) == sorted(expected(name)["expect_ids"])
    assert [(f["id"], f["severity"]) for f in doc["findings"] if f["severity"] != "info"] == []
    assert expected(name)["expect_versions"] and "transport" in expected(name)
