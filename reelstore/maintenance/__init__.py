"""Keeping a store whole: reachability, gc and fsck."""
