"""Porcelain: the user-facing commands and the `reel` entry point (cli.main)."""
