"""Versioned documents: envelopes, refusal of newer versions, atomic writes."""

from __future__ import annotations

import json
import os

import pytest

from ncclcheck import outfile, schema
from ncclcheck.errors import BadInput, NcclcheckError


def test_envelope_carries_integer_version():
    doc = schema.envelope("ncclcheck/facts", hostname="n1", sections={})
    assert doc["schema_version"] == 1 and isinstance(doc["schema_version"], int)
    assert schema.loads(schema.dumps(doc))["hostname"] == "n1"


@pytest.mark.parametrize("text, message", [
    ("not json", "not valid JSON"),
    ("[]", "not an ncclcheck document"),
    ('{"schema": "other/thing", "schema_version": 1}', "unknown schema"),
    ('{"schema": "ncclcheck/facts", "schema_version": "1"}', "no valid integer"),
    ('{"schema": "ncclcheck/facts", "schema_version": 2}', "newer than this ncclcheck reads"),
])
def test_bad_documents_are_one_line_errors(text, message):
    with pytest.raises(BadInput, match=message) as info:
        schema.loads(text, "x.json")
    assert "\n" not in str(info.value) and str(info.value).startswith("x.json")


def test_expect_kind():
    with pytest.raises(BadInput, match="expected ncclcheck/bench"):
        schema.check({"schema": "ncclcheck/facts", "schema_version": 1}, "f",
                     expect=("ncclcheck/bench",))


def test_load_names_unreadable_file(tmp_path):
    with pytest.raises(BadInput, match="cannot read"):
        schema.load(tmp_path / "missing.json")


def test_write_atomic_keeps_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "facts.json"
    target.write_text("old")

    def boom(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(NcclcheckError, match="No space left on device.*unchanged"):
        outfile.write_atomic(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["facts.json"]   # no temp file left


def test_write_atomic_into_missing_dir_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="cannot write"):
        outfile.write_atomic(tmp_path / "no" / "dir.json", "x")


def test_dumps_is_stable():
    assert schema.dumps({"b": 1, "a": [2]}) == json.dumps({"a": [2], "b": 1}, indent=2) + "\n"


def test_write_atomic_onto_a_directory_is_bad_input(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(BadInput, match="cannot write"):
        outfile.write_atomic(tmp_path / "out", "x")
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
