"""Garbage never raises: random bytes, mutated real lines and huge lines go through cleanly."""

from __future__ import annotations

import random
from pathlib import Path

from ncclcheck.diagnose import Wanted, build_document, diagnose_files
from ncclcheck.logparse.state import LogState
from ncclcheck.judge.derived import run_checks

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "logs"
ALPHABET = " :[]<>/=.,-_()'\"0123456789abcdefxNCLIFOWARN\t\r\x1b|%#"


def real_lines() -> list[str]:
    out = []
    for path in sorted(LOGS.glob("*.log")):
        out.extend(l for l in path.read_text(errors="replace").splitlines() if l.strip())
    return out


def mutate(rnd: random.Random, line: str) -> str:
    chars = list(line)
    for _ in range(rnd.randint(1, 6)):
        op = rnd.random()
        pos = rnd.randrange(len(chars) + 1)
        if op < 0.4 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op < 0.8:
            chars.insert(pos, rnd.choice(ALPHABET))
        else:
            cut = rnd.randrange(len(chars) + 1)
            chars = chars[:cut]
    return "".join(chars)


def feed_all(lines) -> LogState:
    state = LogState()
    for n, line in enumerate(lines, 1):
        state.feed(line, "fuzz.log", n)
    run_checks(state)
    build_document(state, [])
    return state


def test_mutated_real_lines():
    rnd = random.Random(1234)
    lines = real_lines()
    fuzzed = [mutate(rnd, rnd.choice(lines)) for _ in range(4000)]
    state = feed_all(fuzzed)
    assert state.parse_errors == 0, state.first_parse_error


def test_random_text_and_bytes():
    rnd = random.Random(99)
    texts = ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 200))) for _ in range(2000)]
    raw = [bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 120))).decode("utf-8", "replace")
           for _ in range(1000)]
    state = feed_all(texts + raw)
    assert state.parse_errors == 0, state.first_parse_error


def test_huge_and_pathological_lines():
    lines = ["NCCL INFO " + "Channel 00/08 : " + "0 " * 50000,
             "h:1:2 [0] NCCL WARN " + "(" * 20000,
             "h:1:2 [0] NCCL INFO Trees " + "[0] " * 20000,
             "[rank1]:" * 5000 + "x",
             "h:" + "9" * 5000 + ":1 [0] NCCL INFO cudaDriverVersion " + "9" * 5000,
             "h:1:1 [99999999999999999999] NCCL INFO comm 0x" + "f" * 5000 + " rank 1 nranks 2 "
             "cudaDev 0 - Init COMPLETE",
             "NCCL INFO Bootstrap : Using " + "a:b<0> " * 5000]
    state = feed_all(lines)
    assert state.parse_errors == 0, state.first_parse_error


def test_binary_file_through_the_reader(tmp_path):
    rnd = random.Random(7)
    blob = bytes(rnd.getrandbits(8) for _ in range(300_000)) + b"\nNCCL INFO Using network IB\n"
    path = tmp_path / "garbage.bin"
    path.write_bytes(blob)
    doc = diagnose_files([str(path)])
    assert "parser" not in doc and doc["inputs"][0]["bytes"] == len(blob)
    assert Wanted()(b"\xff\xfeNCCL") and not Wanted()(b"\xff\xfe")
