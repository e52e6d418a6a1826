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


def yes_no(value: Any) -> str:
    """'yes', 'no' or '-' for a tri-state flag.

    >>> yes_no(True), yes_no(False), yes_no(None)
    ('yes', 'no', '-')
    """
    return "-" if value is None else ("yes" if value else "no")
