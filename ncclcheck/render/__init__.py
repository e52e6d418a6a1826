"""Terminal rendering with rich. ``cli/`` and ``benchcmd`` call into here; nothing here computes
facts."""
