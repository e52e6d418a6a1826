"""Terminal rendering with rich. Only ``cli.py`` calls into here; nothing here computes facts."""
