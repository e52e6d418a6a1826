"""Facts collected any way (srun, pdsh, Kubernetes, probe -o): loading, checking, differences."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from recommend_scenarios import assemble

from ncclcheck.cluster import differences, load_sources, split_documents, write_per_host
from ncclcheck.errors import BadInput


@pytest.fixture(scope="module")
def drift():
    return assemble("version-drift")


def test_a_folder_of_files_and_concatenated_documents(tmp_path, drift):
    one, two, three = drift["nodes"]
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "node1.json").write_text(json.dumps(one, indent=2))
    # srun --ntasks-per-node=1 ncclcheck probe --json > all.json: documents back to back
    (tmp_path / "all.json").write_text(json.dumps(two, indent=2) + "\n" + json.dumps(three))
    doc = load_sources([str(tmp_path / "a"), str(tmp_path / "all.json")])
    assert [n["hostname"] for n in doc["nodes"]] == ["h100-node-01", "h100-node-02", "h100-node-03"]
    assert doc["schema"] == "ncclcheck/cluster"


def test_cluster_documents_keep_their_failed_hosts(tmp_path, drift):
    drift = dict(drift, failed=[{"host": "h100-node-04", "reason": "timed out"}])
    (tmp_path / "c.json").write_text(json.dumps(drift))
    doc = load_sources([str(tmp_path / "c.json")])
    assert doc["failed"] == [{"host": "h100-node-04", "reason": "timed out"}]


@pytest.mark.parametrize("text, needle", [
    ("{", "not valid JSON"),
    ('{"schema": "ncclcheck/bench", "schema_version": 1}', "expected ncclcheck/facts"),
    ('{"schema": "ncclcheck/facts", "schema_version": 99}', "newer"),
    ('{"schema": "ncclcheck/facts", "schema_version": 1}', "without hostname"),
    ("", "empty file"),
])
def test_bad_files_are_one_clear_line(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(BadInput, match=needle):
        load_sources([str(path)])


def test_the_same_node_twice_is_refused(tmp_path, drift):
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(drift["nodes"][0]))
    with pytest.raises(BadInput, match="appears twice"):
        load_sources([str(tmp_path)])


def test_missing_paths(tmp_path):
    with pytest.raises(BadInput, match="no such file"):
        load_sources([str(tmp_path / "nope")])
    with pytest.raises(BadInput, match="no .json files"):
        load_sources([str(tmp_path)])


def test_differences_name_the_outliers(drift):
    diffs = differences(drift["nodes"])
    assert diffs["nccl"]["outliers"] == ["h100-node-03"] and diffs["nccl"]["common"] == "2.20.5"
    assert diffs["driver"]["outliers"] == ["h100-node-02"]
    assert diffs["ib_ports_up"]["outliers"] == ["h100-node-03"]
    assert diffs["gpu"]["differs"] is False and "H100" in diffs["gpu"]["common"]


def test_out_dir_writes_one_file_per_node(tmp_path, drift):
    paths = write_per_host(drift, str(tmp_path / "facts"))
    assert len(paths) == 3
    assert all(json.loads(Path(p).read_text())["schema"] == "ncclcheck/facts" for p in paths)


def test_split_documents_accepts_json_lines():
    assert len(split_documents('{"a": 1}\n{"a": 2}\n', "x")) == 2
