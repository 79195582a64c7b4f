"""Plumbing: git-style low-level commands. Each module lists its click commands in `COMMANDS`."""
