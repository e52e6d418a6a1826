"""Write a recommended environment as a file that every reader takes the same way.

One ``nccl.env`` is read by very different parsers, and they agree only on a small subset:

* NCCL's own reader (``setEnvFile`` in src/misc/param.cc, used for ``NCCL_CONF_FILE``,
  ``~/.nccl.conf`` and ``/etc/nccl.conf``) skips lines whose *first* character is ``#``, splits
  the rest at the first ``=``, and keeps the value byte for byte: no quote removal, no escapes,
  no trimming, no inline comments; a line without ``=`` is skipped; values stop at 1023 bytes.
  ``setenv(name, value, 0)`` never overrides a variable already in the environment.
* bash (``set -a; . nccl.env``) applies shell quoting, expansion and word splitting.
* python-dotenv, ``docker --env-file`` and systemd ``EnvironmentFile=`` each have their own
  rules for quotes, ``#`` and whitespace.
* DeepSpeed reads ``.deepspeed_env`` with ``line.split('=', 1)`` on *every* line (a comment or
  blank line raises), then sends ``export KEY=VAL`` through pdsh to a remote shell.

So values are written bare, and only values made of characters that mean nothing special to any
of them are written at all (:data:`SAFE_VALUE`): letters, digits and ``_ . , : / = ^ + @ % -``.
A value with a space, a quote, ``$``, a backslash, ``#``, ``;``, ``~``, a glob character or a
control character is refused (:func:`unsafe_reason`): the caller reports it as a finding instead
of writing something that one reader would take differently. Comments are whole lines starting
with ``#`` in column 0, which every reader (except DeepSpeed's, which gets none) skips.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from typing import Any

#: From the "Debugging" section of NCCL's env docs (env.rst): those that pin a choice NCCL makes
#: itself (:mod:`ncclcheck.rules.env_debug_vars_set`; ``diagnose`` reads it without the rules).
DEBUG_VARS = frozenset({
    "NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NRINGS",
    "NCCL_MAX_NRINGS", "NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_BUFFSIZE", "NCCL_NTHREADS",
    "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_P2P_DIRECT_DISABLE", "NCCL_SHM_DISABLE",
    "NCCL_CHECKS_DISABLE", "NCCL_CHECK_POINTERS", "NCCL_LAUNCH_MODE", "NCCL_NVB_DISABLE",
    "NCCL_PXN_DISABLE", "NCCL_P2P_PXN_LEVEL", "NCCL_P2P_NET_CHUNKSIZE", "NCCL_P2P_LL_THRESHOLD",
    "NCCL_TREE_THRESHOLD", "NCCL_LL_THRESHOLD", "NCCL_SET_STACK_SIZE",
})

#: Output formats of ``ncclcheck recommend --format``.
FORMATS = ("env", "shell", "deepspeed", "json")
SAFE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.,:/=^+@%-]+$")
#: NCCL's reader copies at most 1023 bytes of a value (src/misc/param.cc ``envValue[1024]``).
MAX_VALUE_LEN = 1000
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def unsafe_reason(name: str, value: Any) -> str | None:
    """Why ``name=value`` cannot be written safely for every reader, or None when it can.

    >>> unsafe_reason("NCCL_SOCKET_IFNAME", "=eth0,ens5"), unsafe_reason("NCCL_IB_HCA", "^=mlx5_1:1")
    (None, None)
    >>> unsafe_reason("NCCL_DEBUG_FILE", "/tmp/nccl log.%h")
    "value '/tmp/nccl log.%h' contains ' ': bash splits words at spaces while NCCL, docker and systemd keep them"
    >>> unsafe_reason("NCCL_X", "$(reboot)")
    "value '$(reboot)' contains '$': bash expands '$' while NCCL, docker and systemd keep it"
    >>> unsafe_reason("BAD NAME", "1")
    "name 'BAD NAME' is not a valid environment variable name"
    """
    if not isinstance(name, str) or not SAFE_NAME.match(name):
        return f"name {name!r} is not a valid environment variable name"
    if not isinstance(value, str):
        return f"value {value!r} is not a string"
    if value == "":
        return "the value is empty: NCCL treats an empty value as unset"
    if len(value) > MAX_VALUE_LEN:
        return f"the value is {len(value)} characters long; NCCL's reader keeps only 1023"
    if SAFE_VALUE.match(value):
        return None
    bad = next(c for c in value if not SAFE_VALUE.match(c))
    shown = repr(bad)
    if _CONTROL.match(bad):
        return f"value {value!r} contains the control character {shown}: no env file can hold it"
    if bad == " " or bad == "\t":
        why = "bash splits words at spaces while NCCL, docker and systemd keep them"
    elif bad in "'\"":
        why = "bash, dotenv and systemd remove quotes while NCCL and docker keep them"
    elif bad == "$" or bad == "`":
        why = f"bash expands {shown} while NCCL, docker and systemd keep it"
    elif bad == "\\":
        why = "bash and systemd treat a backslash as an escape while NCCL and docker keep it"
    elif bad == "#":
        why = "dotenv and shells may read '#' as a comment while NCCL keeps it"
    elif bad == "~":
        why = "bash expands '~' to a home directory while NCCL keeps it"
    else:
        why = f"{shown} is special to the shell that sources the file"
    return f"value {value!r} contains {shown}: {why}"


def split_safe(env: dict[str, str]) -> tuple[dict[str, str], list[dict[str, str]]]:
    """Separate the variables that can be written from those that cannot (with the reason).

    >>> split_safe({"NCCL_A": "1", "NCCL_B": "a b"})[1][0]["var"]
    'NCCL_B'
    """
    ok: dict[str, str] = {}
    refused: list[dict[str, str]] = []
    for name, value in env.items():
        why = unsafe_reason(name, value)
        if why:
            refused.append({"var": name, "value": str(value), "why": why})
        else:
            ok[name] = value
    return ok, refused


def comment_line(text: str) -> str:
    """One ``# ...`` line; control characters become spaces so a comment never ends early.

    >>> comment_line("two\\nlines")
    '# two lines'
    """
    return ("# " + _CONTROL.sub(" ", str(text))).rstrip()


def _check(env: dict[str, str]) -> None:
    for name, value in env.items():
        why = unsafe_reason(name, value)
        if why:
            raise ValueError(f"{name}: {why}")


def _layout(assignments: list[tuple[str, str]], notes: dict[str, list[str]],
            header: Iterable[str], footer: Iterable[str]) -> str:
    """Header, then each assignment under its notes (a blank line before each noted block;
    an assignment without notes stays with the one above it), then the footer."""
    lines = [comment_line(h) for h in header]
    for i, (name, line) in enumerate(assignments):
        if lines and (notes.get(name) or i == 0):
            lines.append("")
        lines.extend(comment_line(n) for n in notes.get(name, []))
        lines.append(line)
    footer = list(footer)
    if footer:
        lines.append("")
        lines.extend(comment_line(f) for f in footer)
    return "\n".join(lines) + "\n" if lines else ""


def render_env(env: dict[str, str], notes: dict[str, list[str]] | None = None,
               header: Iterable[str] = (), footer: Iterable[str] = ()) -> str:
    """``KEY=VALUE`` lines with ``#`` comment lines: for NCCL_CONF_FILE, /etc/nccl.conf,
    ``docker --env-file``, systemd ``EnvironmentFile=``, python-dotenv and ``set -a; . FILE``.

    >>> print(render_env({"NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}, {"NCCL_NET": ["why"]}, ["hi"]), end="")
    # hi
    <BLANKLINE>
    # why
    NCCL_NET=Socket
    NCCL_IB_DISABLE=1
    """
    _check(env)
    return _layout([(k, f"{k}={v}") for k, v in env.items()], notes or {}, header, footer)


def render_shell(env: dict[str, str], notes: dict[str, list[str]] | None = None,
                 header: Iterable[str] = (), footer: Iterable[str] = ()) -> str:
    """``export KEY=VALUE`` lines (values shell-quoted), for ``source nccl.sh``.

    >>> print(render_shell({"NCCL_SOCKET_IFNAME": "^docker,lo"}), end="")
    export NCCL_SOCKET_IFNAME='^docker,lo'
    """
    _check(env)
    return _layout([(k, f"export {k}={shlex.quote(v)}") for k, v in env.items()], notes or {},
                   header, footer)


def render_deepspeed(env: dict[str, str]) -> str:
    """A ``.deepspeed_env``: ``KEY=VALUE`` lines only (DeepSpeed's reader splits every line at
    ``=``, so it gets no comments and no blank lines).

    >>> render_deepspeed({"NCCL_IB_DISABLE": "1", "NCCL_NET": "Socket"})
    'NCCL_IB_DISABLE=1\\nNCCL_NET=Socket\\n'
    >>> render_deepspeed({})
    ''
    """
    _check(env)
    return "".join(f"{name}={value}\n" for name, value in env.items())


def render(fmt: str, env: dict[str, str], notes: dict[str, list[str]] | None = None,
           header: Iterable[str] = (), footer: Iterable[str] = (),
           document: dict[str, Any] | None = None) -> str:
    """Render in ``fmt`` (one of :data:`FORMATS`); ``json`` prints ``document``."""
    if fmt == "env":
        return render_env(env, notes, header, footer)
    if fmt == "shell":
        return render_shell(env, notes, header, footer)
    if fmt == "deepspeed":
        return render_deepspeed(env)
    if fmt == "json":
        return json.dumps(document if document is not None else env, indent=2,
                          sort_keys=True, default=str) + "\n"
    raise ValueError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")


def parse_env_text(text: str) -> dict[str, str]:
    """Read an env file exactly as NCCL's ``setEnvFile`` does (for ``--verify`` and tests).

    >>> parse_env_text("# c\\nNCCL_A==eth0\\n  NCCL_B=1\\nnoequals\\nNCCL_C='x'\\n")
    {'NCCL_A': '=eth0', '  NCCL_B': '1', 'NCCL_C': "'x'"}
    """
    out: dict[str, str] = {}
    for line in text.split("\n"):
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        out.setdefault(name[:1023], value[:1023])
    return out
