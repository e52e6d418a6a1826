"""RAS (NCCL >= 2.24): the client port it could not open, a harmless WARN on a working job.

Every NCCL process starts a RAS thread at its first communicator and opens a listening socket for
the ``ncclras`` client on ``localhost:28028`` (``NCCL_RAS_ADDR``), with SO_REUSEADDR and
SO_REUSEPORT so that the processes of one user on a node share it (src/ras/client_support.cc
``rasClientInitSocket``). When the port is held by a socket that cannot be shared (another user's
NCCL job, or any other program), ``bind`` fails and NCCL prints::

    [2026-09-09 11:29:56] ubuntu2:321049:321049 [0] ras/client_support.cc:181 NCCL WARN Call to bind failed: Address already in use
    ubuntu2:321049:321049 [0] NCCL INFO RAS failed to establish a client listening socket at localhost:28028

(NVIDIA/nccl#2397, NCCL 2.30.4, a job that then ran its collectives). The caller ignores the
result: ``(void)rasClientInitSocket();`` in src/ras/ras.cc ``ncclRasCommInit`` at v2.24.3-1 and
v2.30.4-1, so the communicator, and the job, go on; only ``ncclras`` cannot reach that process.
Without this signature the line ended as a "warning this tool does not recognise".
"""

from __future__ import annotations

import re

from ncclcheck.signatures.base import NCCL_ENV, Detail, Signature, compile_all


def _ras_detail(m: re.Match[str]) -> Detail:
    call, reason = m.group(1), (m.group(2) or "").strip()
    return Detail(message=f"NCCL's RAS thread could not open its client listening socket "
                          f"(call to {call} failed{': ' + reason if reason else ''}); NCCL goes on "
                          "without it",
                  variant=f"{call}: {reason}"[:60])


RAS_CLIENT_PORT = Signature(
    id="log-ras-client-port",
    title="NCCL's RAS client port could not be opened (harmless for the job)",
    severity="info",
    cause="NCCL >= 2.24 opens a listening socket on localhost:28028 (NCCL_RAS_ADDR) for the ncclras "
          "client, shared by one user's NCCL processes on a node (SO_REUSEPORT); another user's "
          "job or another program holding the port makes bind fail. NCCL ignores the failure: "
          "the communicator and the collectives are not affected, only ncclras cannot query "
          "these processes.",
    fix="Nothing to fix for the job. To use ncclras on a shared node, give each job its own "
        "port (NCCL_RAS_ADDR=localhost:<port>, the same for every rank on the node); "
        "NCCL_RAS_ENABLE=0 turns RAS off.",
    docs="https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting/ras.html; "
         f"{NCCL_ENV}#nccl-ras-addr; src/ras/client_support.cc (rasClientInitSocket), "
         "src/ras/ras.cc (ncclRasCommInit) at v2.30.4-1; https://github.com/NVIDIA/nccl/issues/2397",
    patterns=compile_all(r"ras/client_support\.cc:\d+ NCCL WARN Call to (\w+) failed\s*:?\s*(.*)"),
    keywords=("ras/client_support",),
    explain=_ras_detail)

SIGNATURES = (RAS_CLIENT_PORT,)
