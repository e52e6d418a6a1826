"""The one set of exit codes every ncclcheck command uses (listed in README)."""

from enum import IntEnum, unique


@unique
class ExitCode(IntEnum):
    """Process exit status."""

    OK = 0          #: success
    ERROR = 1       #: a runtime failure (a node failed, a collective timed out, ...)
    USAGE = 2       #: bad usage or bad input (click's own usage errors are 2 as well)
    FINDINGS = 3    #: findings at or above ``--fail-on SEVERITY``
