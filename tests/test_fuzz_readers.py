"""Property: every reader, given a mutated real input, exits 0, 2 or 3, within 10 s, never with
an internal error or a traceback (issue 16). scripts/fuzz-readers.py runs the same cases by the
thousand; here each reader has a fixed Hypothesis budget so that the suite stays fast.

Issue 28 adds: every document kind with each key path set, in turn, to ``null``, ``1``, ``"x"``,
``[]`` and ``{}`` (a seeded sample of the sweep here; scripts/fuzz-readers.py --sweep runs all),
with lone surrogates; and every option of every command given hostile values (out of range,
non-ASCII digits, not finite, huge, not UTF-8, bad paths): exit 0, 2 or 3, never 1.
"""

from __future__ import annotations

import pytest
import random

from fuzz_docs import (HOSTILE_VALUES, case, option_cases, readers, run_cli, seed_documents,
                       sweep_cases)
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


SWEEP_SAMPLE = 6  #: cases per document kind and seed in the suite (all of them in the script)
KIND_READERS = {
    "facts": lambda p, o: [["report", p, "-o", o], ["probe", "--from", p],
                           ["recommend", "--probe", p, "-q"]],
    "cluster": lambda p, o: [["report", p, "-o", o], ["recommend", "--probe", p, "-q"]],
    "bench": lambda p, o: [["report", p, "-o", o]],
    "diagnosis": lambda p, o: [["report", p, "-o", o]],
    "recommendation": lambda p, o: [["report", p, "-o", o]],
    "pairwise": lambda p, o: [["report", p, "-o", o]],
    "tune": lambda p, o: [["report", p, "-o", o]],
}


@pytest.mark.parametrize("kind", list(KIND_READERS))
def test_every_key_path_set_to_a_wrong_type(seeds, kind):
    """The sweep of issue 28 (a seeded sample of it), with a lone surrogate in every case."""
    folder, _ = seeds
    for seed in seed_documents()[kind][:1]:
        cases = sweep_cases(seed)
        rng = random.Random(f"sweep:{kind}")
        for path, value, text in rng.sample(cases, min(SWEEP_SAMPLE, len(cases))):
            text = text.replace('"schema_version"', '"note": "n\\ud800", "schema_version"', 1)
            doc = folder / f"sweep-{kind}.json"
            doc.write_text(text)
            for argv in KIND_READERS[kind](str(doc), str(folder / "sweep.html")):
                out = run_cli(argv)
                assert not out.internal, (kind, path, value, argv[0], out.stderr[-500:])


OPTION_CASES = None


def _option_cases(folder):
    global OPTION_CASES
    if OPTION_CASES is None:
        OPTION_CASES = option_cases(folder)
    return OPTION_CASES


@pytest.mark.parametrize("command", ["probe", "bench", "tune", "rank", "recommend", "diagnose",
                                     "report", "record", "rules", "schema"])
def test_every_option_with_a_hostile_value(seeds, command, monkeypatch):
    folder, _ = seeds
    monkeypatch.chdir(folder)  # an -o or DIR of "0" or "nan" lands here, not in the checkout
    rng = random.Random(f"options:{command}")
    for name, option, base in _option_cases(folder):
        if name != command:
            continue
        for value in rng.sample(HOSTILE_VALUES, 3):
            argv = [*base, option, value]
            out = run_cli(argv)
            assert not out.internal, (argv[:1] + [option, value[:40]], out.stderr[-500:])
            assert out.seconds < 20, (option, value[:40])
