"""Human units for terminal output (the JSON keeps base units)."""

from __future__ import annotations

from typing import Any


def human_bytes(value: Any) -> str:
    """Bytes in binary units.

    >>> human_bytes(67108864), human_bytes(2164140707840), human_bytes(None), human_bytes(512)
    ('64 MiB', '1.97 TiB', '-', '512 B')
    >>> human_bytes(1082055393280), human_bytes(85899345920)
    ('1008 GiB', '80 GiB')
    """
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            if unit == "B":
                return f"{int(value)} B"
            text = f"{value:.0f}" if value >= 100 else f"{value:.3g}"
            return f"{text} {unit}"
        value /= 1024
    return "-"


def yes_no(value: Any) -> str:
    """'yes', 'no' or '-' for a tri-state flag.

    >>> yes_no(True), yes_no(False), yes_no(None)
    ('yes', 'no', '-')
    """
    return "-" if value is None else ("yes" if value else "no")
