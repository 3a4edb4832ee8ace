"""Hardware facts for kernel launches, benchmarks and performance logs."""

from __future__ import annotations

import functools
import os
import platform as _platform
from pathlib import Path
from typing import Any

#: SIMD levels from widest to narrowest, with the CPU feature that marks each.
SIMD_LEVELS: tuple[tuple[str, str], ...] = (
    ("avx512", "avx512f"),
    ("avx2", "avx2"),
    ("avx", "avx"),
    ("sse4.2", "sse4.2"),
    ("neon", "neon"),
)


def cpu_features() -> set[str]:
    """CPU feature flags, from LLVM's host detection or else ``/proc/cpuinfo``."""
    try:
        import llvmlite.binding as ll

        flags = ll.get_host_cpu_features().flatten().split(",")
        return {f[1:] for f in flags if f.startswith("+")}
    except (ImportError, RuntimeError):
        cpuinfo = Path("/proc/cpuinfo")
        if not cpuinfo.exists():
            return set()
        for line in cpuinfo.read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return {f.replace("_", ".") for f in line.split(":", 1)[1].split()}
        return set()


def simd_level(features: set[str] | None = None) -> str:
    """The widest SIMD instruction set the CPU offers (``"avx512"``, ``"avx2"``, ...)."""
    features = cpu_features() if features is None else features
    for level, flag in SIMD_LEVELS:
        if flag in features:
            return level
    return "none"


def gpu_info() -> dict[str, Any] | None:
    """Name, SM count and compute capability of the current CUDA GPU, or ``None``."""
    try:
        from numba import cuda

        if not cuda.is_available():
            return None
        dev = cuda.get_current_device()
        name = getattr(dev, "name", "CUDA simulator" if _simulating() else "unknown")
        name = name.decode() if isinstance(name, bytes) else str(name)
        return {
            "name": name,
            "sm_count": int(getattr(dev, "MULTIPROCESSOR_COUNT", 0)),
            "compute_capability": list(getattr(dev, "compute_capability", ())),
            "simulator": _simulating(),
        }
    except Exception:  # any driver problem means "no usable GPU"
        return None


def _simulating() -> bool:
    import numba

    return bool(numba.config.ENABLE_CUDASIM)


def cpu_name() -> str:
    """The CPU's name as LLVM (and so Numba) targets it, e.g. ``znver4``."""
    try:
        import llvmlite.binding as ll

        return ll.get_host_cpu_name()
    except (ImportError, RuntimeError):
        return _platform.processor() or "unknown"


def platform_info() -> dict[str, Any]:
    """Cores, SIMD level, Numba version and threading layer, and the GPU if any."""
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel function has run yet: report the configured choice
        layer = f"{numba.config.THREADING_LAYER} (not yet initialised)"
    return {
        "machine": _platform.machine(),
        "cpu": cpu_name(),
        "cores": os.cpu_count() or 1,
        "numba_threads": int(numba.config.NUMBA_NUM_THREADS),
        "simd": simd_level(),
        "numba_version": numba.__version__,
        "threading_layer": layer,
        "gpu": gpu_info(),
    }


@functools.cache
def _cached_kernel_modules() -> tuple[Path, ...]:
    """The package's modules with Numba kernels cached on disk (``cache=True``); read once
    per process (each search then only checks their modification times and sizes)."""
    root = Path(__file__).resolve().parents[1]  # the drafts_ops package
    return tuple(sorted(p for p in root.rglob("*.py")
                        if "cache=True" in p.read_text(errors="ignore")))  # fmt: skip


def kernel_cache_marker() -> Path:
    """Marker file meaning "a search has run with these kernels on this machine", so Numba
    has compiled and cached them: named by a hash of what Numba's cache is keyed by (each
    kernel module's path, modification time and size; Numba's version; the CPU and its
    features; ``NUMBA_CACHE_DIR``), under ``$XDG_CACHE_HOME/drafts-ops`` (default
    ``~/.cache/drafts-ops``)."""
    import hashlib

    import numba

    key = hashlib.sha256()
    for module in _cached_kernel_modules():
        stat = module.stat()
        key.update(f"{module}:{stat.st_mtime_ns}:{stat.st_size};".encode())
    key.update(f"{numba.__version__};{cpu_name()};{','.join(sorted(cpu_features()))};".encode())
    key.update(os.environ.get("NUMBA_CACHE_DIR", "").encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "drafts-ops"
    return cache / f"kernels-{key.hexdigest()[:16]}"


#: What the first search with new kernels on a machine says (and its perf.json notes): Numba
#: compiles them then (a 4 s FAST-like file: 42 s instead of 3 s on 2 cores), caching them.
KERNELS_COMPILING = (
    "first search with these kernels on this machine (after installing or updating "
    "drafts-ops, or on a new CPU): Numba compiles them now, about 40 s on 2 cores, then "
    "caches them; this run's times include that"
)


def kernels_compiled() -> bool:
    """Whether a search has already run with the current kernels on this machine (else the
    next one spends its first minute compiling them)."""
    try:
        return kernel_cache_marker().exists()
    except OSError:
        return True  # cannot tell: say nothing


def mark_kernels_compiled() -> None:
    """Record that the current kernels are compiled (best effort: a read-only home is fine)."""
    try:
        marker = kernel_cache_marker()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:
        pass
