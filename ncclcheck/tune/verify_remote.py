"""Verify an env file with the real libnccl where the nodes are: on this machine when it is one
of them, else on the first node over ssh (``python -m ncclcheck.tune.verify_remote`` reads the
env text on stdin and prints :func:`ncclcheck.recommend.verify.verify`'s result as one JSON line).

Recorded answer (node1 of the netns cluster, nvidia-nccl-cu12 2.21)::

    {"ok": true, "bootstrap": {"interface": "ens1f0", "address": "198.18.2.11"}, ...}
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from typing import Any

from ncclcheck.envformat import parse_env_text
from ncclcheck.recommend.verify import VERIFY_TIMEOUT_S, find_libnccl, verify, where_warnings


def verify_text(env_text: str, nccl_lib: str | None, facts: dict[str, Any] | None = None,
                timeout: float = VERIFY_TIMEOUT_S) -> dict[str, Any]:
    """:func:`ncclcheck.recommend.verify.verify` on ``env_text`` written to a private temporary
    file, each libnccl child given ``timeout`` s (VERIFY_TIMEOUT_S at most)."""
    with tempfile.TemporaryDirectory(prefix="ncclcheck-tune-verify-") as tmp:
        path = os.path.join(tmp, "nccl.env")
        with open(path, "w", encoding="utf-8") as f:
            f.write(env_text)
        result = verify(path, find_libnccl(facts, nccl_lib), min(timeout, VERIFY_TIMEOUT_S))
    result["where"] = socket.gethostname()
    return result


def parse_answer(stdout: str) -> dict[str, Any] | None:
    """The last JSON object line of the remote output.

    >>> parse_answer('noise\\n{"ok": true}\\n')
    {'ok': True}
    """
    for line in reversed(stdout.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def verify_on_nodes(env_text: str, nodes: list[dict[str, Any]], nccl_lib: str | None,
                    target: Any = None, ssh: Any = None,
                    timeout: float = VERIFY_TIMEOUT_S + 15) -> dict[str, Any]:
    """Here when this machine is a node (its facts pick the libnccl); else on ``target`` over
    ``ssh``; else here, saying that the check ran off the nodes."""
    here = socket.gethostname()
    local = next((n for n in nodes if n.get("hostname") == here), None)
    if local is not None or target is None or ssh is None:
        result = verify_text(env_text, nccl_lib, local, timeout)
        warnings = where_warnings(parse_env_text(env_text), local, here,
                                  [str(n.get("hostname")) for n in nodes])
        if local is None and not result["ok"]:  # the likely reason it failed: a problem
            result["problems"].append(warnings.pop(0))
        result["warnings"] = warnings  # said also when it passed
        return result
    argv = [ssh.remote_python, "-m", "ncclcheck.tune.verify_remote"]
    if nccl_lib:
        argv += ["--nccl-lib", nccl_lib]
    res = ssh.run(target, argv, min(timeout, VERIFY_TIMEOUT_S + 15), input=env_text)
    answer = parse_answer(res.stdout or "")
    if answer is None:
        return {"ok": False, "where": target.label, "library": nccl_lib, "bootstrap": None,
                "problems": [f"verify on {target.label} gave no answer: "
                             f"{res.error or (res.stderr or '').strip()[-300:]}"],
                "log_tail": []}
    return answer


def verify_via_srun(env_text: str, nccl_lib: str | None, timeout: float,
                    python: str | None = None) -> dict[str, Any]:
    """Inside a Slurm allocation: the check on the allocation's first node (one srun task; the
    text travels as an argument, no shell in between)."""
    from ncclcheck.remote.slurm import run_srun, split_labelled, srun_argv

    argv = [python or sys.executable, "-m", "ncclcheck.tune.verify_remote", "--text", env_text]
    if nccl_lib:
        argv += ["--nccl-lib", nccl_lib]
    code, out, err = run_srun(srun_argv(1, argv, False, "ncclcheck-verify", timeout), timeout,
                              env=dict(os.environ))
    answer = parse_answer("\n".join(split_labelled(out).get(0) or []))
    if answer is None:
        tail = (err.strip().splitlines() or [f"exit {code}"])[-1]
        return {"ok": False, "where": "srun", "library": nccl_lib, "bootstrap": None,
                "problems": [f"verify through srun gave no answer: {tail[:300]}"], "log_tail": []}
    return answer


def main(argv: list[str] | None = None) -> int:
    """Read env text (``--text TEXT``, else stdin), print the verify result as JSON."""
    args = list(sys.argv[1:] if argv is None else argv)
    lib = args[args.index("--nccl-lib") + 1] if "--nccl-lib" in args[:-1] else None
    text = args[args.index("--text") + 1] if "--text" in args[:-1] else sys.stdin.read()
    result = verify_text(text, lib)
    sys.stdout.write(json.dumps(result, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
