"""The object model: the reel protocol's content-addressed kinds and their one codec."""

from .block import KINDS, Object, decode, decode_verified
from .capability import OPS, Capability, prefix_covers
from .data import Blob, Tree
from .delta import Delta
from .effect import Effect, Effects
from .hash import HASH_SIZE, HEX_SIZE, ZERO_HEX, Hash
from .journal import Finding, Journal
from .record import Record
from .view import View

__all__ = [
    "HASH_SIZE",
    "HEX_SIZE",
    "KINDS",
    "OPS",
    "ZERO_HEX",
    "Blob",
    "Capability",
    "Delta",
    "Effect",
    "Effects",
    "Finding",
    "Hash",
    "Journal",
    "Object",
    "Record",
    "Tree",
    "View",
    "decode",
    "decode_verified",
    "prefix_covers",
]
