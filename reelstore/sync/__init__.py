"""Sync: reel stores travel over any git remote, reel objects as git blobs."""
