"""Optional dependencies: the parts of reelstore a library user may not need install as extras.

`reel run`'s interception needs h11 and cryptography (`reelstore[run]`), the MCP server needs mcp
(`reelstore[mcp]`), the in-process HTTP capture needs httpx (`reelstore[http]`). Where one is missing,
`needs` says which extra to install, as an error with its code rather than an ImportError's traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from reelstore.errors import BadInput


def needs(module: str, extra: str, what: str = "this") -> ModuleType:
    """Import the optional `module`, or raise E014 naming the extra that brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BadInput(
            f"{what} needs {module}, which is not installed: pip install 'reelstore[{extra}]'",
            module=module,
            extra=extra,
        ) from None
