"""Effect adapters: how a pending effect reaches the system it acts on (fs, http)."""
