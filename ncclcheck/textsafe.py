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


_CONTROL_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable_lines(text: str) -> str:
    """As :func:`printable`, but newlines stay: for a whole page (a report, a table).

    >>> printable_lines("a\\x1b[2J\\nb")
    'a\\\\x1b[2J\\nb'
    """
    return _CONTROL_LINES.sub(_escape, text)


#: Longest run of non-space characters an error line repeats from its input.
TOKEN_LIMIT = 200


def shorten(text: object, limit: int = TOKEN_LIMIT) -> str:
    """``text`` with every run of more than ``limit`` non-space characters cut, and an ellipsis
    (``...``) where it was cut: a 1 MiB host name gives a short error line.

    >>> shorten("bad host " + "x" * 500 + " here")[:20], len(shorten("x" * 500))
    ('bad host xxxxxxxxxxx', 203)
    """
    text = str(text)
    if len(text) <= limit:
        return text
    return re.sub(r"\S{%d,}" % (limit + 1), lambda m: m.group()[:limit] + "...", text)


def safe_console(**kwargs: object) -> object:
    """A rich Console that escapes control characters in the text it prints.

    Its own styling is untouched: rich writes colours from each segment's style, while the
    text of the segments (what came from input) is escaped, just before it is written.
    Output that is not a terminal (a pipe, a log file, a test's capture) is not wrapped: a line
    printed is one line, whatever the width, so that grep finds it; tables and panels still
    fit the console's width. ``COLUMNS`` in the environment asks for that width: lines wrap
    at it then (``COLUMNS=80 ncclcheck probe | less``).
    """
    import os

    from rich.console import Console
    from rich.segment import Segment

    class SafeConsole(Console):
        def _render_buffer(self, buffer):  # type: ignore[no-untyped-def]
            return super()._render_buffer(
                seg if seg.control else Segment(printable_lines(seg.text), seg.style)
                for seg in buffer)

    console = SafeConsole(**kwargs)
    if "soft_wrap" not in kwargs and not console.is_terminal and not os.environ.get("COLUMNS"):
        console.soft_wrap = True
    return console
