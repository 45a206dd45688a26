"""The compiler's plan for the gather's lane banks (app/model/gather_plan.py): slots by a
proper edge colouring, lanes each input's channel lies in, and a map of one channel read
from every bank (docs/networks.md, "One activation buffer")."""

import numpy as np
import pytest

from codnn.golden.column_combining import pack
from codnn.golden.network_program import NO_LANE, EngineConfig, gather_entries
from codnn.model.gather_plan import _colour, plan_layer

SEED = 20261206


@pytest.mark.parametrize("left,right,edges", [(4, 3, 10), (16, 16, 128), (5, 1, 5),
                                              (3, 8, 24), (16, 16, 40)])
def test_colouring_is_proper_with_the_largest_degree(left, right, edges):
    rng = np.random.default_rng(SEED + edges)
    print(f"seed={SEED + edges}")
    for _ in range(50):
        pairs = [(int(rng.integers(left)), int(rng.integers(right))) for _ in range(edges)]
        degree = max(max(np.bincount([u for u, _ in pairs])),
                     max(np.bincount([v for _, v in pairs])))
        colours = _colour(pairs, left, right, degree)
        assert all(0 <= c < degree for c in colours)
        for side in (0, 1):
            seen = {(pair[side], c) for pair, c in zip(pairs, colours)}
            assert len(seen) == len(pairs), "two edges at a vertex share a colour"


def _check_tables(plan, packed, src_shape, kernel, engine):
    """Every tile's table reads, for each column's input, its word in a lane that holds
    the input's channel, one read per bank and slot; the cells select the input's slot."""
    R, W = engine.rows, engine.cols
    entries = gather_entries(packed.columns, src_shape, kernel, R)
    channels = src_shape[0]
    for tile, table in zip(plan.tiles, plan.tables, strict=True):
        for g in range(W):
            for a in range(engine.alpha):
                entry, lane = tile.channels[g, a], table.lane[a, g]
                if entry < 0:
                    assert lane == NO_LANE
                    continue
                offset, channel, kyx = entries[entry]
                assert lane % channels == channel if channels < R else lane == channel % R
                assert (table.offset[a, lane], table.ky[a, lane] << 4 | table.kx[a, lane]) \
                    == (offset, kyx)
        used = tile.channels >= 0
        slots = np.count_nonzero(used.any(axis=0))
        assert slots <= engine.gather_ports * plan.rounds


@pytest.mark.parametrize("channels,filters,ports,rounds", [
    (1, 6, 2, 1),       # LeNet-5's first convolution: 25 taps of one channel, 16 banks
    (3, 8, 2, 1),
    (16, 16, 2, 1),
    (16, 16, 4, 1),
])
def test_plans_spread_inputs_over_the_banks(channels, filters, ports, rounds):
    rng = np.random.default_rng(SEED + channels)
    print(f"seed={SEED + channels}")
    engine = EngineConfig(rows=16, cols=16, alpha=8, mac="parallel", gather_ports=ports)
    kernel = 5 if channels == 1 else 3
    weights = rng.integers(-3, 4, (filters, channels * kernel * kernel))
    packed = pack(weights, 2, 0.0)
    src_shape = (channels, 12, 12)
    plan = plan_layer(packed, src_shape, kernel, engine, positions=64)
    assert plan.rounds == rounds
    _check_tables(plan, packed, src_shape, kernel, engine)
    if filters < engine.rows:
        # The rows past the filters compute them again (each row's weights its filter's).
        tile = plan.tiles[0]
        again = np.arange(engine.rows) % filters
        assert np.array_equal(tile.weights, tile.weights[again])
