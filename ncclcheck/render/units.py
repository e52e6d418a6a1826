"""Human units for terminal output (the JSON keeps base units)."""

from __future__ import annotations

from typing import Any


def human_bytes(value: Any, decimals: int | None = None) -> str:
    """Bytes in binary units, as ``df -h`` and nccl-tests sizes read: three significant digits
    (the terminal), or ``decimals`` places when the value is not whole (the report's tables).

    >>> human_bytes(67108864), human_bytes(2164140707840), human_bytes(None), human_bytes(512)
    ('64 MiB', '1.97 TiB', '-', '512 B')
    >>> human_bytes(1082055393280), human_bytes(85899345920)
    ('1008 GiB', '80 GiB')
    >>> human_bytes(67108864, 1), human_bytes(85520809984, 1), human_bytes(None, 1), human_bytes(512, 1)
    ('64 MiB', '79.6 GiB', '-', '512 B')
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    for unit, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if abs(value) >= unit:
            shown = value / unit
            if decimals is None:
                return f"{shown:.0f} {name}" if shown >= 100 else f"{shown:.3g} {name}"
            return f"{shown:.0f} {name}" if shown == int(shown) else f"{shown:.{decimals}f} {name}"
    return f"{int(value)} B" if decimals is None else f"{value:.0f} B"


def cell_text(value: Any, flat: bool = False) -> str:
    """A table cell's text: None and empty as '-', bools as yes/no, floats trimmed, lists joined,
    mappings as ``k=v``. ``flat`` (the terminal's facts panels) leaves out what is nested: a list
    inside a list, a mapping inside either; a list inside a mapping is shown in brackets.

    >>> cell_text(None), cell_text(True), cell_text(["a", 1]), cell_text(2.50), cell_text({})
    ('-', 'yes', 'a, 1', '2.5', '-')
    >>> cell_text([1, [2], {"a": 1}]), cell_text([1, [2], {"a": 1}], flat=True)
    ('1, 2, a=1', '1')
    >>> cell_text({"a": [1, 2], "b": {"c": 1}}), cell_text({"a": [1, 2], "b": {"c": 1}}, flat=True)
    ('a=1, 2, b=c=1', 'a=[1, 2]')
    """
    if value is None or value == [] or value == {}:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        if flat:
            value = [v for v in value if not isinstance(v, (dict, list))]
        return ", ".join(cell_text(v, flat) for v in value) or "-"
    if isinstance(value, dict):
        if not flat:
            return ", ".join(f"{k}={cell_text(v)}" for k, v in value.items())
        return ", ".join(f"{k}=[{cell_text(v, True)}]" if isinstance(v, list)
                         else f"{k}={cell_text(v, True)}"
                         for k, v in value.items() if not isinstance(v, dict)) or "-"
    return str(value)


def yes_no(value: Any) -> str:
    """'yes', 'no' or '-' for a tri-state flag.

    >>> yes_no(True), yes_no(False), yes_no(None)
    ('yes', 'no', '-')
    """
    return "-" if value is None else ("yes" if value else "no")


class Breakable:
    """A path, URL or list of names that a narrow column wraps only after a separator (``/``,
    ``,``, a space), never inside a name: ``.../site-packages/`` then ``nvidia/nccl/...``, not
    ``site-package`` then ``s/nvidia``. Only a single part wider than the column is folded.

    >>> Breakable("/usr/lib/x86_64-linux-gnu/libnccl.so.2").lines(16)
    ['/usr/lib/', 'x86_64-linux-gnu/', 'libnccl.so.2']
    >>> Breakable("see https://github.com/NVIDIA/nccl").lines(24)
    ['see https://github.com/', 'NVIDIA/nccl']
    >>> Breakable("a, b, c").lines(4), Breakable("eth0").least
    (['a,', 'b, c'], 4)
    """

    def __init__(self, text: Any, style: str = "", spaces: bool = True) -> None:
        """``spaces=False``: break only after ``/`` and ``, `` (a list of short phrases)."""
        import re

        self.text, self.style = "-" if text is None else str(text), style
        pattern = (r"(?:\w+://)?[^/, ]*(?:/|, ?| )|[^/, ]+$" if spaces  # never after "https:/"
                   else r"(?:\w+://)?[^/,]*(?:/|, ?)|[^/,]+$")
        self.parts = re.findall(pattern, self.text) or [self.text]
        self.least = max(len(p.rstrip()) for p in self.parts)

    def lines(self, width: int) -> list[str]:
        """The text packed into lines of at most ``width`` (a longer part: its own line)."""
        out: list[str] = []
        for part in self.parts:
            if out and len(out[-1]) + len(part.rstrip()) <= width:
                out[-1] += part
            else:
                out.append(part)
        return [line.rstrip() if line.rstrip() else line for line in out]

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        return Measurement(min(self.least, options.max_width),
                           min(len(self.text), options.max_width))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        yield Text("\n".join(self.lines(options.max_width)), style=self.style,
                   overflow="fold")
