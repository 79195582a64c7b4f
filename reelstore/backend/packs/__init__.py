"""The pack format and everything that reads, writes, copies, checks and collects packs: what the
disk backend keeps its objects in. Nothing outside the backend imports from here but the pack commands."""
