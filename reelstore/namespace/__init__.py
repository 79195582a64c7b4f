"""The namespace: a history-independent prolly tree from names to hashes."""
