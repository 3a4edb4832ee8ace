"""Run under NUMBA_ENABLE_CUDASIM=1 (by tests/test_launch.py in a subprocess).

Prints one JSON object comparing the CUDA-simulator launches with the CPU launches.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from drafts_ops.core.hardware import platform_info
from drafts_ops.dedisp.launch import Kernel, launch
from drafts_ops.dedisp.plan import DMPlan
from drafts_ops.dedisp.prototype import dedisperse_prototype


def index_body(block, thread, block_dim, out):
    """Each thread writes a code of its 2-D global index."""
    x = block[0] * block_dim[0] + thread[0]
    y = block[1] * block_dim[1] + thread[1]
    if y < out.shape[0] and x < out.shape[1]:
        out[y, x] = 100 * y + x


def main() -> int:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        print("run with NUMBA_ENABLE_CUDASIM=1", file=sys.stderr)
        return 2
    rng = np.random.default_rng(7)
    freqs = 1400.0 - 8.0 * np.arange(11)
    plan = DMPlan.build(np.linspace(0.0, 80.0, 3), freqs, 1e-3)
    data = rng.integers(0, 256, (11, plan.max_delay + 23)).astype(np.float32)
    cpu = dedisperse_prototype(data, plan, backend="cpu", block=4, samples_per_thread=3)
    sim = dedisperse_prototype(data, plan, backend="cuda", block=4, samples_per_thread=3)
    sim1 = dedisperse_prototype(data, plan, backend="cuda", block=8, samples_per_thread=1)
    kern = Kernel(index_body, outputs=("out",))
    grids = {}
    for backend in ("cpu", "cuda"):
        out = np.full((5, 7), -1, np.int64)
        launch(kern, (3, 2), (3, 4), out, backend=backend)
        grids[backend] = out.tolist()
    print(
        json.dumps(
            {
                "cpu": cpu.tolist(),
                "sim": sim.tolist(),
                "sim_spt1": sim1.tolist(),
                "grid_cpu": grids["cpu"],
                "grid_cuda": grids["cuda"],
                "gpu": platform_info()["gpu"],
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
