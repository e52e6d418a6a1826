"""Terminal rendering with rich. Only ``cli/`` calls into here; nothing here computes facts."""
