"""The block path of issue 24 (:mod:`ncclcheck.logparse.block`): lines that only count are counted
per (process, fact) in C and applied later; the document must be the one the line-by-line
matcher gives (``LogState.fast = False``), byte for byte, however those lines mix with the
others: processes with several threads (headers), timestamps, carriage returns, lines of a host
label that name the file's last process, more transports and rings than a process keeps,
connection lines taken the long way between counted ones, and memos cleared while a block is
read. Not timed (scripts/bench-diagnose.py measures the speed)."""

from __future__ import annotations

import json
import random

import pytest

from ncclcheck import diagnose as diagnose_mod
from ncclcheck.diagnose import build_document, diagnose_files
from ncclcheck.logparse import block as block_mod
from ncclcheck.logparse import reader
from ncclcheck.logparse import state as state_mod
from ncclcheck.logparse.state import LogState
from ncclcheck.signatures import LINE_DISPATCH, LINE_SIGNATURES

VIAS = ["P2P/IPC/read", "NET/IB/0/GDRDMA", "NET/IB/1", "NET/Socket/0", "SHM/direct/direct",
        "NET/AWS Libfabric/2"] + [f"NET/Plugin{k}/0" for k in range(20)]    # more than 16


def _line(rnd: random.Random, host: int, rank: int, tid: int) -> str:
    """One line of a process: mostly lines that only count, some that take the long way."""
    h = f"node{host}:{100 + rank}:{200 + rank + tid} [{rank % 8}] NCCL INFO"
    prefix = rnd.choice(["", "", f"[rank{rank}]:", f"node{host}: "])
    if rnd.random() < 0.15:
        prefix = f"2026-11-26T12:00:{rnd.randrange(60):02d}.{rnd.randrange(10 ** 6):06d}Z " + prefix
    r = rnd.random()
    if r < 0.45:
        body = (f"Channel {rnd.randrange(80):02d}/0 : {rank}[{rank % 8}] -> {rnd.randrange(64)}[0] "
                f"via {rnd.choice(VIAS[:4] if rnd.random() < 0.8 else VIAS)}")
    elif r < 0.55:
        body = f"Channel {rnd.randrange(80):02d}/{rnd.choice([8, 16, 24])} :    1   2   3"
    elif r < 0.62:
        body = f"Trees [0] {rnd.randrange(64)}/-1/-1->{rank}->{rnd.randrange(64)}"
    elif r < 0.70:
        body = rnd.choice(["Connected all rings", "Connected all trees", "P2P Chunksize set to 131072"])
    elif r < 0.74:
        body = f"{rnd.choice([16, 24])} coll channels, 0 nvls channels, 32 p2p channels"
    elif r < 0.78:
        body = (f"ncclCommInitRank comm 0x{rnd.getrandbits(32):x} rank {rank} nranks 64 cudaDev "
                f"{rank % 8} busId 18000 - Init {rnd.choice(['START', 'COMPLETE'])}")
    elif r < 0.80:
        return f"{prefix}{h} Channel 00/0 : 1[1] -> 2[2] via NET/IB/0\rChannel 01/0 : 1[1] -> 2[2] via P2P"
    elif r < 0.84:           # a host label alone: the file's last process takes it
        return f"node{host}: NCCL version 2.21.5+cuda12.4"
    elif r < 0.86:
        return (f"{prefix}node{host}:{100 + rank}:{200 + rank} [0] misc/socket.cc:483 NCCL WARN "
                f"socketStartConnect: Connect to 10.0.0.{rank}<4000{rank % 10}> failed : "
                f"Connection refused")
    elif r < 0.88:
        return f"[rank{rank}]:[I{rnd.randrange(9999)} ProcessGroupNCCL.cpp:9] [Rank {rank}] NCCL ok"
    else:
        body = f"NCCL_IB_GID_INDEX set by environment to {rnd.choice([3, 3, 3, 1])}"
    return f"{prefix}{h} {body}"


def _log(seed: int, lines: int = 2000) -> str:
    rnd = random.Random(seed)
    procs = [(rnd.randrange(4), rnd.randrange(32)) for _ in range(rnd.choice([3, 20, 40]))]
    out = []
    for _ in range(lines):
        host, rank = rnd.choice(procs)
        out.append(_line(rnd, host, rank, rnd.choice([0, 0, 0, 1, 2])))
    return "\n".join(out) + "\n"


def _both(path: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    docs = []
    for fast in (True, False):
        monkeypatch.setattr(LogState, "fast", fast)
        doc = diagnose_files([path])
        doc.pop("created_at", None)
        docs.append(json.dumps(doc, sort_keys=True))
    return docs[0], docs[1]


@pytest.mark.parametrize("seed", range(6))
def test_counted_lines_give_the_line_by_line_document(seed, tmp_path, monkeypatch):
    path = tmp_path / "job.log"
    path.write_text(_log(seed))
    rnd = random.Random(seed)
    monkeypatch.setattr(reader, "CHUNK_BYTES", rnd.choice([4096, 65536, 1 << 20]))
    monkeypatch.setattr(block_mod, "MAX_PENDING", rnd.choice([7, 1 << 16]))
    if seed % 2:                          # memos cleared while blocks are read
        monkeypatch.setattr(state_mod, "MAX_HEADS", 24)
        monkeypatch.setattr(state_mod, "MAX_AGG", 9)
    fast, slow = _both(str(path), monkeypatch)
    assert fast == slow
    doc = json.loads(fast)
    assert doc["summary"]["nccl_lines"] > 1000


def test_the_block_path_is_taken_and_counts(tmp_path, monkeypatch):
    """A good share of the lines is counted, not fed one by one (so the test above tests the
    counting, not only the fallback); about 40% of this log's lines are of kinds that never
    are (WARN, environment, init, text, carriage returns) or a message's first sight."""
    path = tmp_path / "job.log"
    path.write_text(_log(11, 6000))
    monkeypatch.setattr(reader, "CHUNK_BYTES", 16384)
    fed = []
    real = LogState.feed_bytes

    def counting(self, raw, file, lineno):
        fed.append(lineno)
        return real(self, raw, file, lineno)
    monkeypatch.setattr(LogState, "feed_bytes", counting)
    doc = diagnose_files([str(path)])
    assert doc["summary"]["nccl_lines"] > 4000
    assert len(fed) < 6000 * 0.75


def test_a_transport_first_seen_the_long_way_keeps_its_place(tmp_path, monkeypatch):
    """A process's first NET transport names its network: a Socket connection counted in a block,
    then an IB one of a new thread (the long way) must leave Socket first, as line by line."""
    lines = ["h1:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"] * 2
    lines += ["h1:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via NET/Socket/0"] * 3
    lines += ["h1:1:2 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[1] via NET/IB/0"]
    lines += ["h1:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via NET/Socket/0"] * 3
    path = tmp_path / "t.log"
    path.write_text("\n".join(lines) + "\n")
    fast, slow = _both(str(path), monkeypatch)
    assert fast == slow
    assert json.loads(fast)["ranks"][0]["network"] == "Socket"
    assert json.loads(fast)["ranks"][0]["transports"] == {"NET/IB": 1, "NET/Socket": 6, "P2P": 2}


def test_a_line_counted_the_long_way_comes_after_the_blocks_lines_before_it():
    """Within one block: a Socket connection counted in C, then an IB one whose message was new
    (counted by feed_bytes): the Socket one is first, so the network is Socket."""
    warm = [b"h:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0",
            b"h:2:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0",
            b"h:1:1 [0] NCCL INFO Connected all rings"]
    lines = [b"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0",
             b"h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via NET/IB/0"]
    docs = []
    for fast in (True, False):
        state = LogState()
        state.fast = fast
        if fast:
            state.feed_block(warm, [1, 2, 3], "t")
            state.feed_block(lines, [4, 5], "t")
            state.flush()
        else:
            for n, raw in enumerate(warm + lines, 1):
                state.feed_bytes(raw, "t", n)
        doc = build_document(state, [])
        doc.pop("created_at", None)
        docs.append(doc)
    assert docs[0] == docs[1]
    assert [r["network"] for r in docs[0]["ranks"]] == ["Socket", "Socket"]


def test_a_host_label_line_after_counted_lines_names_their_process(tmp_path, monkeypatch):
    """``host: NCCL version ...`` goes to the file's last process: the one of the counted line
    just before it, not the one of the last line fed one by one."""
    lines = ["n1: n1:1:1 [0] NCCL INFO Using network IB", "n1: n1:2:2 [1] NCCL INFO Using network IB"]
    lines += ["n1: n1:1:1 [0] NCCL INFO Connected all rings", "n1: n1:2:2 [1] NCCL INFO Connected all rings"]
    lines += ["n1: n1:1:1 [0] NCCL INFO Connected all rings", "n1: NCCL version 2.18.1+cuda12.1"]
    path = tmp_path / "t.log"
    path.write_text("\n".join(lines) + "\n")
    fast, slow = _both(str(path), monkeypatch)
    assert fast == slow
    ranks = json.loads(fast)["ranks"]
    assert [r["nccl_version"] for r in ranks] == ["2.18.1", None]


def test_the_dispatch_memo_keeps_keywords_with_digits_apart():
    """The dispatch memo's key makes digits 0; a keyword with a digit (``[Errno 12]``) must still
    pick its signature, and not pick it for a text that differs only there."""
    words = {k for s in LINE_SIGNATURES for k in s.keywords}
    assert "[Errno 12]" in words
    a, b = "OSError: [Errno 12] Cannot allocate memory", "OSError: [Errno 13] Cannot allocate memory"
    for first, second in ((a, b), (b, a)):
        LINE_DISPATCH._memo.clear()
        LINE_DISPATCH(first)
        for text in (first, second):
            want = [s.id for s in LINE_SIGNATURES if s.match(text) is not None]
            assert [s.id for s in LINE_DISPATCH(text) if s.match(text) is not None] == want, text


def test_diagnose_feeds_blocks_only_in_fast_mode(tmp_path, monkeypatch):
    path = tmp_path / "t.log"
    path.write_text(_log(2, 200))
    called = []
    monkeypatch.setattr(LogState, "feed_block", lambda self, *a: called.append(1))
    monkeypatch.setattr(LogState, "fast", False)
    diagnose_mod.diagnose_files([str(path)])
    assert not called


def test_the_first_net_line_without_gdr_keeps_its_line_as_evidence(tmp_path, monkeypatch):
    """ib-gdr-not-ready shows each process's first NET connection without /GDRDMA. When another
    process printed the same message first (NVIDIA/nccl#2397: ranks on two hosts, 'Channel 00/0 :
    1[1] -> 2[0] [receive] via NET/IB/2'), the block path counted the line and its evidence lost
    its file and line number ({"file": "", "line": 0}); it must take the long way once."""
    lines = []
    for host in ("a", "b"):
        h = f"{host}:1:1 [0] NCCL INFO"
        lines += [f"{h} Using network IB", f"{h} comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 "
                  f"localRank 0 MNNVL 0", f"{h} Connected all rings"]
    net = "[0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/IB/2"
    lines += [f"a:1:1 {net}", f"b:1:1 {net}"]                    # feed_bytes counts b's
    lines += ["a:1:1 [0] NCCL INFO Connected all rings"] * 80     # a block of its own (4 KiB)
    lines += [f"c:1:1 [0] NCCL INFO {m}" for m in ("Using network IB", "Connected all rings")]
    lines += ["a:1:1 [0] NCCL INFO Connected all rings"] * 80
    lines += [f"c:1:1 {net}", f"a:1:1 {net}", f"c:1:1 {net}"]    # the block path counts c's
    path = tmp_path / "t.log"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(reader, "CHUNK_BYTES", 4096)
    fast, slow = _both(str(path), monkeypatch)
    assert fast == slow
    (gdr,) = [f for f in json.loads(fast)["findings"] if f["id"] == "ib-gdr-not-ready"]
    assert [(e["file"], e["line"]) for e in gdr["evidence"]] == [(str(path), 7), (str(path), 8),
                                                                  (str(path), 171)]
