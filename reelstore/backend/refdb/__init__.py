"""Refs on disk and in memory: the ref files and their format, lock files, reflogs and the ref
transaction that moves several refs at once or none."""
