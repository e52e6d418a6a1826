"""The -c data check of ncclcheck/bench/worker.py without processes: what each rank puts in,
the exact answer it expects, and #wrong, for reductions over many ranks in narrow types."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from ncclcheck.bench import worker  # noqa: E402  (imports torch)
from ncclcheck.bench.collective import Collective
from ncclcheck.bench.formulas import OPS  # noqa: E402
from ncclcheck.bench.sweep import CHECK_MODULUS, DTYPES, check_modulus  # noqa: E402


def reduced_in_place(type_name: str, nranks: int, count: int, modulus: int) -> tuple:
    """Every rank's all_reduce input summed one rank at a time in the type itself (each partial
    sum rounded, the worst order), and rank 0's Collective to check it."""
    dtype = getattr(torch, DTYPES[type_name].torch_name)
    ranks = [Collective(OPS["all_reduce"], r, nranks, dtype, count, torch.device("cpu"),
                               modulus) for r in range(nranks)]
    total = None
    for coll in ranks:
        coll.resize(count)
        data = coll.fill(in_place=True).clone()
        total = data if total is None else total + data
    ranks[0].out.copy_(total)
    return ranks[0], ranks[0].out


@pytest.mark.parametrize("type_name, nranks", [("bfloat16", 128), ("bfloat16", 512),
                                               ("half", 1024), ("float", 8), ("int8", 64)])
def test_a_correct_sum_over_many_ranks_has_no_wrong_elements(type_name, nranks):
    modulus = check_modulus(DTYPES[type_name], nranks, reduces=True)
    coll, result = reduced_in_place(type_name, nranks, 257, modulus)
    assert coll.count_wrong(result) == 0
    if modulus > 1:                                  # a wrong element is counted
        result[100] += 1
        assert coll.count_wrong(result) == 1


def test_without_the_narrow_modulus_bfloat16_would_report_false_wrongs():
    """The check data must fit the type: 128 bfloat16 ranks of values up to 6 sum past 256,
    where bfloat16 stops holding every integer."""
    coll, result = reduced_in_place("bfloat16", 128, 257, CHECK_MODULUS)
    assert coll.count_wrong(result) > 0


def test_out_of_place_all_reduce_copies_once_and_times_the_collective_only(monkeypatch):
    calls = []
    monkeypatch.setattr(worker.dist, "all_reduce", lambda t: calls.append(t.data_ptr()))
    coll = Collective(OPS["all_reduce"], 0, 2, torch.float32, 4, torch.device("cpu"))
    coll.resize(4)
    coll.inp.copy_(torch.arange(4.0))
    coll.prepare(in_place=False)                     # untimed: the input into the output
    assert coll.out.tolist() == [0.0, 1.0, 2.0, 3.0]
    run = coll.runner(in_place=False)
    coll.out.zero_()
    run()
    run()                                            # timed: the collective and nothing else
    assert calls == [coll.out.data_ptr()] * 2 and coll.out.tolist() == [0.0] * 4
