"""Candidate configurations: ``--env KEY=VALUE`` and ``--env-file nccl.env`` (pure, strict).

An env file is a list of assignments that a shell could ``source`` with no side effect, and
that NCCL's own config file reader (``NAME=value`` per line, ``#`` comments) also accepts::

    # nccl.env
    NCCL_SOCKET_IFNAME==eth0
    export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1'
    NCCL_IB_GID_INDEX="3"

The reader refuses everything else, with the file and line: command substitution, variable
expansion, escapes, several assignments on one line, and names outside :data:`ALLOWED_PREFIXES`
(``LD_PRELOAD=...`` or ``PATH=...`` are not a network configuration). Nothing is ever evaluated.
"""

from __future__ import annotations

import re
from pathlib import Path

from ncclcheck.errors import BadInput
from ncclcheck.textsafe import printable

#: Variables a candidate configuration may set: NCCL's and PyTorch's knobs, gloo's interface,
#: the network plugins' own (libfabric, UCX) and CUDA's connection settings.
ALLOWED_PREFIXES = ("NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "GLOO_", "FI_", "UCX_",
                    "CUDA_DEVICE_")
#: Set by bench itself for every run; a candidate cannot change them.
RESERVED = frozenset({"NCCL_DEBUG_FILE"})

_NAME = r"[A-Z_][A-Z0-9_]*"
_LINE_RE = re.compile(rf"^(?:export\s+)?(?P<name>{_NAME})=(?P<value>.*)$")
_BARE_RE = re.compile(r"^[A-Za-z0-9_.,:=^/+@%-]*$")
_DOUBLE_FORBIDDEN = set('$`\\"!')
MAX_VALUE = 4096
#: Settings one run may carry, and their size in all: every rank's environment holds them,
#: and the spec that carries them to the nodes is one argument (Linux: 128 KiB at most).
MAX_SETTINGS = 512
MAX_ENV_BYTES = 32 * 1024


def _unquote(raw: str) -> str | None:
    """The value of a right-hand side, or None when a shell would do more than assign it."""
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        inner = raw[1:-1]
        return None if "'" in inner else inner
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        inner = raw[1:-1]
        return None if set(inner) & _DOUBLE_FORBIDDEN else inner
    return raw if _BARE_RE.match(raw) else None


def check_name(name: str, source: str) -> None:
    """Refuse a variable a candidate configuration may not set."""
    if not re.fullmatch(_NAME, name):
        raise BadInput(f"{source}: {name!r} is not an environment variable name")
    if name in RESERVED:
        raise BadInput(f"{source}: {name} is set by ncclcheck bench itself")
    if not name.startswith(ALLOWED_PREFIXES):
        raise BadInput(f"{source}: {name} is not a network setting (allowed: "
                       f"{', '.join(p + '*' for p in ALLOWED_PREFIXES)})")


def parse_env_text(text: str, source: str = "env file") -> dict[str, str]:
    """Parse an env file's text into ``{name: value}``; later lines win.

    >>> parse_env_text("# tuned\\nNCCL_SOCKET_IFNAME==eth0\\nexport NCCL_IB_HCA='^mlx5_2'\\n")
    {'NCCL_SOCKET_IFNAME': '=eth0', 'NCCL_IB_HCA': '^mlx5_2'}
    >>> parse_env_text("NCCL_ALGO=$(reboot)", "a.env")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: a.env:1: NCCL_ALGO: value must be plain text or quoted without $, `, \\ or !
    """
    env: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        where = f"{source}:{number}"
        match = _LINE_RE.match(stripped)
        if not match:
            raise BadInput(f"{where}: expected NAME=value (optionally after 'export'), "
                           f"got {stripped[:60]!r}")
        name, raw = match.group("name"), match.group("value")
        check_name(name, where)
        value = _unquote(raw)
        if value is None:
            raise BadInput(f"{where}: {name}: value must be plain text or quoted without "
                           "$, `, \\ or !")
        if len(value) > MAX_VALUE:
            raise BadInput(f"{where}: {name}: value longer than {MAX_VALUE} characters")
        if _has_control(value):
            raise BadInput(f"{where}: {name}: value holds a control character")
        env[name] = value
    return check_size(env, source)


def load_env_file(path: str | Path) -> dict[str, str]:
    """Read and parse an env file; every failure is one :class:`BadInput` line."""
    from ncclcheck.infile import read_bytes

    raw = read_bytes(path, "envfile")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{path}: not UTF-8 text") from None
    return parse_env_text(text, str(path))


def parse_assignment(text: str) -> tuple[str, str]:
    """One ``--env KEY=VALUE`` (the value is taken literally: no quotes needed).

    >>> parse_assignment("NCCL_ALGO=Ring")
    ('NCCL_ALGO', 'Ring')
    >>> parse_assignment("NCCL_ALGO")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: --env NCCL_ALGO: expected KEY=VALUE
    """
    name, sep, value = text.partition("=")
    if not sep:
        raise BadInput(f"--env {text}: expected KEY=VALUE")
    check_name(name, f"--env {text}")
    if "\n" in value or "\0" in value or len(value) > MAX_VALUE:
        raise BadInput(f"--env {name}: value must be one line of at most {MAX_VALUE} characters")
    if _has_control(value):
        raise BadInput(f"--env {name}: value holds a control character "
                       f"({printable(value)[:80]})")
    return name, value


def _has_control(value: str) -> bool:
    return printable(value) != value


def check_size(env: dict[str, str], source: str) -> dict[str, str]:
    """Refuse a configuration too large to hand to the ranks (:data:`MAX_SETTINGS`,
    :data:`MAX_ENV_BYTES`), before anything starts."""
    size = sum(len(k) + len(v) + 2 for k, v in env.items())
    if len(env) > MAX_SETTINGS or size > MAX_ENV_BYTES:
        raise BadInput(f"{source}: {len(env)} settings, {size} bytes; a run takes at most "
                       f"{MAX_SETTINGS} settings and {MAX_ENV_BYTES // 1024} KiB")
    return env


def candidate_env(assignments: list[str] | tuple[str, ...] = (),
                  files: list[str] | tuple[str, ...] = ()) -> dict[str, str]:
    """The configuration to run under: env files in order, then ``--env`` (which wins)."""
    env: dict[str, str] = {}
    for path in files:
        env.update(load_env_file(path))
    for text in assignments:
        name, value = parse_assignment(text)
        env[name] = value
    return check_size(env, "--env and --env-file")


def content_labels(envs: list[dict[str, str]], names: list[str]) -> list[str]:
    """Each ``--compare`` candidate named by what sets it apart (the settings that differ
    between the files), not by its file name; the file name only where nothing differs.

    >>> content_labels([{"NCCL_SOCKET_IFNAME": "=eth0", "NCCL_DEBUG": "WARN"},
    ...                 {"NCCL_SOCKET_IFNAME": "=eth1", "NCCL_DEBUG": "WARN"}, {}],
    ...                ["c/NCCL_SOCKET_IFNAME-1.env", "c/NCCL_SOCKET_IFNAME-2.env", "base.env"])
    ['NCCL_SOCKET_IFNAME==eth0', 'NCCL_SOCKET_IFNAME==eth1', "NCCL's defaults"]
    >>> content_labels([{"A": "1"}, {"A": "1"}], ["x.env", "y.env"])
    ['x.env', 'y.env']
    """
    import os

    keys = sorted({k for env in envs for k in env})
    setting = [env for env in envs if env]  # an empty file is "NCCL's defaults" by itself
    differ = ([k for k in keys if len({env.get(k) for env in setting}) > 1]
              if len(setting) > 1 else keys if len(envs) > 1 else [])
    labels = []
    for env, name in zip(envs, names):
        said = " ".join(f"{k}={env[k]}" for k in differ if k in env)
        labels.append(said or ("NCCL's defaults" if not env and differ
                               else os.path.basename(name)))
    for i, label in enumerate(labels):
        if labels.count(label) > 1:
            labels[i] = f"{label} ({os.path.basename(names[i])})"
    return labels
