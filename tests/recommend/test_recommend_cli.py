"""``ncclcheck recommend``, ``rules`` and ``probe --from`` on the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from recommend_scenarios import assemble

from ncclcheck.envformat import parse_env_text
from ncclcheck.exitcodes import ExitCode


def ncclcheck(*args, **kw):
    return subprocess.run([sys.executable, "-m", "ncclcheck", *args], capture_output=True,
                          text=True, timeout=120, **kw, check=False)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("facts")
    out = {}
    for name in ("roce-pair", "gid-conflict", "ib-broken-on-one"):
        doc = assemble(name)
        out[name] = folder / f"{name}.json"
        out[name].write_text(json.dumps(doc))
        per_node = folder / name
        per_node.mkdir()
        for node in doc["nodes"]:
            (per_node / f"{node['hostname']}.json").write_text(json.dumps(node))
    return out


def test_stdout_is_only_the_env_file(files):
    out = ncclcheck("recommend", "--probe", str(files["roce-pair"]))
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln]
    assert all(ln.startswith("#") or "=" in ln for ln in lines)
    # the rules' lines, then the droppable section for the next hang (issue 22)
    rules, _, section = out.stdout.partition("# --- make the next hang explainable")
    assert parse_env_text(rules) == {"NCCL_SOCKET_IFNAME": "=bond0,bond0.100",
                                     "NCCL_NET": "IB", "NCCL_IB_TIMEOUT": "20",
                                     "NCCL_IB_TC": "106"}  # ib-roce-lossless: PFC on prio 3
    assert "TORCH_NCCL_DUMP_ON_TIMEOUT" in parse_env_text(section)
    assert "recommendation for 2 node(s)" in out.stderr and "NCCL_SOCKET_IFNAME" in out.stderr


def test_greedy_probe_takes_a_glob_and_explain_gives_reasons(files):
    nodes = sorted(str(p) for p in (files["roce-pair"].parent / "roce-pair").iterdir())
    out = ncclcheck("recommend", "--probe", *nodes, "--explain")
    assert out.returncode == 0, out.stderr
    assert "why:" in out.stderr and "see: https://" in out.stderr
    assert parse_env_text(out.stdout)["NCCL_NET"] == "IB"


@pytest.mark.parametrize("fmt, check", [
    ("shell", lambda t: "export NCCL_SOCKET_IFNAME==bond0,bond0.100" in t),
    ("deepspeed", lambda t: t.splitlines()[0].startswith("NCCL_") and "#" not in t),
    ("json", lambda t: json.loads(t)["schema"] == "ncclcheck/recommendation"),
])
def test_formats(files, fmt, check):
    out = ncclcheck("recommend", "--probe", str(files["roce-pair"]), "--format", fmt, "-q")
    assert out.returncode == 0 and out.stderr == "" and check(out.stdout), out.stdout


def test_output_file_and_fail_on(files, tmp_path):
    target = tmp_path / "nccl.env"
    out = ncclcheck("recommend", "--probe", str(files["gid-conflict"]), "-o", str(target),
                    "--fail-on", "error", "-q")
    assert out.returncode == ExitCode.FINDINGS and out.stdout == ""
    assert "NOT SET NCCL_IB_GID_INDEX" in target.read_text()


def test_candidates_dir_writes_the_tie_files(files, tmp_path):
    out = ncclcheck("recommend", "--probe", str(files["ib-broken-on-one"]), "--format", "json",
                    "--candidates-dir", str(tmp_path / "c"), "-q")
    tie = json.loads(out.stdout)["ties"][0]
    assert len(tie["files"]) == 8 and all(str(tmp_path) in f for f in tie["files"])
    assert parse_env_text(Path(tie["files"][0]).read_text())["NCCL_SOCKET_IFNAME"] == "=ibp26s0"
    assert tie["decide_with"].endswith(tie["files"][-1])


def test_a_tie_without_candidates_dir_points_at_it_not_at_missing_files(files, tmp_path):
    """Issue 27 item 13: the --compare files exist only once --candidates-dir wrote them."""
    out = ncclcheck("recommend", "--probe", str(files["ib-broken-on-one"]), cwd=tmp_path)
    said = " ".join(out.stderr.split())
    assert "decide with: recommend --candidates-dir DIR writes NCCL_SOCKET_IFNAME-1.env" in said
    assert "--compare DIR/NCCL_SOCKET_IFNAME-*.env" in said
    assert "--compare NCCL_SOCKET_IFNAME-1.env" not in said
    assert not list(tmp_path.iterdir())


def test_findings_take_the_whole_width_at_80_columns(files):
    """Issue 27 item 11: each finding's message under its header, not in a 30-column cell."""
    import os

    out = ncclcheck("recommend", "--probe", str(files["ib-broken-on-one"]),
                    env={**os.environ, "COLUMNS": "80"})
    lines = out.stderr.splitlines()
    # (an assignment stays one line, to be copied whole)
    assert [ln for ln in lines if len(ln) > 80 and not ln.startswith("  NCCL_")] == []
    head = next(i for i, ln in enumerate(lines) if ln.startswith("warning  nccl-version-multiple"))
    assert "on h100-node-01, h100-node-02" in lines[head]
    body = []
    for ln in lines[head + 1:]:
        if not ln.startswith("         "):
            break
        body.append(ln.strip())
    assert " ".join(body).startswith("2 NCCL versions on this node: 2.20.5"), body
    assert len(body) <= 8 and len(lines[head + 2].rstrip()) > 60, body


@pytest.mark.parametrize("args, needle", [
    (["recommend", "--probe", "/no/such.json"], "no such file"),
    (["recommend", "--probe"], "requires an argument"),
    (["recommend", "--bench", "/no/such.json", "--probe", "/no/such/either.json"], "no such"),
    (["recommend", "--format", "toml"], "Invalid value"),
    (["probe", "--from", "/no/such/dir"], "no such file"),
    (["probe", "--hostfile", "/no/such/hosts"], "cannot read hostfile"),
])
def test_bad_input_is_one_line_exit_2(args, needle):
    out = ncclcheck(*args)
    assert out.returncode == ExitCode.USAGE, (out.returncode, out.stderr)
    assert needle in out.stderr and "Traceback" not in out.stderr


def test_bench_must_be_a_bench_document(files):
    out = ncclcheck("recommend", "--probe", str(files["roce-pair"]), "--bench",
                    str(files["roce-pair"]))
    assert out.returncode == ExitCode.USAGE and "expected ncclcheck/bench" in out.stderr


def test_rules_lists_every_rule():
    from ncclcheck.rules import ALL_RULES

    out = ncclcheck("rules", "--json")
    assert [r["id"] for r in json.loads(out.stdout)] == [r.id for r in ALL_RULES]
    table = ncclcheck("rules")
    assert table.returncode == 0 and "net-socket-ifname" in table.stdout


def test_probe_from_shows_what_differs(tmp_path):
    doc = assemble("version-drift")
    for node in doc["nodes"]:
        (tmp_path / f"{node['hostname']}.json").write_text(json.dumps(node))
    out = ncclcheck("probe", "--from", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    cluster = json.loads(out.stdout)
    assert cluster["schema"] == "ncclcheck/cluster" and len(cluster["nodes"]) == 3
    assert "h100-node-03=2.18.3" in out.stderr  # the outlier, named
    out = ncclcheck("probe", "--from", *sorted(str(p) for p in tmp_path.iterdir()))
    assert "3 node(s) probed, 0 failed" in out.stdout


def test_recommend_never_imports_torch(files):
    code = ("import sys\nfrom ncclcheck.cli.main import main\n"
            "try:\n"
            f"    main(['recommend', '-q', '--probe', {str(files['roce-pair'])!r}])\n"
            "except SystemExit:\n    pass\n"
            "sys.stderr.write('LOADED:' + ','.join(m for m in sys.modules if m.split('.')[0] == 'torch'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.stderr.rsplit("LOADED:", 1)[-1] == "", out.stderr[-500:]


def test_a_cluster_where_every_host_failed_is_an_error(tmp_path):
    from ncclcheck.cluster import cluster_document

    path = tmp_path / "c.json"
    path.write_text(json.dumps(cluster_document([], [{"host": "n1", "reason": "n1: timed out"}],
                                                source="ssh")))
    out = ncclcheck("recommend", "--probe", str(path))
    assert out.returncode == ExitCode.ERROR and out.stdout == ""
    assert "every host failed" in out.stderr and "n1: timed out" in out.stderr


def test_facts_a_rule_cannot_read_are_refused_naming_the_file_and_path(files, tmp_path):
    doc = json.loads(files["roce-pair"].read_text())
    doc["nodes"][1]["sections"]["network"]["data"]["interfaces"] = {"bond0": "up"}
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(doc))
    out = ncclcheck("recommend", "--probe", str(path))
    assert out.returncode == ExitCode.USAGE and out.stdout == "", out.stderr
    assert out.stderr.strip().endswith(
        f"{path}: $.nodes[1].sections.network.data.interfaces must be array or null")


def test_a_rule_that_fails_on_valid_facts_is_named_in_the_file_and_fail_on(files):
    """The safety net behind the schema: a rule that raises on valid facts is a rule error."""
    path = files["roce-pair"]
    boom = ("import sys\n"
            "from ncclcheck.rules import net_socket_ifname as r\n"
            "def boom(nodes):\n    raise KeyError('interfaces')\n"
            "object.__setattr__(r.RULE, 'check', boom)\n"
            "from ncclcheck.cli.main import main\nmain(sys.argv[1:])\n")

    def ncclcheck(*args):
        return subprocess.run([sys.executable, "-c", boom, *args], capture_output=True,
                              text=True, timeout=120, check=False)

    out = ncclcheck("recommend", "--probe", str(path))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-1000:]
    assert "NCCL_SOCKET_IFNAME" not in parse_env_text(out.stdout)
    assert "# NOT CHECKED net-socket-ifname: the rule failed on these facts" in out.stdout
    assert "rule error net-socket-ifname" in out.stderr
    out = ncclcheck("recommend", "--probe", str(path), "--fail-on", "error", "-q")
    assert out.returncode == ExitCode.FINDINGS


def test_malformed_sections_are_one_line_exit_2(tmp_path):
    path = tmp_path / "n1.json"
    path.write_text(json.dumps({"schema": "ncclcheck/facts", "schema_version": 1, "hostname": "n1",
                                "sections": {"gpu": {"status": "ok", "data": "x"}}}))
    out = ncclcheck("recommend", "--probe", str(path))
    assert out.returncode == ExitCode.USAGE and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "$.sections.gpu.data must be object" in out.stderr


def test_stderr_names_a_per_node_finding_once_with_every_node(files):
    out = ncclcheck("recommend", "--probe", str(files["roce-pair"]))
    memlock = [ln for ln in out.stderr.splitlines() if "limits-memlock-limite" in ln]
    assert len(memlock) == 1, out.stderr  # one row for both nodes
    notes = [ln for ln in out.stderr.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1 and "roce-node-01, roce-node-02" in out.stderr


def test_verify_off_the_cluster_writes_nothing_and_says_why(files, tmp_path):
    from ncclcheck.recommend.verify import find_libnccl

    if find_libnccl() is None:
        pytest.skip("needs libnccl (pip install nvidia-nccl-cu12)")
    target = tmp_path / "nccl.env"
    out = ncclcheck("recommend", "--probe", str(files["roce-pair"]), "--verify", "-q",
                    "-o", str(target))
    assert out.returncode == ExitCode.ERROR and not target.exists()
    assert "verify failed, nothing written" in out.stderr
    assert "is not one of the nodes (roce-node-01, roce-node-02)" in out.stderr
    assert out.stderr.count("\n") == 1


def test_azure_header_says_not_to_replace_etc_nccl_conf(tmp_path):
    facts = Path(__file__).parent.parent / "fixtures" / "facts" / "cloud-azure-topo-file.fail.json"
    from ncclcheck.cluster import cluster_document
    from ncclcheck.recommend.document import recommend
    from ncclcheck.recommend.text import render_output

    doc = recommend(cluster_document(json.loads(facts.read_text()), [], source="test"))
    text = render_output(doc, "env")
    head = text.split("\n\n", 1)[0]
    assert "do NOT copy this file over /etc/nccl.conf on node1" in head
    assert "|  /etc/nccl.conf" not in head
    assert "node2" not in head.split("do NOT copy", 1)[1]  # node2 has no topology file there
