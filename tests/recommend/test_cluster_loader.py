"""Facts collected any way (srun, pdsh, Kubernetes, probe -o): loading, checking, differences."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from recommend_scenarios import assemble

from ncclcheck.cluster import differences, load_sources, write_per_host
from ncclcheck.schema import split_documents
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


@pytest.mark.parametrize("sections, needle", [
    ({"network": "x"}, "$.sections.network must be object"),
    ({"network": {"status": "ok", "data": [1, 2]}}, "$.sections.network.data must be object"),
    ({"network": {"status": "ok", "data": None}}, "status 'ok' needs a data object"),
    ([], "$.sections must be object"),
])
def test_malformed_sections_are_bad_input(tmp_path, sections, needle):
    path = tmp_path / "n1.json"
    path.write_text(json.dumps({"schema": "ncclcheck/facts", "schema_version": 1,
                                "hostname": "n1", "sections": sections}))
    with pytest.raises(BadInput, match=re.escape(needle)):
        load_sources([str(path)])


def test_loading_pauses_the_garbage_collector_and_restores_it(tmp_path, drift):
    import gc

    (tmp_path / "n.json").write_text(json.dumps(drift["nodes"][0]))
    assert gc.isenabled()
    load_sources([str(tmp_path)])
    assert gc.isenabled()
    gc.disable()
    try:
        load_sources([str(tmp_path)])
        assert not gc.isenabled()  # a caller's own pause is left alone
    finally:
        gc.enable()
    with pytest.raises(BadInput):
        load_sources([str(tmp_path / "nope")])
    assert gc.isenabled()


def test_differences_survive_malformed_facts(drift):
    odd = json.loads(json.dumps(drift["nodes"][0]))
    odd["sections"]["gpu"]["data"]["gpus"] = "not a list"
    odd["sections"]["network"]["data"]["interfaces"] = {"eth0": 1}
    diffs = differences([odd, drift["nodes"][1]])
    assert diffs["gpu"]["values"]["unknown"] == [odd["hostname"]]
    assert diffs["mtu"]["values"] == {"unknown": [odd["hostname"], drift["nodes"][1]["hostname"]]}


def test_out_dir_never_overwrites_one_node_with_another(tmp_path, drift):
    one, two = (json.loads(json.dumps(n)) for n in drift["nodes"][:2])
    one["probed_as"], two["probed_as"] = "root@gpu1", "root_gpu1"  # the same once made safe
    paths = write_per_host({"nodes": [one, two]}, str(tmp_path))
    assert [Path(p).name for p in paths] == ["root_gpu1.json", "root_gpu1-2.json"]
    assert {json.loads(Path(p).read_text())["hostname"] for p in paths} == {
        one["hostname"], two["hostname"]}
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # atomic: no leftovers
