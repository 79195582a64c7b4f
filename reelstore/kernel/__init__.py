"""The reel protocol's verbs: fork, writes, admission, commit, abort, and view history."""
