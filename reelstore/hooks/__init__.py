"""Hooks: the sample scripts `reel init` installs, and (in runner.py) the runner the kernel calls."""

from __future__ import annotations

from pathlib import Path

HOOK_NAMES = ("pre-commit", "pre-drain", "post-commit", "post-abort", "notify", "pre-approve")
SAMPLES = Path(__file__).with_name("samples")


def install_samples(dest: Path) -> None:
    """Copy the commented samples into `dest`, not executable, so they do nothing until enabled."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in HOOK_NAMES:
        target = dest / name
        if not target.exists():
            target.write_bytes((SAMPLES / name).read_bytes())
            target.chmod(0o644)
