"""The NCCL config files: NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf (first value wins)."""

from __future__ import annotations

from typing import Any, Optional

from ncclcheck.host.protocol import Host
from ncclcheck.probes.nccl.libs import _join
from ncclcheck.probes.nccl.types import SYSTEM_CONF, ConfigFile



def parse_conf(text: str) -> tuple[dict[str, str], list[str]]:
    """Values of an NCCL config file, read the way NCCL reads it, plus suspicious lines.

    Recorded /etc/nccl.conf of a RoCE node on NCCL 2.18 (tests/fixtures/hosts/a100-roce-bond)::

        # RoCE v2 fabric: GID 3 is RoCE v2 over IPv4 on bond0
        NCCL_IB_GID_INDEX=3
        NCCL_SOCKET_IFNAME=bond0
        NCCL_IB_HCA=mlx5_bond_0

    NCCL (src/misc/param.cc ``setEnvFile``) skips lines starting with ``#``, splits at the first
    ``=``, strips nothing but the newline, and never overwrites a variable already set, so the
    first occurrence wins.

    >>> parse_conf("# RoCE v2 fabric: GID 3 is RoCE v2 over IPv4 on bond0\\nNCCL_IB_GID_INDEX=3\\n"
    ...            "NCCL_SOCKET_IFNAME=bond0\\nNCCL_IB_HCA=mlx5_bond_0\\n")
    ({'NCCL_IB_GID_INDEX': '3', 'NCCL_SOCKET_IFNAME': 'bond0', 'NCCL_IB_HCA': 'mlx5_bond_0'}, [])
    >>> parse_conf("NCCL_IB_GID_INDEX=3\\nNCCL_IB_GID_INDEX=0\\n")[0]  # the first one wins
    {'NCCL_IB_GID_INDEX': '3'}
    >>> parse_conf("export NCCL_DEBUG=INFO\\nNCCL_IB_HCA = mlx5_0\\n")[1]
    ... # doctest: +NORMALIZE_WHITESPACE
    ["line 1: name 'export NCCL_DEBUG' has spaces: NCCL sets that name, not the variable meant",
     "line 2: name 'NCCL_IB_HCA ' has spaces: NCCL sets that name, not the variable meant",
     "line 2: value ' mlx5_0' has surrounding spaces or quotes: NCCL keeps them"]
    """
    values: dict[str, str] = {}
    problems: list[str] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            if line.strip():
                problems.append(f"line {number}: no '=': NCCL ignores it")
            continue
        name, value = name[:1023], value[:1023]
        if name != name.strip() or " " in name or "\t" in name:
            problems.append(f"line {number}: name {name!r} has spaces: NCCL sets that name, "
                            "not the variable meant")
        if value != value.strip() or value[:1] in ("'", '"'):
            problems.append(f"line {number}: value {value!r} has surrounding spaces or quotes: "
                            "NCCL keeps them")
        values.setdefault(name, value)
    return values, problems


def _config_files(host: Host, env: dict[str, str], python: Optional[dict[str, Any]],
                  errors: list[str]) -> tuple[list[ConfigFile], dict[str, str]]:
    """NCCL_CONF_FILE (or ~/.nccl.conf when unset), then /etc/nccl.conf; first value wins."""
    order: list[tuple[str, str]] = []
    user_file = env.get("NCCL_CONF_FILE", "")
    if user_file:
        order.append((user_file, "NCCL_CONF_FILE"))
    elif isinstance((python or {}).get("home"), str) and python["home"].startswith("/"):
        order.append((_join(python["home"], ".nccl.conf"), "home"))
    order.append((SYSTEM_CONF, "system"))
    files: list[ConfigFile] = []
    merged: dict[str, str] = {}
    for path, source in order:
        text = host.read(path)
        if text is None:
            if source == "NCCL_CONF_FILE":
                errors.append(f"NCCL_CONF_FILE names {path}, which cannot be read")
            continue
        values, problems = parse_conf(text)
        if source == "NCCL_CONF_FILE" and not path.startswith("/"):
            problems.insert(0, "relative path: NCCL opens it from the job's working directory")
        files.append(ConfigFile(path=path, source=source, values=values, problems=problems))
        for key, value in values.items():
            merged.setdefault(key, value)
    return files, merged
