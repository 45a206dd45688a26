"""cocotb testbench: the streaming ``fmix32`` unit against ``codnn.golden.fmix32``.

Configuration (``CODNN_TB_CONFIG``): ``lanes``, ``beats``, ``idle`` and ``backpressure``
probabilities, ``latency`` (the unit's), ``seed``. Random 32-bit values plus the corner
values 0, 1, 2**31 and 2**32-1 go in; every output value is compared with the golden model.
Without idle cycles and backpressure the cycle count from the first accepted input to the
last output (both edges included) must equal the cycle model ``beats + latency``.

Report: ``values``, ``beats``, ``cycles`` (first input edge to last output edge, inclusive)
and ``values_per_cycle``.
"""

import cocotb
import numpy as np

from codnn.golden.fmix32 import fmix32
from codnn.sim.testbench import check_stream, load_config, pack_lanes, unpack_lanes, write_report

_CORNERS = [0, 1, 0x8000_0000, 0xFFFF_FFFF]


def _stimulus(rng, lanes, beats):
    values = rng.integers(0, 2**32, size=beats * lanes, dtype=np.uint64)
    values[:len(_CORNERS)] = _CORNERS[:beats * lanes]
    return values.reshape(beats, lanes)


@cocotb.test()
async def fmix32_matches_golden(dut):
    config = load_config()
    lanes, beats = config["lanes"], config["beats"]
    values = _stimulus(np.random.default_rng(config["seed"]), lanes, beats)
    expected = fmix32(values)

    def check(k, word):
        got = unpack_lanes(word, 32, lanes)
        for lane in range(lanes):
            assert got[lane] == int(expected[k, lane]), (
                f"beat {k} lane {lane}: fmix32(0x{int(values[k, lane]):08x}) expected "
                f"0x{int(expected[k, lane]):08x}, got 0x{got[lane]:08x} "
                f"(seed {config['seed']})")

    cycles = await check_stream(dut, config, source="i", sink="o",
                                payloads=[pack_lanes(row, 32) for row in values],
                                expected=expected, check=check,
                                latency_cycles=config["latency"])
    write_report(config, {"values": beats * lanes, "beats": beats, "cycles": cycles,
                          "values_per_cycle": beats * lanes / cycles})
