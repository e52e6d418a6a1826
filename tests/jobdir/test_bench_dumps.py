"""scripts/bench-jobdir.py times dumps as torch writes them: its pickle is torch::jit::Pickler's
byte for byte, its JSON _dump_fr_trace_json()'s, on the recorded real dumps."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from scriptload import load

ROOT = Path(__file__).resolve().parent.parent.parent
FR = ROOT / "tests" / "fixtures"
PICKLES = [FR / "device" / "h200" / "fr" / "on-demand.nccl.pickle",
           FR / "device" / "h200" / "fr" / "timeout_rank_0",
           FR / "fr-gloo" / "gloo_trace_rank_0", FR / "fr-gloo" / "gloo_trace_rank_1"]


@pytest.fixture(scope="module")
def bench():
    return load(ROOT / "scripts" / "bench-jobdir.py", "bench_jobdir")


@pytest.mark.parametrize("path", PICKLES, ids=lambda p: p.name)
def test_the_bench_pickles_a_dump_as_torch_does(bench, path):
    data = path.read_bytes()
    assert bench.torch_pickle(pickle.loads(data)) == data


@pytest.mark.parametrize("rank", [0, 1])
def test_the_bench_writes_json_as_torch_does(bench, rank):
    # the two were dumped one after the other: only the progress counters may differ
    real = json.loads((FR / "fr-gloo" / f"gloo_trace_rank_{rank}.json").read_bytes())
    mine = json.loads(bench.torch_json(pickle.loads(
        (FR / "fr-gloo" / f"gloo_trace_rank_{rank}").read_bytes())))
    assert real.pop("pg_status").keys() == mine.pop("pg_status").keys()
    assert mine == real
    # and laid out alike: keys sorted, no spaces
    text = (FR / "fr-gloo" / f"gloo_trace_rank_{rank}.json").read_bytes()
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":")).encode()


def test_the_bench_dump_has_a_real_gloo_dumps_shape(bench):
    real = pickle.loads((FR / "fr-gloo" / "gloo_trace_rank_0").read_bytes())
    mine = bench.document(4, 3, True)
    assert list(mine) == list(real)
    assert [list(e) for e in mine["entries"]] == [list(real["entries"][0])] * 3
    assert [type(v) for v in mine["entries"][0].values()] == \
        [type(v) for v in real["entries"][0].values()]
    assert list(mine["pg_config"]) == list(real["pg_config"]) == [""]
    # one object per call site, as torch shares them (BINGET in its pickle)
    assert mine["entries"][0]["frames"][1] is mine["entries"][1]["frames"][1]
