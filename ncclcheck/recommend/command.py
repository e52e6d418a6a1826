"""``ncclcheck recommend`` end to end but printing (:func:`run_command`), and its options that
write or check files: ``--candidates-dir``, ``--verify``, ``--dump-dir``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ncclcheck import outfile
from ncclcheck.recommend.document import recommend
from ncclcheck.recommend.inputs import load_bench, load_facts, probe_this_node
from ncclcheck.recommend.text import explainable, explainable_lines, problems, render_output
from ncclcheck.recommend.ties import candidate_files


def write_candidates(doc: dict[str, Any], folder: str) -> list[str]:
    """``--candidates-dir``: write each tie's candidate env files and point decide_with at them."""
    import os

    from ncclcheck.errors import BadInput

    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise BadInput(f"--candidates-dir {folder}: cannot create ({exc.strerror or exc})") from None
    written = []
    for tie in doc.get("ties") or []:
        paths = []
        for name, text in candidate_files(tie, doc["env"]).items():
            path = os.path.join(folder, name)
            outfile.write_atomic(path, text)
            paths.append(path)
        tie["files"] = paths
        tie["decide_with"] = "ncclcheck bench --hostfile HOSTS --compare " + " ".join(paths)
        written += paths
    return written


def verify_document(doc: dict[str, Any], nccl_lib: str | None,
                    local_facts: dict[str, Any] | None = None) -> dict[str, Any]:
    """``--verify``: write the env format to a private temporary file and check it with libnccl."""
    import os
    import tempfile

    from ncclcheck.recommend.verify import find_libnccl, verify, where_warnings

    with tempfile.TemporaryDirectory(prefix="ncclcheck-verify-") as tmp:
        path = os.path.join(tmp, "nccl.env")
        Path(path).write_text(render_output(doc, "env"), encoding="utf-8")
        result = verify(path, find_libnccl(local_facts, nccl_lib))
    import socket

    warnings = where_warnings(doc.get("env") or {}, local_facts, socket.gethostname(),
                              [str(h) for h in doc.get("hosts") or []])
    if local_facts is None and not result["ok"]:  # the likely reason it failed: a problem
        result["problems"].append(warnings.pop(0))
    result["warnings"] = warnings  # said also when it passed: what the pass does not prove
    return result


def check_dump_dir(path: str | None) -> None:
    """``--dump-dir``: an absolute path an env file can hold as is (no space, quote, ``$``,
    ``%``: NCCL_DEBUG_FILE expands ``%h``/``%p``).

    Raises:
        BadInput: anything else.
    """
    import re

    from ncclcheck.errors import BadInput

    if path is not None and not re.fullmatch(r"/[A-Za-z0-9_.,:/=^+@-]*", path):
        raise BadInput(f"--dump-dir {path!r}: give an absolute path of letters, digits and "
                       "_.,:/=^+@- only (it is written into the env file as is)")


def run_command(probe_paths: list[str], bench_paths: list[str], fmt: str, verify: bool = False,
                nccl_lib: str | None = None, candidates_dir: str | None = None,
                output: str | None = None, dump_dir: str | None = None
                ) -> tuple[dict[str, Any], str, list[dict[str, str]]]:
    """Everything ``ncclcheck recommend`` does but printing: (document, output text, problems)."""
    import socket

    from ncclcheck.cluster import gc_paused
    from ncclcheck.rules.cluster_nccl_version_mismatch import oldest

    check_dump_dir(dump_dir)
    with gc_paused():  # thousands of facts documents: see gc_paused
        cluster = load_facts(probe_paths) if probe_paths else probe_this_node()
        runs = load_bench(bench_paths)
        doc = recommend(cluster, runs, sources=list(probe_paths) or ["this node (live probe)"])
        nodes = cluster.get("nodes") or []
        here = socket.gethostname()
        local = next((n for n in nodes if n.get("hostname") == here),
                     nodes[0] if not probe_paths and nodes else None)
        nccl = oldest(nodes)
        del cluster, nodes  # freed here, by reference counting, before the collector is back
    if candidates_dir:
        write_candidates(doc, candidates_dir)
    if verify:
        doc["verify"] = verify_document(doc, nccl_lib, local)
    # issue 22: a section the user can drop; the document holds it, the env text is written from it
    doc["explainable_hang"] = explainable(doc.get("env") or {}, nccl, dump_dir)
    text = render_output(doc, fmt)
    if fmt in ("env", "shell"):
        text += "\n" + "\n".join(explainable_lines(fmt, doc["explainable_hang"])) + "\n"
    return doc, text, problems(doc)
