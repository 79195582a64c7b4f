"""Deterministic simulation of the kernel and its drain under injected faults."""
