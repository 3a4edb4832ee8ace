"""Hardware facts for kernel launches, benchmarks and performance logs."""

from __future__ import annotations

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


def platform_info() -> dict[str, Any]:
    """Cores, SIMD level, Numba version and threading layer, and the GPU if any."""
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel function has run yet: report the configured choice
        layer = f"{numba.config.THREADING_LAYER} (not yet initialised)"
    try:
        import llvmlite.binding as ll

        cpu_name = ll.get_host_cpu_name()
    except (ImportError, RuntimeError):
        cpu_name = _platform.processor() or "unknown"
    return {
        "machine": _platform.machine(),
        "cpu": cpu_name,
        "cores": os.cpu_count() or 1,
        "numba_threads": int(numba.config.NUMBA_NUM_THREADS),
        "simd": simd_level(),
        "numba_version": numba.__version__,
        "threading_layer": layer,
        "gpu": gpu_info(),
    }
