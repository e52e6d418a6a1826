"""The text of a recommendation: the env and shell files' comment lines (header, the notes
above each variable, the footer of what was not set and what to act on), the other formats, and
the findings ``--fail-on`` counts. Used by :mod:`ncclcheck.recommend`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from ncclcheck.envformat import render
from ncclcheck.recommend.ties import tie_line
from ncclcheck.rules.cloud_azure_topo_file import TOPO_IN_ETC


def _wrap(text: str, first: str, width: int = 98) -> list[str]:
    import textwrap

    # never inside a word: a value in a comment (NCCL_IB_HCA==mlx5_0:1,...) is copied by users
    return textwrap.wrap(text, width=width, initial_indent=first,
                         subsequent_indent=" " * min(len(first), 4), break_long_words=False,
                         break_on_hyphens=False) or [first.rstrip()]


def header_lines(doc: dict[str, Any], fmt: str) -> list[str]:
    """The comment lines at the top of the env and shell formats."""
    from ncclcheck import __version__

    hosts = doc.get("hosts") or []
    shown = ", ".join(hosts[:8]) + (f" and {len(hosts) - 8} more" if len(hosts) > 8 else "")
    lines = [(f"NCCL settings from ncclcheck {__version__} recommend, for {len(hosts)} node(s): "
              f"{shown or 'none'}")]
    azure = sorted({h for f in doc.get("findings") or []
                    for h in (f.get("evidence") or {}).get(TOPO_IN_ETC) or {}})
    if fmt == "env":
        lines += ["Use: set -a; . ./nccl.env; set +a  |  NCCL_CONF_FILE=$PWD/nccl.env (NCCL >= 2.23)",
                  "     docker run --env-file nccl.env  |  systemd EnvironmentFile="
                  + ("" if azure else "  |  /etc/nccl.conf"),
                  "Sourced (set -a; .), this file overrides the environment. Read by NCCL itself",
                  "(NCCL_CONF_FILE, /etc/nccl.conf), a variable already in the environment wins."]
    else:
        lines += ["Use: . ./nccl.sh (bash, zsh, sh) before torchrun, srun or mpirun."]
    if azure:
        lines += _wrap(f"Azure: do NOT copy this file over /etc/nccl.conf on {', '.join(azure[:4])}"
                       f"{' ...' if len(azure) > 4 else ''}: that file names NCCL's topology file "
                       "for the VM (cloud-azure-topo-file)", "")
    for item in doc.get("failed") or []:
        lines.append(f"NOT CHECKED against {item.get('host')}: {item.get('reason')}")
    if not doc.get("env"):
        lines.append("Nothing to set: NCCL's defaults fit these nodes (see the notes below).")
    return lines


def notes_for(doc: dict[str, Any]) -> dict[str, list[str]]:
    """Comment lines above each variable: its rules and what they saw. Variables set by the
    same findings (NCCL_NET and NCCL_IB_DISABLE) share one block, above the first of them."""
    notes: dict[str, list[str]] = {}
    previous: list[tuple[str, str]] = []
    for var, reasons in doc["reasons"].items():
        key = [(r["rule"], r["message"]) for r in reasons]
        lines: list[str] = []
        if key != previous:
            for reason in reasons:
                lines += _wrap(reason["message"] or "", f"{reason['rule']}: ")
        previous = key
        overrides = [o for o in doc.get("env_overrides") or [] if o["var"] == var]
        by_value: dict[str, list[str]] = defaultdict(list)
        for item in overrides:
            by_value[item["value"]].append(item["host"])
        for value, hosts in by_value.items():
            lines += _wrap(f"{var}={value} in the environment of {', '.join(hosts[:4])}"
                           f"{' ...' if len(hosts) > 4 else ''} wins over this file when NCCL "
                           "reads it (NCCL_CONF_FILE, /etc/nccl.conf); unset it there",
                           "note: ")
        notes[var] = lines
    return notes


def footer_lines(doc: dict[str, Any]) -> list[str]:
    """Comment lines at the end: what was not set, ties, and the findings to act on."""
    lines: list[str] = []
    for c in doc.get("conflicts") or []:
        lines += _wrap(f"NOT SET {c['var']}: {c['why']}", "")
        for reason in c.get("reasons") or []:
            lines += _wrap(reason, "  ")
    for w in doc.get("withheld") or []:
        lines += _wrap(f"NOT SET {w['var']}={w['value']} ({w['rule']}): {w['why']}", "")
    for r in doc.get("refused") or []:
        lines += _wrap(f"NOT SET {r['var']}: {r['why']}", "")
    for e in doc.get("errors") or []:
        lines += _wrap(f"NOT CHECKED {e['rule']}: the rule failed on these facts ({e['error']}); "
                       "its variables are missing from this file", "")
    for t in doc.get("ties") or []:
        if t.get("decided_by"):
            lines += _wrap(f"TIE {t['var']} decided by bench: {t.get('verdict')}", "")
        else:
            lines += _wrap(f"{tie_line(t)}; decide with: {t['decide_with']}", "")
    acted = {f["rule"] for r in doc["reasons"].values() for f in r}
    node_rules = _node_rule_ids()
    to_act = [f for f in doc.get("findings") or []
              if f["severity"] in ("warning", "error") and not f.get("env") and f["rule"] not in acted]
    for f in group_findings(to_act):
        hosts = f.get("hosts") or []
        where = (f" on {', '.join(hosts[:4])}{' ...' if len(hosts) > 4 else ''}"
                 if f["rule"] in node_rules and hosts else "")
        lines += _wrap(f"{f['severity'].upper()} {f['rule']}{where}: {f['message']}", "")
    return lines


def _node_rule_ids() -> set[str]:
    from ncclcheck.rules import NODE_RULES

    return {r.id for r in NODE_RULES}


def group_findings(findings: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Findings that say the same thing (severity, rule, message) merged into one naming every
    node, in their first order: 1,000 nodes with the same small /dev/shm make one line.

    >>> f = lambda h: {"severity": "error", "rule": "r", "message": "m", "hosts": [h]}
    >>> [g["hosts"] for g in group_findings([f("b"), f("a"), {**f("c"), "message": "n"}])]
    [['a', 'b'], ['c']]
    """
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for f in findings:
        key = (f["severity"], f["rule"], f["message"])
        if key in groups:
            groups[key]["hosts"] = sorted({*groups[key]["hosts"], *(f.get("hosts") or [])})
        else:
            groups[key] = {**f, "hosts": sorted(f.get("hosts") or [])}
    return list(groups.values())


#: (variable, value ({dir}: --dump-dir), where it starts, reason with its source)
EXPLAINABLE = (
    ("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", "torch 2.2",
     "PyTorch Flight Recorder: each rank keeps its last 2000 collectives per process group "
     "(TORCH_FR_BUFFER_SIZE is the newer name; default 2000 in torch 2.13, older releases may "
     "default to 0: torch/csrc/distributed/c10d/FlightRecorder.hpp)"),
    ("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", "torch 2.2",
     "write the recorder out when the NCCL watchdog times out; it needs "
     "TORCH_NCCL_ENABLE_MONITORING=1 and a buffer > 0 (torch/csrc/distributed/c10d/"
     "ProcessGroupNCCL.hpp)"),
    ("TORCH_NCCL_ENABLE_MONITORING", "1", "torch 2.2",
     "the monitor thread the dump on timeout relies on (ProcessGroupNCCL.hpp)"),
    ("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "{dir}/nccl_trace_rank_", "torch 2.2",
     "the dump's path prefix (+ rank), on storage every node writes and you read after the job "
     "(default /tmp/nccl_trace_rank_ on each node; TORCH_FR_DUMP_TEMP_FILE is the newer name)"),
    ("NCCL_DEBUG", "WARN", "NCCL 2.0",
     "NCCL writes its warnings (nothing until something fails); without it NCCL_DEBUG_FILE "
     "stays empty (NCCL docs, env: NCCL_DEBUG)"),
    ("NCCL_DEBUG_FILE", "{dir}/nccl.%h.%p.log", "NCCL 2.2.12",
     "NCCL's own log, one file per process named by host (%h) and pid (%p) (NCCL docs, env: "
     "NCCL_DEBUG_FILE)"),
    ("NCCL_RAS_ENABLE", "1", "NCCL 2.24",
     "NCCL RAS (on by default from 2.24): `ncclras` on any node names processes dead or behind "
     "in collective counts (NCCL docs, troubleshooting/ras)"),
)
RAS_SINCE = (2, 24)


def explainable(env: dict[str, str] | None = None,
                nccl: tuple[tuple[int, ...] | None, str | None] = (None, None),
                dump_dir: str | None = None) -> dict[str, Any]:
    """The section that makes the next hang explainable (issue 22), as the recommendation
    document's ``explainable_hang``; :func:`explainable_lines` writes the env text from it.

    Each setting has its value, the version where it starts and its reason, and a ``state``:
    ``set``; ``set by the rules`` (a variable the rules already set keeps their value);
    ``needs --dump-dir`` (the two paths: shared storage ncclcheck cannot guess); ``needs NCCL
    >= 2.24`` (RAS, where the cluster's oldest NCCL, ``nccl``, predates it).

    >>> doc = explainable({}, ((2, 21, 5), "2.21.5"), "/shared/hang")
    >>> [(s["variable"], s["state"]) for s in doc["settings"]][-3:]
    [('NCCL_DEBUG', 'set'), ('NCCL_DEBUG_FILE', 'set'), ('NCCL_RAS_ENABLE', 'needs NCCL >= 2.24')]
    """
    env = env or {}
    oldest, text = nccl
    settings = []
    for var, value, since, why in EXPLAINABLE:
        state = "set"
        if var in env:
            state, value = "set by the rules", env[var]
        elif var == "NCCL_RAS_ENABLE" and oldest is not None and oldest < RAS_SINCE:
            state = "needs NCCL >= 2.24"
        elif "{dir}" in value and not dump_dir:
            state = "needs --dump-dir"
        settings.append({"variable": var, "value": value.replace("{dir}", dump_dir or "/shared/hang"),
                         "since": since, "reason": why, "state": state})
    return {"dump_dir": dump_dir, "oldest_nccl": text,
            "diagnose": f"ncclcheck diagnose {dump_dir}" if dump_dir else None,
            "settings": settings}


def explainable_lines(fmt: str, section: dict[str, Any]) -> list[str]:
    """The env (or shell) text of :func:`explainable`'s section, a part a user can drop.

    Each setting is written (not commented) after its reason and the version where it starts;
    one the rules set, RAS on an older NCCL and a path without ``--dump-dir`` are comments.

    >>> lines = explainable_lines("env", explainable({}, ((2, 21, 5), "2.21.5"), "/shared/hang"))
    >>> lines[0]
    '# --- make the next hang explainable (ncclcheck diagnose reads what these leave; drop this section to opt out) ---'
    >>> [ln for ln in lines if not ln.startswith("#")][3:]
    ['TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/shared/hang/nccl_trace_rank_', 'NCCL_DEBUG=WARN', 'NCCL_DEBUG_FILE=/shared/hang/nccl.%h.%p.log']
    """
    import shlex
    import textwrap

    out = ["# --- make the next hang explainable (ncclcheck diagnose reads what these leave; "
           "drop this section to opt out) ---"]
    if section["diagnose"]:
        out.append(f"# then, after a failed job: {section['diagnose']} "
                   "(create the folder first; neither torch nor NCCL does)")
    for s in section["settings"]:
        var, value, state = s["variable"], s["value"], s["state"]
        if state == "set by the rules":
            out.append(f"# {var}: set above by the rules ({value})")
            continue
        if state == "needs NCCL >= 2.24":
            out.append(f"# NCCL RAS: needs NCCL >= 2.24, the oldest NCCL here is "
                       f"{section['oldest_nccl']}: not set")
            continue
        out += ["# " + w for w in textwrap.wrap(f"{s['reason']}. From {s['since']} on.", 96,
                                                 break_long_words=False, break_on_hyphens=False)]
        line = f"{var}={value}" if fmt == "env" else f"export {var}={shlex.quote(value)}"
        out.append(f"# {line}   (set --dump-dir to shared storage to write it)"
                   if state == "needs --dump-dir" else line)
    out.append("# --- end of the explainable-hang section ---")
    return out


def render_output(doc: dict[str, Any], fmt: str) -> str:
    """The text of ``--format`` for a recommendation document."""
    if fmt in ("env", "shell"):
        return render(fmt, doc["env"], notes_for(doc), header_lines(doc, fmt), footer_lines(doc))
    return render(fmt, doc["env"], document=doc)


def problems(doc: dict[str, Any]) -> list[dict[str, str]]:
    """Findings plus conflicts, refused values and rule errors (as errors), for ``--fail-on``."""
    extra = [{"severity": "error"} for _ in (doc.get("conflicts") or []) + (doc.get("refused") or [])
             + (doc.get("errors") or [])]
    return list(doc.get("findings") or []) + extra
