"""View: a workspace forked from a trunk or from another view.

A view object is immutable; a live view is the ref `refs/views/<name>` pointing at its newest
object. `parent` is the parent's ref name (a trunk or a view), `base` the parent's object at fork
time (a record or a view), `namespace` the root of the view's namespace map.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from reelstore.codec import FrozenMap
from reelstore.objects.block import Object, register, v_enum, v_hash, v_int, v_map, v_opt, v_str, v_tuple
from reelstore.objects.hash import Hash

BOUNDARIES = ("isolated", "autonomous")
MAX_DEPTH = 64
MAX_APPROVALS = 256


@register
@dataclass(frozen=True)
class View(Object):
    kind: ClassVar[str] = "view"
    parent: str
    base: Hash | None
    namespace: Hash
    delta: Hash | None = None
    caps: tuple[Hash, ...] = ()
    effects: Hash | None = None
    boundary: str = "isolated"
    depth: int = 1
    meta: FrozenMap = field(default_factory=FrozenMap)
    recording: Hash | None = None
    """The reads a `reel run --record` passed through (a `recording`), kept as long as the view is."""
    approvals: tuple[Hash, ...] = ()
    """The `approval` objects recorded on this view (stale ones too), oldest first."""
    SPEC: ClassVar = {
        "approvals": ("approvals", v_tuple(v_hash, MAX_APPROVALS)),
        "base": ("base", v_opt(v_hash)),
        "boundary": ("boundary", v_enum(*BOUNDARIES)),
        "caps": ("caps", v_tuple(v_hash, 256)),
        "delta": ("delta", v_opt(v_hash)),
        "depth": ("depth", v_int(1, MAX_DEPTH)),
        "effects": ("effects", v_opt(v_hash)),
        "meta": ("meta", v_map),
        "namespace": ("namespace", v_hash),
        "parent": ("parent", v_str(1024, empty=False)),
        "recording": ("recording", v_opt(v_hash)),
    }

    def references(self) -> tuple[Hash, ...]:
        refs = [h for h in (self.base, self.namespace, self.delta, self.effects, self.recording) if h is not None]
        return tuple(refs) + self.caps + self.approvals
