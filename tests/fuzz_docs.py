"""Mutated real inputs for every reader, and a way to run the CLI on one in this process.

Used by tests/test_fuzz_readers.py (Hypothesis, a fixed example budget) and by
scripts/fuzz-readers.py (thousands of seeded cases, the acceptance figure). The seeds are real
documents that ncclcheck itself wrote from the recorded hosts and logs; each case applies one to
three mutations: a value's type swapped, a key dropped, NaN or infinity, deep nesting, byte
noise, control characters, absurd numbers.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

FIXTURES = Path(__file__).parent / "fixtures"
HOSTS = FIXTURES / "hosts"

SWAPS: list[Any] = [None, True, False, 0, -1, 2**62, 1.5, -1e308, "", "x", "\x1b[2J", [], {},
                    [1, "a"], {"a": 1}, {"schema": "ncclcheck/facts"}, "9" * 400]


@dataclass
class Outcome:
    code: int
    stderr: str
    seconds: float

    @property
    def internal(self) -> bool:
        return ("internal error" in self.stderr or "Traceback" in self.stderr
                or self.code not in (0, 2, 3))


def run_cli(argv: list[str]) -> Outcome:
    """``ncclcheck ARGV`` in this process: exit code, stderr, seconds."""
    from rich.console import Console

    from ncclcheck.cli.context import Ctx
    from ncclcheck.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    ctx = Ctx(Console(file=io.StringIO(), width=100), Console(file=io.StringIO(), width=100))
    start = time.monotonic()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv, obj=ctx)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return Outcome(code, err.getvalue(), time.monotonic() - start)


# -- mutations of JSON documents -----------------------------------------------------------------

def _paths(value: Any, prefix: tuple = (), out: list | None = None, limit: int = 5000) -> list:
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    out.append(prefix)
    if isinstance(value, dict):
        for k, v in value.items():
            _paths(v, prefix + (k,), out, limit)
    elif isinstance(value, list):
        for i, v in enumerate(value[:50]):
            _paths(v, prefix + (i,), out, limit)
    return out


def _parent(doc: Any, path: tuple) -> tuple[Any, Any]:
    node = doc
    for step in path[:-1]:
        node = node[step]
    return node, path[-1]


def mutate_doc(doc: Any, rng: random.Random) -> str:
    """One mutated JSON text of ``doc`` (which is changed in place)."""
    for _ in range(rng.randint(1, 3)):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        parent, key = _parent(doc, rng.choice(paths))
        kind = rng.random()
        if kind < 0.45:
            parent[key] = rng.choice(SWAPS)
        elif kind < 0.7:
            if isinstance(parent, dict):
                del parent[key]
            else:
                parent.pop(key)
        elif kind < 0.8:
            parent[key] = {"nan": float("nan"), "inf": float("inf")}[rng.choice(["nan", "inf"])]
        elif kind < 0.9:
            value = parent[key]
            for _ in range(rng.choice([3, 50, 400])):
                value = [value]
            parent[key] = value
        else:
            parent[key] = rng.choice(SWAPS[5:])
    try:
        text = json.dumps(doc, allow_nan=True)
    except RecursionError:  # nested twice: as deep as a hostile file gets anyway
        text = "[" * 100000 + "]" * 100000
    roll = rng.random()
    if roll < 0.08:
        text = noise(text, rng)
    elif roll < 0.1:
        text = "[" * 100000 + "]" * 100000
    elif roll < 0.12:
        text = text.replace("1", "1e999", 1)
    return text


def noise(text: str, rng: random.Random) -> str:
    """Byte noise: a few characters replaced, a cut, or a control sequence inserted."""
    chars = list(text)
    for _ in range(rng.randint(1, 8)):
        if not chars:
            break
        i = rng.randrange(len(chars))
        chars[i] = rng.choice(["\x00", "\x1b", "{", "]", '"', "\\", "\u202e", "9", "\n", "é"])
    out = "".join(chars)
    return out[:rng.randrange(len(out) + 1)] if rng.random() < 0.3 else out


# -- mutations of text inputs --------------------------------------------------------------------

TEXT_PIECES = ["1e999", "nan", "-inf", "-", "9" * 5000, "\x1b]0;pwned\x07", "\x00", "\r",
               "slots=999999999999", "slots=-1", "user@host:99999", "[::1", " " * 5000,
               "#", "N/A", "0" * 40, "\u202e"]


def mutate_text(text: str, rng: random.Random) -> str:
    """Line-level mutations of a log, table or hostfile."""
    lines = text.splitlines()
    for _ in range(rng.randint(1, 4)):
        if not lines:
            lines = [""]
        i = rng.randrange(len(lines))
        kind = rng.random()
        if kind < 0.5:
            fields = lines[i].split(" ")
            j = rng.randrange(len(fields))
            fields[j] = rng.choice(TEXT_PIECES)
            lines[i] = " ".join(fields)
        elif kind < 0.65:
            del lines[i]
        elif kind < 0.8:
            lines[i:i] = [lines[i]] * rng.choice([2, 100])
        elif kind < 0.9:
            lines[i] = lines[i] * rng.choice([2, 200])
        else:
            lines[i] = noise(lines[i], rng)
    return "\n".join(lines) + ("\n" if rng.random() < 0.8 else "")


# -- the readers ---------------------------------------------------------------------------------

@dataclass
class Reader:
    name: str
    seeds: Callable[[Path], list[str]]     #: the seed texts, written once into a folder
    argv: Callable[[str], list[str]]       #: the command line for one mutated file
    json: bool = True


@functools.cache
def seed_documents() -> dict[str, list[str]]:
    """Real documents, written by ncclcheck itself, by kind; made once per process (the readers'
    seeds and the sweep read the same documents: ~3 CPU-s each time)."""
    from ncclcheck.bench.importer import import_file
    from ncclcheck.cluster import cluster_document
    from ncclcheck.diagnose import diagnose_files
    from ncclcheck.host.recorded import RecordedHost
    from ncclcheck.probe import collect_facts
    from ncclcheck.recommend.document import recommend
    from ncclcheck.schema import dumps

    facts = [collect_facts(RecordedHost(h)) for h in sorted(HOSTS.iterdir()) if h.is_dir()]
    cluster = cluster_document(facts[:3], [{"host": "n9", "reason": "n9: timed out"}],
                               source="fuzz")
    bench = [import_file(p) for p in sorted((FIXTURES / "nccl-tests").glob("a3mega*.txt"))]
    bench += [json.loads((FIXTURES / "reports" / "roce-compare" / "bench-compare.json")
                         .read_text())]
    logs = sorted((FIXTURES / "logs").glob("*.log"))[:6]
    diagnosis = [diagnose_files([str(p)]) for p in logs]
    rec = recommend(cluster_document(facts[:3], [], source="fuzz"))
    reports = FIXTURES / "reports"
    return {"facts": [dumps(f) for f in facts], "cluster": [dumps(cluster)],
            "bench": [dumps(b) for b in bench], "diagnosis": [dumps(d) for d in diagnosis],
            "recommendation": [dumps(rec)],
            "pairwise": [(reports / "netns-hunt" / "pairwise.json").read_text()],
            "tune": [(reports / "netns-tune" / "tune.json").read_text()]}


# -- the sweep: every key path, in turn, set to each wrong type (issue 28) -------------------------

SWEEP_VALUES: list[Any] = [None, 1, "x", [], {}]


class _SweepCases(Sequence):
    """The sweep's cases, each mutated text made only when it is read: the suite samples 6 of
    a cluster document's ~3,000 (each a parse and a dump of the whole document)."""

    def __init__(self, text: str, keys: list[tuple[tuple, Any]]) -> None:
        self.text, self.keys = text, keys

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        path, value = self.keys[i]
        copy = json.loads(self.text)
        parent, key = _parent(copy, path)
        parent[key] = value
        return path, value, json.dumps(copy)


def sweep_cases(text: str, limit: int = 5000) -> Sequence[tuple[tuple, Any, str]]:
    """``(path, value, mutated text)`` for every key path of a document and every value of
    :data:`SWEEP_VALUES`; of a list's items, the first that has each key path stands for all.
    A sequence whose items are made when read (:class:`_SweepCases`)."""
    doc = json.loads(text)
    keys = []
    seen: set[tuple] = set()
    for path in _paths(doc, limit=limit):
        shape = tuple("*" if isinstance(step, int) else step for step in path)
        if not path or shape in seen:  # one item of a list stands for the others
            continue
        seen.add(shape)
        for value in SWEEP_VALUES:
            keys.append((path, value))
    return _SweepCases(text, keys)


def _text_seeds(kind: str) -> list[str]:
    if kind == "table":
        return [p.read_text(errors="replace") for p in sorted((FIXTURES / "nccl-tests")
                                                              .glob("*.txt"))]
    if kind == "log":
        return [p.read_text(errors="replace") for p in sorted((FIXTURES / "logs")
                                                              .glob("*.log"))[:8]]
    return ["198.18.0.1 slots=8\n198.18.0.2 slots=8\n", "node1\nnode2\n# comment\n",
            "user@198.18.0.5:2222\n[fd00::1]:22\n", "localhost slots=2\n127.0.0.1\n"]


def readers() -> list[Reader]:
    """The readers of issue 16's table, each with its seeds and command line."""
    def seeds(*kinds: str) -> Callable[[Path], list[str]]:
        def get(folder: Path) -> list[str]:
            return [t for k in kinds for t in seed_documents()[k]]
        return get

    return [
        Reader("report DOC", seeds("facts", "cluster", "bench", "diagnosis", "recommendation",
                                   "pairwise", "tune"),
               lambda p: ["report", p, "-o", p + ".html"]),
        Reader("recommend --bench DOC", seeds("bench"),
               lambda p: ["recommend", "--probe", str(HOSTS / "h100-ib-8gpu" / "facts.json"),
                          "--bench", p, "-q"]),
        Reader("recommend --probe CLUSTER", seeds("cluster"),
               lambda p: ["recommend", "--probe", p, "-q"]),
        Reader("recommend --probe FACTS", seeds("facts"),
               lambda p: ["recommend", "--probe", p, "-q"]),
        Reader("probe --from FACTS", seeds("facts"), lambda p: ["probe", "--from", p]),
        Reader("bench --import TABLE", lambda f: _text_seeds("table"),
               lambda p: ["bench", "--import", p], json=False),
        Reader("diagnose LOG", lambda f: _text_seeds("log"), lambda p: ["diagnose", p],
               json=False),
        Reader("rank --hostfile FILE", lambda f: _text_seeds("hostfile"),
               lambda p: ["rank", "--hostfile", p], json=False),
    ]


def case(reader: Reader, seeds: list[str], rng: random.Random, folder: Path) -> tuple[str, Outcome]:
    """Mutate one seed, write it, run the reader on it."""
    seed = rng.choice(seeds)
    text = mutate_doc(json.loads(seed), rng) if reader.json else mutate_text(seed, rng)
    path = folder / "case.input"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return text, run_cli(reader.argv(str(path)))


# -- every command's options, each given a hostile value (issue 28) -----------------------------

#: Values for an option: out of range, not finite, non-ASCII digits, huge, not text, bad paths.
HOSTILE_VALUES = ["-1", "0", "99999999999999999999", "1e309", "nan", "-inf", "\u0663", "",
                  "x" * 5000, "\udcff", "/nonexistent/x", "/proc/self/nope", "\x1b[2J",
                  "a\u202eb", "9" * 400 + "M", "/dev/zero", "1" * 30]


def command_bases(folder: Path) -> dict[str, list[str]]:
    """A cheap command line per command: with a valid value for the option under test it does
    little (replays, imports, reads a fixture) and never starts ranks or connects."""
    hostfile = folder / "hosts"
    hostfile.write_text("127.0.0.1\n")
    docs = FIXTURES / "reports" / "h100-ib"
    return {
        "probe": ["probe", "--replay", str(HOSTS / "h100-ib-8gpu"), "--json"],
        "bench": ["bench", "--import", str(FIXTURES / "nccl-tests" /
                                           "a3mega-h100-2x8-all_reduce.txt"), "--json"],
        "tune": ["tune", "--hostfile", str(folder / "no-such-hostfile")],
        "rank": ["rank", "--hostfile", str(hostfile)],
        "recommend": ["recommend", "--probe", str(HOSTS / "h100-ib-8gpu" / "facts.json"), "-q"],
        "diagnose": ["diagnose", str(sorted((FIXTURES / "logs").glob("*.log"))[0])],
        "report": ["report", str(docs / "facts-h100-node-01.json"), "-o",
                   str(folder / "report.html")],
        "record": ["record", str(folder / "record"), "--root", str(folder / "no-such-root")],
        "rules": ["rules"],
        "schema": ["schema"],
    }


def option_cases(folder: Path) -> list[tuple[str, str, list[str]]]:
    """``(command, option, argv)``: every option that takes a value, of every command."""
    import click

    from ncclcheck.cli.main import cli

    out = []
    for name, base in command_bases(folder).items():
        command = cli.commands[name]
        for param in command.params:
            if not isinstance(param, click.Option) or param.is_flag or not param.opts:
                continue
            out.append((name, param.opts[-1], base))
    return out
