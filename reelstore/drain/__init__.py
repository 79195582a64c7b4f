"""Effects after commit: the drain, its journal, epochs, holds, recovery and the operator surface."""
