"""env: the NCCL-relevant environment, and nothing else of it.

Only what :func:`ncclcheck.host.envfilter.env_allowed` admits ever reaches this section: every
``NCCL_*`` and ``TORCH_NCCL_*`` variable, ``CUDA_VISIBLE_DEVICES``, and a short list of launcher,
library path and fabric variables (:data:`ncclcheck.host.envfilter.ENV_ALLOW_NAMES`). A secret in
the environment never appears in any output, because the host never hands it out; nor does the
secret of a ``user:secret@`` inside an allow-listed value (``MASTER_ADDR=tcp://user:secret@host``),
which the host replaces with ``***`` (:func:`ncclcheck.host.envfilter.hide_credentials`).

Sources: the allow-listed environment of the probing process.
"""

from __future__ import annotations

from typing import TypedDict

from ncclcheck.host.protocol import Host


class EnvData(TypedDict):
    """The ``env`` section's data."""

    nccl: dict[str, str]          # NCCL_* variables
    torch_nccl: dict[str, str]    # TORCH_NCCL_* variables
    other: dict[str, str]         # the allow-listed rest (CUDA_VISIBLE_DEVICES, launcher vars...)


def split_env(env: dict[str, str]) -> EnvData:
    """Group allow-listed variables by family.

    >>> split_env({"NCCL_DEBUG": "INFO", "TORCH_NCCL_BLOCKING_WAIT": "1", "RANK": "0"})
    {'nccl': {'NCCL_DEBUG': 'INFO'}, 'torch_nccl': {'TORCH_NCCL_BLOCKING_WAIT': '1'}, 'other': {'RANK': '0'}}
    """
    out = EnvData(nccl={}, torch_nccl={}, other={})
    for name in sorted(env):
        family = ("nccl" if name.startswith("NCCL_") else
                  "torch_nccl" if name.startswith("TORCH_NCCL_") else "other")
        out[family][name] = env[name]  # type: ignore[literal-required]
    return out


def collect(host: Host, errors: list[str]) -> EnvData:
    """The allow-listed environment, grouped."""
    return split_env(host.environ())
