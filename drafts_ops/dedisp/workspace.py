"""Workspace: scratch buffers allocated once per (role, shape, dtype, plan) and reused.

Kernels write into buffers the caller owns; the production operator asks a
:class:`WorkspacePool` for its scratch (sub-band partial sums, decimated input, streaming
batch buffers). The first call of a given shape allocates; steady-state calls reuse, which
the pool's ``allocations`` counter shows. Least recently used buffers are dropped once the
pool holds more than ``max_bytes``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np

#: Default ceiling of the shared pool, bytes.
DEFAULT_MAX_BYTES = 1 << 30


class WorkspacePool:
    """A keyed cache of scratch arrays.

    Parameters
    ----------
    max_bytes : int
        Total bytes kept; older buffers are released beyond it (a buffer in use stays
        valid: the pool only drops its own reference).
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = int(max_bytes)
        self.allocations = 0
        self._buffers: OrderedDict[Hashable, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, role: str, shape: tuple[int, ...], dtype, token: Hashable = None) -> np.ndarray:
        """A buffer of ``shape`` and ``dtype`` for ``role`` (contents undefined).

        ``token`` ties the buffer to something else (e.g. a DM plan's id) so that
        different plans never share scratch of the same shape. Buffers belong to the
        calling thread: two concurrent calls (threads of a flow, a Dask worker's threads)
        never get the same scratch.
        """
        key = (role, tuple(int(n) for n in shape), np.dtype(dtype).str, token,
               threading.get_ident())  # fmt: skip
        with self._lock:
            buf = self._buffers.get(key)
            if buf is not None:
                self._buffers.move_to_end(key)
                return buf
            buf = np.empty(key[1], dtype=dtype)
            self.allocations += 1
            self._buffers[key] = buf
            self._evict()
            return buf

    def _evict(self) -> None:
        while self.nbytes > self.max_bytes and len(self._buffers) > 1:
            self._buffers.popitem(last=False)

    @property
    def nbytes(self) -> int:
        """Bytes held by the pool."""
        return sum(b.nbytes for b in self._buffers.values())

    def __len__(self) -> int:
        return len(self._buffers)

    def clear(self) -> None:
        """Release every buffer (the allocation counter is kept)."""
        with self._lock:
            self._buffers.clear()

    def __repr__(self) -> str:
        return (
            f"WorkspacePool({len(self)} buffers, {self.nbytes} bytes, "
            f"{self.allocations} allocations)"
        )


#: The pool the operator uses unless a call passes its own.
default_pool = WorkspacePool()
