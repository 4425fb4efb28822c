"""`gc_paused`: no garbage collection while a few hundred thousand objects are built."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block (it stays off if it was off).

    Readers build hundreds of thousands of acyclic objects at a time; the collector
    would walk them again and again (half the decode time). Free what is only
    temporary inside the block too: the collection after it then walks only what
    survives."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
