"""Direct kernel launch: run a CUDA-style per-thread kernel body on CPU or GPU.

A kernel is written once as a per-thread body::

    @numba.njit
    def body(block, thread, block_dim, *args): ...

where ``block``, ``thread`` and ``block_dim`` are ``(x, y)`` tuples, as ``blockIdx``,
``threadIdx`` and ``blockDim`` in CUDA. :func:`launch` runs it over a grid of blocks:

* ``backend="cpu"``: a generated ``numba.njit(parallel=True)`` launcher runs all blocks in
  parallel (``prange`` over blocks) and loops over the threads of a block inside: the CPU
  analogue of a kernel-launch macro. Threads of one block run in order on one core.
* ``backend="cuda"``: the same body becomes a CUDA device function (the numba functions it
  calls are recompiled for the device too) inside a ``numba.cuda.jit`` kernel launched as
  ``kernel[grid, block](...)``; numpy arrays go to the device and the outputs come back.
  Under ``NUMBA_ENABLE_CUDASIM=1`` this runs in Numba's CUDA simulator.

Debug aids: ``debug=True`` re-runs the chosen ``(block, thread)`` pairs alone (with the
CPU build of the body, whatever the backend) on scratch copies of the outputs and prints
the elements each wrote; ``dump_dir`` saves input and output arrays as ``.npy`` with a
``launch.json`` (grid, block, backend, argument shapes) beside them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numba
import numpy as np
from numba.core.dispatcher import Dispatcher

from drafts_ops.core.atomic import atomic_path, write_json_atomic, write_text_atomic
from drafts_ops.core.errors import OperatorError
from drafts_ops.dedisp.modes import BACKENDS, Backend

Dim = int | Sequence[int]
#: Leading parameters of every kernel body: block, thread, block_dim.
N_INDEX_PARAMS = 3


@dataclass(frozen=True, eq=False)
class Kernel:
    """A per-thread kernel body with the names of the arguments it writes.

    Parameters
    ----------
    func
        ``body(block, thread, block_dim, *args)``: a Python function or ``numba.njit``
        dispatcher.
    outputs
        Names of the array arguments the kernel writes (used by dumps and debug traces;
        when empty every array counts as both input and output).
    """

    func: Callable[..., None]
    outputs: tuple[str, ...] = ()
    _cuda: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return self.py_func.__name__

    @property
    def py_func(self) -> Callable[..., None]:
        """The plain Python body (runs in the interpreter; useful in tests)."""
        return getattr(self.func, "py_func", self.func)

    @cached_property
    def cpu(self) -> Dispatcher:
        """The body compiled for the CPU (one dispatcher per Python function)."""
        if isinstance(self.func, Dispatcher):
            return self.func
        if self.func not in _CPU_BODIES:
            _CPU_BODIES[self.func] = numba.njit(self.func)
        return _CPU_BODIES[self.func]

    @cached_property
    def arg_names(self) -> tuple[str, ...]:
        params = list(inspect.signature(self.py_func).parameters.values())[N_INDEX_PARAMS:]
        return tuple(p.name for p in params)

    def is_output(self, name: str) -> bool:
        return not self.outputs or name in self.outputs


#: Bodies compiled for the CPU and kernels wrapped by :func:`as_kernel`, per function.
_CPU_BODIES: dict[Callable[..., None], Dispatcher] = {}
_WRAPPED: dict[Callable[..., None], Kernel] = {}


def as_kernel(kernel: Kernel | Callable[..., None]) -> Kernel:
    """Wrap a bare body into a :class:`Kernel` (no declared outputs), once per function."""
    if isinstance(kernel, Kernel):
        return kernel
    if kernel not in _WRAPPED:
        _WRAPPED[kernel] = Kernel(kernel)
    return _WRAPPED[kernel]


def launch(
    kernel: Kernel | Callable[..., None],
    grid: Dim,
    block: Dim,
    *args: Any,
    backend: Backend = "cpu",
    debug: bool = False,
    debug_threads: Sequence[tuple[Dim, Dim]] = ((0, 0),),
    dump_dir: str | Path | None = None,
) -> None:
    """Run ``kernel`` once for every thread of every block of ``grid``.

    Parameters
    ----------
    kernel
        A :class:`Kernel` or a body ``body(block, thread, block_dim, *args)``.
    grid, block
        Number of blocks and threads per block: an int (1-D) or an ``(x, y)`` pair.
    *args
        Kernel arguments (numpy arrays and scalars); outputs are written in place.
    backend
        ``"cpu"`` (parallel over blocks) or ``"cuda"`` (numba-cuda, or its simulator).
    debug
        Print, for each ``(block, thread)`` in ``debug_threads``, the elements it writes.
    dump_dir
        Directory for ``<kernel>.<arg>.in.npy`` / ``.out.npy`` and ``<kernel>.launch.json``.
    """
    kern = as_kernel(kernel)
    grid2, block2 = _dims(grid, "grid"), _dims(block, "block")
    if backend not in BACKENDS:
        raise OperatorError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if len(args) != len(kern.arg_names):
        raise OperatorError(
            f"kernel {kern.name} takes {len(kern.arg_names)} arguments "
            f"{kern.arg_names}, got {len(args)}"
        )
    if dump_dir is not None:
        _dump(
            Path(dump_dir), kern, args=args, stage="in", grid=grid2, block=block2, backend=backend
        )
    if debug:
        _trace(kern, grid=grid2, block=block2, args=args, picks=debug_threads)
    if backend == "cpu":
        _cpu_launcher(kern, len(args))(*grid2, *block2, *args)
    else:
        _launch_cuda(kern, grid2, block2, args)
    if dump_dir is not None:
        _dump(
            Path(dump_dir), kern, args=args, stage="out", grid=grid2, block=block2, backend=backend
        )


def _dims(value: Dim, what: str) -> tuple[int, int]:
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not 1 <= len(dims) <= 2 or any(int(v) != v or v < 1 for v in dims):
        raise OperatorError(f"{what} {value!r} must be one or two positive integers")
    return (int(dims[0]), int(dims[1]) if len(dims) == 2 else 1)


def _index(value: Dim) -> tuple[int, int]:
    idx = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    return (int(idx[0]), int(idx[1]) if len(idx) > 1 else 0)


# -- CPU: the launch "macro" ----------------------------------------------------------------
_CPU_LAUNCHERS: dict[tuple[int, int], Dispatcher] = {}

_CPU_LOOP = """
def launch_{name}(gx, gy, bx, by, {args}):
    for b in prange(gx * gy):
        bi = (b % gx, b // gx)
        for ty in range(by):
            for tx in range(bx):
                body(bi, (tx, ty), (bx, by), {args})
"""

_CACHED_MODULE = """# Generated by drafts_ops.dedisp.launch for {module}.{qualname}; do not edit.
import importlib

from numba import njit, prange

body = getattr(importlib.import_module("{module}"), "{qualname}")
{loop}
launcher = njit(parallel=True, nogil=True, cache=True)(launch_{name})
"""


def launcher_cache_dir() -> Path:
    """Where generated CPU launchers (and Numba's cache of them) live."""
    root = os.environ.get("DRAFTS_OPS_CACHE_DIR") or Path.home() / ".cache" / "drafts-ops"
    return Path(root) / f"launchers-numba{numba.__version__}"


def _cpu_launcher(kern: Kernel, nargs: int) -> Dispatcher:
    """A parallel launcher for ``kern``: prange over blocks, threads looped inside.

    Kernels defined at module level get a generated module on disk, so that Numba's cache
    keeps the compiled launcher across processes; other bodies are compiled in memory.
    """
    key = (id(kern.cpu), nargs)
    if key not in _CPU_LAUNCHERS:
        loop = _CPU_LOOP.format(name=kern.name, args=", ".join(f"a{i}" for i in range(nargs)))
        launcher = _disk_cached_launcher(kern, loop)
        if launcher is None:
            namespace: dict[str, Any] = {"prange": numba.prange, "body": kern.cpu}
            exec(loop, namespace)
            launcher = numba.njit(parallel=True, nogil=True)(namespace[f"launch_{kern.name}"])
        _CPU_LAUNCHERS[key] = launcher
    return _CPU_LAUNCHERS[key]


def _disk_cached_launcher(kern: Kernel, loop: str) -> Dispatcher | None:
    func = kern.cpu
    module_name, qualname = func.py_func.__module__, func.py_func.__qualname__
    module = sys.modules.get(module_name)
    if module is None or module_name == "__main__" or getattr(module, qualname, None) is not func:
        return None
    source = _CACHED_MODULE.format(module=module_name, qualname=qualname, loop=loop, name=kern.name)
    digest = hashlib.sha256((source + _callee_sources(func.py_func, set())).encode()).hexdigest()
    path = launcher_cache_dir() / f"launch_{kern.name}_{digest[:20]}.py"
    try:
        if not path.exists():
            write_text_atomic(path, source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        generated = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = generated  # Numba's cache re-imports it by name
        spec.loader.exec_module(generated)
    except (OSError, ImportError):  # read-only home, odd import setups: compile in memory
        return None
    return generated.launcher


def _callee_sources(func: Callable[..., Any], seen: set[int]) -> str:
    """Source of ``func`` and of the numba functions it calls (invalidates stale caches)."""
    func = getattr(func, "py_func", func)
    if id(func) in seen:
        return ""
    seen.add(id(func))
    try:
        text = inspect.getsource(func)
    except (OSError, TypeError):
        text = repr(func.__code__.co_code)
    for name in func.__code__.co_names:
        value = func.__globals__.get(name)
        if isinstance(value, Dispatcher):
            text += _callee_sources(value, seen)
    return text


# -- CUDA ----------------------------------------------------------------------------------
_CUDA_TEMPLATE = """
def launch_{name}({args}):
    body(
        (cuda.blockIdx.x, cuda.blockIdx.y),
        (cuda.threadIdx.x, cuda.threadIdx.y),
        (cuda.blockDim.x, cuda.blockDim.y),
        {args},
    )
"""


def _cuda_device_function(func: Callable[..., Any], cuda: Any, memo: dict[int, Any]) -> Any:
    """``func`` as a CUDA device function; numba CPU functions it calls are converted too."""
    func = getattr(func, "py_func", func)
    if id(func) in memo:
        return memo[id(func)]
    scope = dict(func.__globals__)
    for name in func.__code__.co_names:
        value = scope.get(name)
        if isinstance(value, Dispatcher):
            scope[name] = _cuda_device_function(value, cuda, memo)
    clone = types.FunctionType(
        func.__code__, scope, func.__name__, func.__defaults__, func.__closure__
    )
    memo[id(func)] = cuda.jit(device=True)(clone)
    return memo[id(func)]


def cuda_kernel(kern: Kernel, nargs: int) -> Any:
    """The ``numba.cuda.jit`` kernel wrapping ``kern`` (built once per kernel)."""
    from numba import cuda

    key = f"kernel{nargs}"
    if key not in kern._cuda:
        body = _cuda_device_function(kern.py_func, cuda, {})
        names = ", ".join(f"a{i}" for i in range(nargs))
        namespace: dict[str, Any] = {"cuda": cuda, "body": body}
        exec(_CUDA_TEMPLATE.format(name=kern.name, args=names), namespace)
        kern._cuda[key] = cuda.jit(namespace[f"launch_{kern.name}"])
    return kern._cuda[key]


def _launch_cuda(
    kern: Kernel, grid: tuple[int, int], block: tuple[int, int], args: tuple[Any, ...]
) -> None:
    from numba import cuda

    if not cuda.is_available():
        raise OperatorError("backend 'cuda' requested but no CUDA GPU (or simulator) is available")
    device_args = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    cuda_kernel(kern, len(args))[grid, block](*device_args)
    cuda.synchronize()
    for name, host, dev in zip(kern.arg_names, args, device_args, strict=True):
        if isinstance(host, np.ndarray) and kern.is_output(name):
            dev.copy_to_host(host)


# -- debug aids ----------------------------------------------------------------------------
def _trace(
    kern: Kernel,
    *,
    grid: tuple[int, int],
    block: tuple[int, int],
    args: tuple[Any, ...],
    picks: Sequence[tuple[Dim, Dim]],
    limit: int = 8,
) -> None:
    """Run each picked (block, thread) alone on scratch outputs and print what it wrote."""
    for pick in picks:
        b, t = _index(pick[0]), _index(pick[1])
        if not (b[0] < grid[0] and b[1] < grid[1] and t[0] < block[0] and t[1] < block[1]):
            raise OperatorError(f"debug pick block {b} thread {t} is outside {grid}x{block}")
        scratch = [_sentinel_copy(a) if _writes(kern, n, a) else a for n, a in _named(kern, args)]
        kern.cpu(b, t, block, *scratch)
        scalars = {n: a for n, a in _named(kern, args) if not isinstance(a, np.ndarray)}
        lines = [f"[{kern.name}] block {b} thread {t} block_dim {block} scalars {scalars}"]
        for (name, original), after in zip(_named(kern, args), scratch, strict=True):
            if not _writes(kern, name, original):
                continue
            written = np.argwhere(~_is_sentinel(after))
            shown = ", ".join(
                f"{name}[{', '.join(map(str, i))}]={after[tuple(i)].item():.7g}"
                for i in written[:limit]
            )
            more = f" ... ({len(written)} elements)" if len(written) > limit else ""
            lines.append(f"  wrote {len(written)} of {name}: {shown}{more}")
        print("\n".join(lines), file=sys.stdout, flush=True)


def _named(kern: Kernel, args: tuple[Any, ...]) -> list[tuple[str, Any]]:
    return list(zip(kern.arg_names, args, strict=True))


def _writes(kern: Kernel, name: str, value: Any) -> bool:
    return isinstance(value, np.ndarray) and kern.is_output(name)


def _sentinel_copy(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "f":
        return np.full_like(array, np.nan)
    if array.dtype.kind in "iu":
        return np.full_like(array, np.iinfo(array.dtype).max)
    return array.copy()


def _is_sentinel(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "f":
        return np.isnan(array)
    if array.dtype.kind in "iu":
        return array == np.iinfo(array.dtype).max
    return np.zeros(array.shape, dtype=bool)


def _dump(
    directory: Path,
    kern: Kernel,
    *,
    args: tuple[Any, ...],
    stage: Literal["in", "out"],
    grid: tuple[int, int],
    block: tuple[int, int],
    backend: str,
) -> None:
    """Save the stage's arrays as ``<kernel>.<arg>.<stage>.npy`` (atomically)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, value in _named(kern, args):
        if not isinstance(value, np.ndarray):
            continue
        if stage == "out" and not kern.is_output(name):
            continue
        if stage == "in" and kern.outputs and name in kern.outputs:
            continue
        with (
            atomic_path(directory / f"{kern.name}.{name}.{stage}.npy") as tmp,
            tmp.open("wb") as fh,
        ):
            np.save(fh, value)
    if stage == "in":
        meta = {
            "kernel": kern.name,
            "backend": backend,
            "grid": list(grid),
            "block": list(block),
            "args": {
                n: (
                    {"shape": list(a.shape), "dtype": str(a.dtype)}
                    if isinstance(a, np.ndarray)
                    else a
                )
                for n, a in _named(kern, args)
            },
        }
        write_json_atomic(
            directory / f"{kern.name}.launch.json", json.loads(json.dumps(meta, default=str))
        )
