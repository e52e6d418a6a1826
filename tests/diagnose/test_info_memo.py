"""The INFO message memos of :meth:`~ncclcheck.logparse.state.LogState.feed_bytes` (issue 24):
Channel/Ring/Trees messages keyed by their shape (the ranks' digits made 0), every plain message
by its bytes with its fact. A memo hit must give what a parse gives, and a fact shared by many
processes must not carry a list or dict that one process's later lines extend."""

from __future__ import annotations

import json
import random

import pytest

from ncclcheck.diagnose import build_document
from ncclcheck.logparse.facts import parse_info
from ncclcheck.logparse.memokeys import shape
from ncclcheck.logparse.state import LogState

VIAS = ["P2P/IPC/read", "P2P/CUMEM/read", "NET/IB/0/GDRDMA", "NET/IB/3/GDRDMA/Shared",
        "NET/Socket/1", "SHM/direct/direct", "NET/AWS Libfabric/2", "P2P/direct pointer",
        "NET/IB/12 "]


def _digits(rnd: random.Random, n: int = 3) -> str:
    return "".join(rnd.choice("0123456789") for _ in range(rnd.randrange(1, n + 1)))


def _body(rnd: random.Random) -> str:
    """A Channel/Ring/Trees message as NCCL 2.3-2.30 print them, or a near miss."""
    d = lambda n=3: _digits(rnd, n)           # noqa: E731
    kind = rnd.randrange(6)
    if kind == 0:
        return (f"{rnd.choice(['Channel', 'Ring'])} {d(2)}{rnd.choice(['', '/' + d(1)])} : {d()}"
                f"{rnd.choice(['', '[' + d(1) + ']'])} -> {d()}{rnd.choice(['', '[' + d(1) + ']'])}"
                f"{rnd.choice(['', ' [send]', ' [receive]'])} via {rnd.choice(VIAS)}")
    if kind == 1:
        return f"Channel {d(2)}/{d(2)} :" + "".join(f"{' ' * rnd.randrange(1, 4)}{d()}"
                                                   for _ in range(rnd.randrange(1, 9)))
    if kind == 2:
        return "Trees" + "".join(f" [{d(1)}] {d()}/-1/-1->{d()}->{d()}" for _ in range(rnd.randrange(0, 4)))
    if kind == 3:                              # near misses: a digit where a word is, a unicode digit
        return f"Channel {d(2)}/0 : {d()}[x{d(1)}] -> {d()} [s3nd] via {rnd.choice(VIAS)}"
    if kind == 4:
        return f"Channel {d(2)}/0 : \u0663[{d(1)}] -> {d()} via {rnd.choice(VIAS)}"
    return f"Channel {d(5)} : {d()} -> {d()} via{rnd.choice(['', ' ', ' via '])}{rnd.choice(VIAS)}"


@pytest.mark.parametrize("seed", range(8))
def test_messages_of_one_shape_state_the_same_fact(seed):
    rnd = random.Random(seed)
    by_shape: dict[bytes, tuple[str, object]] = {}
    bodies = {_body(rnd) for _ in range(3000)}
    for body in sorted(bodies):
        key = shape(body.encode())
        fact = parse_info(body)
        first = by_shape.setdefault(key, (body, fact))
        assert fact == first[1], (body, first[0])
    assert len(by_shape) < len(bodies)        # some messages share a shape


def _document(lines: list[bytes]) -> str:
    state = LogState()
    for n, raw in enumerate(lines, 1):
        state.feed_bytes(raw, "t.log", n)
    doc = build_document(state, [])
    doc.pop("created_at", None)
    return json.dumps(doc, sort_keys=True)


def test_a_shared_fact_is_not_extended_through_another_process(monkeypatch):
    """Two processes print the same NET/Socket line (its fact holds a list of interfaces); then
    one of them adds an interface the NCCL 2.3 way. The other's interfaces stay as printed: the
    fast path's memo does not hand the same list to both."""
    lines = [b"h1:1:1 [0] NCCL INFO cudaDriverVersion 12040",
             b"h1:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:198.18.0.1<0>",
             b"h2:2:2 [0] NCCL INFO cudaDriverVersion 12040",
             b"h2:2:2 [0] NCCL INFO NET/Socket : Using [0]eth0:198.18.0.1<0>",
             b"h1:1:1 [0] NCCL INFO NET : Using interface eth1:198.18.0.2<0>",
             b"h1:1:1 [0] NCCL INFO Bootstrap : Using eth0:198.18.0.1<0>",
             b"h2:2:2 [0] NCCL INFO Bootstrap : Using eth0:198.18.0.1<0>",
             b"h1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0",
             b"h2:2:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[1] via NET/Socket/0"]
    fast = _document(lines)
    doc = json.loads(fast)
    ifaces = {r["host"]: [i["interface"] for i in r["socket_interfaces"]] for r in doc["ranks"]}
    assert ifaces == {"h1": ["eth0", "eth1"], "h2": ["eth0"]}
    monkeypatch.setattr(LogState, "fast", False)
    assert _document(lines) == fast


def test_the_memos_stay_bounded(monkeypatch):
    """Every rank's connection lines, all different: the memos are cleared when full, and the
    document is the one without them."""
    from ncclcheck.logparse import state as state_mod

    monkeypatch.setattr(state_mod, "MAX_FACT_MEMO", 50)
    lines = [b"h%d:1:1 [0] NCCL INFO Channel %02d/0 : %d[0] -> %d[1] via NET/IB/%d"
             % (r % 7, r % 32, r, (r * 13) % 4096, r % 8) for r in range(2000)]
    s = LogState()
    for n, raw in enumerate(lines, 1):
        s.feed_bytes(raw, "t.log", n)
        assert len(s._facts) <= 50 and len(s._plain) <= 50
    fast = _document(lines)
    monkeypatch.setattr(LogState, "fast", False)
    assert _document(lines) == fast
