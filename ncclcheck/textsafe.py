"""Text from input, made safe to print: control characters shown escaped, never sent raw.

A hostile log, hostfile, ``--env`` value or document field may hold terminal escape sequences
(``ESC ]`` to set the title, ``ESC [2J`` to clear the screen, a carriage return to overwrite the
line). Everything printed from input goes through :func:`printable`; diagnose's own renderer is
issue 13's.
"""

from __future__ import annotations

import re

# C0 controls but tab, DEL, C1 controls, and the bidirectional overrides and isolates that
# reorder what a terminal shows (the "Trojan Source" characters).
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object) -> str:
    """``text`` with every control character written as ``\\xNN`` (``\\uNNNN``).

    >>> printable("ok\\x1b]0;pwned\\x07 line\\r\\nnext\\ttab")
    'ok\\\\x1b]0;pwned\\\\x07 line\\\\x0d\\\\x0anext\\ttab'
    """
    return _CONTROL.sub(_escape, str(text))
