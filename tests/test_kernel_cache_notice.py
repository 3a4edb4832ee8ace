"""The first search with new kernels on a machine says that it compiles them."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from drafts_ops.core.hardware import kernel_cache_marker, kernels_compiled
from drafts_ops.core.resources import resource_path
from drafts_ops.search import KERNELS_COMPILING, SearchConfig, run_search


def test_first_search_says_it_compiles_and_later_ones_do_not(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = SearchConfig(dm_max=300.0, write_plots=False, write_h5=False, classify=False)
    demo = resource_path("data", "demo.fil")
    assert not kernels_compiled()
    with caplog.at_level(logging.WARNING, logger="drafts_ops.search.run"):
        run_search(demo, tmp_path / "first", config)
    assert any(KERNELS_COMPILING in r.getMessage() for r in caplog.records)
    notes = json.loads((tmp_path / "first" / "perf.json").read_text())["run"]["notes"]
    assert KERNELS_COMPILING in notes
    assert kernel_cache_marker().parent == tmp_path / "cache" / "drafts-ops"
    assert kernels_compiled()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="drafts_ops.search.run"):
        run_search(demo, tmp_path / "second", config)
    assert not any(KERNELS_COMPILING in r.getMessage() for r in caplog.records)
    notes = json.loads((tmp_path / "second" / "perf.json").read_text())["run"]["notes"]
    assert KERNELS_COMPILING not in notes


def test_the_marker_follows_the_kernels_sources(tmp_path, monkeypatch):
    """Numba recompiles when a kernel module changes: so does the marker's name."""
    import drafts_ops
    from drafts_ops.core import hardware

    package = Path(drafts_ops.__file__).parent
    assert package / "detect" / "boxcar_kernels.py" in hardware._cached_kernel_modules()
    module = tmp_path / "kernels.py"
    module.write_text("@nb.njit(cache=True)\n")
    monkeypatch.setattr(hardware, "_cached_kernel_modules", lambda: [module])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    before = kernel_cache_marker()
    assert kernel_cache_marker() == before
    module.write_text("@nb.njit(cache=True)\ndef f(): pass\n")
    assert kernel_cache_marker() != before
