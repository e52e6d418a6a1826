"""What reaches the remote shell, checked and quoted, and why ssh itself failed.

The one string ssh sends is built only with :func:`shlex.join` (see :mod:`ncclcheck.remote`).
"""

from __future__ import annotations

import re
import shlex

from ncclcheck.errors import BadInput


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+-]*$")
_SSH_ERROR_LINE = re.compile(
    r"^(ssh: |kex_exchange_identification|Connection (closed|reset|timed out)|"
    r"Host key verification failed|.*Permission denied|Bad owner or permissions|"
    r"ssh_exchange_identification|.*: No route to host|channel \d+: open failed|"
    r"Could not resolve|Too many authentication failures|.*port \d+: )", re.I)


def validate_remote_python(path: str) -> str:
    """Return ``path`` if it is an absolute path without shell metacharacters, else BadInput.

    >>> validate_remote_python("/opt/conda/bin/python3")
    '/opt/conda/bin/python3'
    >>> validate_remote_python("python3; reboot")
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: --remote-python 'python3; reboot': must be an absolute path of letters, digits and _ . / + -
    """
    if not _SAFE_PATH.match(path) or path.endswith("/"):
        raise BadInput(f"--remote-python {path!r}: must be an absolute path of letters, "
                       "digits and _ . / + -")
    return path


def validate_env(env: dict | None) -> dict[str, str]:
    """Check variable names (``[A-Za-z_][A-Za-z0-9_]*``); values may be anything (quoted later).

    >>> validate_env({"NCCL_DEBUG": "INFO"})
    {'NCCL_DEBUG': 'INFO'}
    >>> validate_env({"A B": "1"})
    Traceback (most recent call last):
    ...
    ncclcheck.errors.BadInput: environment variable name 'A B' is not valid
    """
    checked: dict[str, str] = {}
    for name, value in (env or {}).items():
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise BadInput(f"environment variable name {name!r} is not valid")
        checked[name] = str(value)
    return checked


def remote_command(remote_argv: list[str], env: dict | None = None) -> str:
    """The one string the remote shell runs: ``env K=V ... argv`` joined with :func:`shlex.join`.

    >>> print(remote_command(["echo", "$(touch /tmp/pwned)"], {"X": "a b"}))
    env 'X=a b' echo '$(touch /tmp/pwned)'
    """
    argv = [str(a) for a in remote_argv]
    if not argv:
        raise BadInput("empty remote command")
    variables = validate_env(env)
    if variables:
        argv = ["env"] + [f"{k}={v}" for k, v in variables.items()] + argv
    return shlex.join(argv)


def ssh_failure(label: str, stderr: str) -> str:
    """One line saying why ssh itself failed (exit 255), from its stderr.

    >>> ssh_failure("node2", "root@198.18.0.12: Permission denied (publickey).\\r\\n")
    'node2: permission denied (publickey)'
    >>> ssh_failure("node2", "ssh: connect to host 198.18.0.99 port 22: Connection timed out\\n")
    'node2: ssh: connect to host 198.18.0.99 port 22: Connection timed out'
    """
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for line in lines:
        if "Permission denied" in line:
            return f"{label}: permission denied{line.split('Permission denied', 1)[1].rstrip('.')}"
        if line.startswith("Host key verification failed"):
            return f"{label}: host key verification failed (check known_hosts)"
    for line in lines:
        if _SSH_ERROR_LINE.match(line):
            return f"{label}: {line}"
    return f"{label}: ssh failed (exit 255){': ' + lines[-1] if lines else ''}"
