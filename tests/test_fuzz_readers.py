"""Property: every reader, given a mutated real input, exits 0, 2 or 3, within 10 s, never with
an internal error or a traceback (issue 16). scripts/fuzz-readers.py runs the same cases by the
thousand; here each reader has a fixed Hypothesis budget so that the suite stays fast.
"""

from __future__ import annotations

import pytest
from fuzz_docs import case, readers
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

READERS = {r.name: r for r in readers()}
EXAMPLES = 60


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    return folder, {name: r.seeds(folder) for name, r in READERS.items()}


@pytest.mark.parametrize("name", list(READERS))
def test_mutated_inputs_give_exit_0_2_or_3(seeds, name):
    folder, texts = seeds

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(rng=st.randoms(use_true_random=False))
    def check(rng):
        text, out = case(READERS[name], texts[name], rng, folder)
        assert not out.internal, (out.code, out.stderr[-500:], text[:300])
        assert out.seconds < 10, text[:300]

    check()
