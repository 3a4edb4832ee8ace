"""Production dedispersion operator: registry, contract checks, tiling, batching, workspace."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drafts_ops.core.errors import OperatorError
from drafts_ops.dedisp import DMPlan, dedisperse, dedisperse_batch, describe, tiling_for
from drafts_ops.dedisp.reference import dedisperse_reference
from drafts_ops.dedisp.registry import OperatorSpec, get_operator, register
from drafts_ops.dedisp.tiling import MachineFacts, plan_cpu_tiling, read_cache_sizes
from drafts_ops.dedisp.workspace import WorkspacePool


def make_plan(nchan: int, dm_max: float, ndm: int, *, ascending: bool = False) -> DMPlan:
    freqs = 1500.0 - np.arange(nchan) * (400.0 / max(nchan, 1))
    if ascending:
        freqs = freqs[::-1].copy()
    return DMPlan.build(np.linspace(0.0, dm_max, ndm), freqs, 1e-3)


def random_block(rng, dtype, shape) -> np.ndarray:
    if dtype == np.float32:
        return rng.normal(10.0, 3.0, shape).astype(np.float32)
    return rng.integers(0, np.iinfo(dtype).max // 2, shape).astype(dtype)


def assert_matches_reference(out: np.ndarray, data: np.ndarray, plan: DMPlan) -> None:
    ref = dedisperse_reference(data, plan.delays)
    if data.dtype == np.float32:
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
    else:  # integer sums below 2**24 are exact in float32
        np.testing.assert_array_equal(out, ref)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nchan=st.integers(1, 40),
    ndm=st.integers(1, 12),
    dm_max=st.floats(0.0, 60.0),
    nout=st.integers(1, 90),
    nbatch=st.integers(1, 3),
    dtype=st.sampled_from([np.uint8, np.uint16, np.float32]),
    ascending=st.booleans(),
    tiles=st.fixed_dictionaries(
        {
            "tile_dm": st.integers(1, 9),
            "tile_t": st.integers(1, 70),
            "tile_chan": st.integers(1, 48),
        }
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_brute_equals_reference_for_any_tiling(  # noqa: PLR0917 (hypothesis)
    nchan, ndm, dm_max, nout, nbatch, dtype, ascending, tiles, seed
):
    plan = make_plan(nchan, dm_max, ndm, ascending=ascending)
    rng = np.random.default_rng(seed)
    data = random_block(rng, dtype, (nbatch, nchan, nout + plan.max_delay))
    out = dedisperse_batch(data, plan, tiles=tiles)
    assert out.shape == (nbatch, ndm, nout) and out.dtype == np.float32
    for b in range(nbatch):
        assert_matches_reference(out[b], data[b], plan)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_tiling_never_changes_the_result(rng, dtype):
    plan = make_plan(37, 120.0, 23)
    data = random_block(rng, dtype, (37, plan.max_delay + 301))
    whole = dedisperse(data, plan, tiles={"tile_dm": 23, "tile_t": 301, "tile_chan": 37})
    for tiles in ({"tile_dm": 1, "tile_t": 7, "tile_chan": 8}, {"tile_dm": 5, "tile_t": 64}, {}):
        np.testing.assert_array_equal(dedisperse(data, plan, tiles=tiles), whole)


def test_production_equals_prototype(rng):
    pytest.importorskip("drafts_ops.dedisp.prototype")
    for ascending in (False, True):
        plan = make_plan(48, 200.0, 31, ascending=ascending)
        for dtype in (np.uint8, np.float32):
            data = random_block(rng, dtype, (48, plan.max_delay + 200))
            proto = dedisperse(data, plan, mode="prototype")
            prod = dedisperse(data, plan, mode="production")
            np.testing.assert_allclose(prod, proto, rtol=1e-5, atol=1e-5 * np.abs(proto).max())


def test_batch_of_blocks_equals_blocks_one_by_one(rng):
    plan = make_plan(16, 50.0, 9)
    blocks = [random_block(rng, np.uint8, (16, plan.max_delay + 40)) for _ in range(3)]
    batch = dedisperse_batch(blocks, plan)
    for b, block in enumerate(blocks):
        np.testing.assert_array_equal(batch[b], dedisperse(block, plan))
    with pytest.raises(OperatorError, match="one shape"):
        dedisperse_batch([blocks[0], blocks[1][:, :-1]], plan)


def test_out_argument_is_filled_without_allocation(rng):
    plan = make_plan(8, 20.0, 4)
    data = random_block(rng, np.uint8, (8, plan.max_delay + 10))
    out = np.empty((4, 10), np.float32)
    assert dedisperse(data, plan, out=out) is not None
    np.testing.assert_array_equal(out, dedisperse_reference(data, plan.delays))
    with pytest.raises(OperatorError, match="out has shape"):
        dedisperse(data, plan, out=np.empty((4, 9), np.float32))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (np.zeros(100, np.float32), "rank 1"),
        (np.zeros((1, 1, 8, 100), np.float32), "rank 4"),
        (np.zeros((7, 100), np.float32), "7 channels but the DM plan has 8"),
        (np.zeros((8, 5), np.float32), "not more than the maximum delay"),
        (np.zeros((8, 100), np.float64), "unsupported input dtype float64"),
        (np.zeros((8, 100), np.int16), "unsupported input dtype int16"),
    ],
)
def test_contract_errors(data, match):
    plan = make_plan(8, 20.0, 4)
    assert plan.max_delay >= 5
    with pytest.raises(OperatorError, match=match):
        dedisperse(data, plan)


def test_unknown_operator_names_the_registered_ones():
    plan = make_plan(8, 20.0, 4)
    data = np.zeros((8, 100), np.float32)
    with pytest.raises(OperatorError, match=r"registered: .*production/brute/cpu"):
        dedisperse(data, plan, algorithm="fdmt")  # type: ignore[arg-type]
    with pytest.raises(OperatorError, match="unknown backend"):
        register(OperatorSpec("production", "brute", "tpu", lambda *a: None, "x"))
    with pytest.raises(OperatorError, match="already registered"):
        register(get_operator("production", "brute", "cpu"))


def test_describe_lists_operators_and_contracts():
    text = describe()
    for name in ("production/brute/cpu", "production/subband/cpu", "production/brute/cuda"):
        assert f"dedisperse/{name}" in text
    assert "uint8|uint16|float32" in text


def test_workspace_is_reused_in_steady_state(rng):
    plan = make_plan(32, 150.0, 40)
    pool = WorkspacePool()
    data = random_block(rng, np.uint8, (2, 32, plan.max_delay + 128))
    first = dedisperse(data, plan, algorithm="subband", pool=pool)
    allocated = pool.allocations
    assert allocated >= 1 and len(pool) == allocated
    for _ in range(3):
        again = dedisperse(data, plan, algorithm="subband", pool=pool)
    assert pool.allocations == allocated
    np.testing.assert_array_equal(again, first)
    # a smaller batch, and another plan run by this thread (a sub-band search's channel
    # ranges), share the one scratch of the budget's size: no scratch per plan
    dedisperse(data[:1], plan, algorithm="subband", pool=pool)
    dedisperse(data[:, :20], plan.channel_range(0, 20), algorithm="subband", pool=pool)
    assert pool.allocations == allocated and len(pool) == allocated


def test_workspace_pool_evicts_beyond_its_budget():
    pool = WorkspacePool(max_bytes=1000)
    a = pool.get("a", (100,), np.float32)
    assert pool.get("a", (100,), np.float32) is a
    pool.get("b", (200,), np.float32)
    assert len(pool) == 1 and pool.allocations == 2


def test_tiling_plan_is_printable_and_consistent():
    plan = make_plan(64, 300.0, 50)
    tiling = tiling_for((64, plan.max_delay + 5000), np.uint8, plan)
    assert tiling.nout == 5000 and tiling.ndm == 50 and tiling.overlap == plan.max_delay
    assert tiling.n_tiles == tiling.n_tiles_dm * tiling.n_tiles_t
    assert tiling.tile_chan % 8 == 0 or tiling.tile_chan == 64
    text = str(tiling)
    assert "tile  dm" in text and "overlap" in text and "workspace" in text


def test_tile_sizes_follow_the_cache():
    facts = MachineFacts(threads=2, l1d_bytes=32768, l2_bytes=65536, l3_bytes=1 << 22)
    small = plan_cpu_tiling(
        "x", (1, 512, 5000), ndm=64, max_delay=1000, itemsize=4, dtype="float32", facts=facts
    )
    big = plan_cpu_tiling(
        "x",
        (1, 512, 5000),
        ndm=64,
        max_delay=1000,
        itemsize=4,
        dtype="float32",
        facts=MachineFacts(2, 32768, 1 << 20, 1 << 22),
    )
    assert small.tile_chan < big.tile_chan
    assert small.tile_chan * small.tile_t * 4 <= facts.l2_bytes // 2


def test_cache_sizes_from_sysfs(tmp_path):
    for i, (level, kind, size) in enumerate(
        [
            ("1", "Data", "48K"),
            ("1", "Instruction", "32K"),
            ("2", "Unified", "2048K"),
            ("3", "Unified", "36M"),
        ]
    ):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(level)
        (d / "type").write_text(kind)
        (d / "size").write_text(size)
    assert read_cache_sizes(tmp_path) == {"L1d": 48 * 1024, "L2": 2 << 20, "L3": 36 << 20}
