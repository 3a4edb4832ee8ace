"""Make the candidate PNGs shown in docs/outputs.md: a bright burst of the demo and an
S/N-8 burst simulated here. Run from the repository root:
``python docs/images/make_candidate_examples.py``."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from drafts_ops.core.resources import resource_path
from drafts_ops.search import SearchConfig, run_search
from drafts_ops.simulate import BurstSpec, SimulationConfig, write_simulation

HERE = Path(__file__).resolve().parent


def brightest_png(path: Path, out: Path, config: SearchConfig) -> Path:
    result = run_search(path, out, config)
    index = next(i for i, c in enumerate(result.candidates) if f"png:{i}" in result.outputs)
    return result.outputs[f"png:{index}"]


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        bright = brightest_png(resource_path("data", "demo.fil"), tmp / "demo", SearchConfig())
        shutil.copy(bright, HERE / "candidate-bright.png")
        band = {"nchans": 256, "fch1": 1499.4140625, "foff": -1.171875, "tsamp": 512e-6}
        burst = BurstSpec(t_s=3.0, dm=300.0, snr=8.0, width_s=2e-3)
        faint = write_simulation(tmp / "faint.fil", SimulationConfig(
            **band, duration_s=6.0, seed=5, bursts=(burst,)))  # fmt: skip
        config = SearchConfig(dm_max=600.0, snr_threshold=6.0, classifier_threshold=0.0)
        shutil.copy(brightest_png(faint, tmp / "faint", config), HERE / "candidate-faint.png")


if __name__ == "__main__":
    main()
