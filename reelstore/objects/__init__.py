"""The object model: the reel protocol's content-addressed kinds and their one codec."""

from reelstore.objects.block import KINDS, Object, decode, decode_verified
from reelstore.objects.capability import OPS, Capability, prefix_covers
from reelstore.objects.chunks import Chunks
from reelstore.objects.data import Blob, Tree
from reelstore.objects.delta import Delta, DeltaOp, Put, Remove
from reelstore.objects.effect import Effect, Effects
from reelstore.objects.hash import HASH_SIZE, HEX_SIZE, ZERO_HEX, Hash
from reelstore.objects.journal import Finding, Journal
from reelstore.objects.notice import OpEvent
from reelstore.objects.record import Record
from reelstore.objects.recording import Recording
from reelstore.objects.view import View

__all__ = [
    "HASH_SIZE",
    "HEX_SIZE",
    "KINDS",
    "OPS",
    "ZERO_HEX",
    "Blob",
    "Capability",
    "Chunks",
    "Delta",
    "DeltaOp",
    "Effect",
    "Effects",
    "Finding",
    "Hash",
    "Journal",
    "Object",
    "OpEvent",
    "Put",
    "Record",
    "Recording",
    "Remove",
    "Tree",
    "View",
    "decode",
    "decode_verified",
    "prefix_covers",
]
