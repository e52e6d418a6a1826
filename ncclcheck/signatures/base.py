"""What a failure signature is: an id, words for the user, a citation, and how to spot it.

A :class:`Signature` is matched line by line: ``keywords`` are a cheap prefilter (plain substring
tests), ``patterns`` the regexes that decide. ``scope`` says which lines it looks at: ``"warn"``
for NCCL WARN lines and non-NCCL text (Python tracebacks repeat NCCL's WARN text after
``Last error:``), ``"info"`` for NCCL INFO lines as well. ``explain`` may refine the message,
cause, fix or severity from the match (an IB completion status, a CUDA error code), or veto it by
returning None. ``fallback`` signatures (a bare "NCCL error" from torch) are only reported when
nothing more specific at error level was found.

Signatures without patterns are *derived*: they are raised by the checks in
:mod:`ncclcheck.judge.derived` from the state of the whole log (cross-rank disagreements,
a wrong interface, a silent fallback to sockets), and only carry the words and the citation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

SEVERITIES = ("info", "warning", "error")


@dataclass(frozen=True)
class Detail:
    """What one matched line adds to a finding (everything optional)."""

    message: str = ""                     #: one line, specific to what was seen
    variant: str = ""                     #: groups occurrences (e.g. ``status 12``)
    cause: str = ""                       #: overrides the signature's cause
    fix: str = ""                         #: overrides the signature's fix
    severity: str = ""                    #: overrides the signature's severity
    rank: Optional[int] = None            #: a rank named in the line itself
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Signature:
    """One failure (or notable) signature."""

    id: str                               #: kebab-case; shared with the rules engine where it overlaps
    title: str                            #: one line
    severity: str                         #: info, warning or error
    cause: str                            #: why it happens, restating NCCL's docs/source/maintainers
    fix: str                              #: what to do
    docs: str                             #: citation(s): docs URL, source file, issue URL
    patterns: tuple[re.Pattern[str], ...] = ()
    keywords: tuple[str, ...] = ()        #: any of these must be in the text before regexes run
    scope: str = "warn"                   #: "warn" or "info" (see module docstring)
    info_starts: tuple[str, ...] = ()     #: with scope "info": how the INFO messages begin
    explain: Optional[Callable[[re.Match[str]], Optional[Detail]]] = None
    fallback: bool = False                #: reported only when no error-level finding explains more

    def match(self, text: str) -> Optional[Detail]:
        """A :class:`Detail` when ``text`` shows this signature, else None.

        >>> sig = Signature("x", "X", "error", "c", "f", "d", (re.compile(r"boom (\\d+)"),), ("boom",))
        >>> sig.match("a boom 7 here"), sig.match("quiet")
        (Detail(message='', variant='', cause='', fix='', severity='', rank=None, facts={}), None)
        """
        for kw in self.keywords:
            if kw in text:
                break
        else:
            if self.keywords:
                return None
        for pattern in self.patterns:
            m = pattern.search(text)
            if m:
                if self.explain is None:
                    return Detail()
                detail = self.explain(m)       # None: the explainer vetoed this match
                if detail is not None:
                    return detail
        return None


def compile_all(*patterns: str, flags: int = 0) -> tuple[re.Pattern[str], ...]:
    """Compile regexes once, at import."""
    return tuple(re.compile(p, flags) for p in patterns)


NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
