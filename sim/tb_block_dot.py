"""cocotb testbench: the block floating point dot-product unit (``codnn.hw.bfp.BlockDot``)
against ``codnn.golden.block_float.block_dot``.

Configuration (``CODNN_TB_CONFIG``): ``g``, ``m``, ``out_m``, ``blocks``, ``idle`` and
``backpressure`` probabilities, ``latency`` (the unit's), ``seed``. Blocks are random over
the whole range, with edges on purpose: all-zero blocks, blocks that cancel to zero, the
largest sums (every product at ``(2**m - 1)**2``, which rounds up into saturation), single
products, the exponent extremes, counters that wrap past ``2**32``, and the rounding mode
changed from one beat to the next. Every result is compared with golden; without stalls
the cycle count must equal ``blocks + latency``.

Report: ``blocks``, ``cycles``, ``blocks_per_cycle``.
"""

import cocotb
import numpy as np

from codnn.golden.block_float import EXPONENT_MAX, EXPONENT_MIN, block_dot
from codnn.hw.bfp.dot import RESULT_EXPONENT_BITS
from codnn.sim.testbench import check_stream, load_config, pack_lanes, write_report


def stimulus(rng, g, m, blocks):
    """``(Ea, Ma, Eb, Mb, counters, stochastic)`` for ``blocks`` blocks."""
    top = (1 << m) - 1
    Ma = rng.integers(-top, top + 1, (blocks, g))
    Mb = rng.integers(-top, top + 1, (blocks, g))
    Ea = rng.integers(EXPONENT_MIN, EXPONENT_MAX + 1, blocks)
    Eb = rng.integers(EXPONENT_MIN, EXPONENT_MAX + 1, blocks)
    counters = rng.integers(0, 1 << 32, blocks, dtype=np.uint64)
    stochastic = rng.integers(0, 2, blocks)
    edges = [
        (np.zeros(g), np.zeros(g)),                              # nothing at all
        (np.full(g, top), np.full(g, top)),                      # the largest sum
        (np.full(g, -top), np.full(g, top)),                     # the most negative
        (np.r_[top, -top, np.zeros(g - 2)] if g > 1 else [0],    # cancels to zero
         np.r_[1, 1, np.zeros(g - 2)] if g > 1 else [0]),
        (np.r_[1, np.zeros(g - 1)], np.r_[-1, np.zeros(g - 1)]),  # one product of one
    ]
    for k, (a, b) in enumerate(edges[:blocks]):
        Ma[k], Mb[k] = a, b
    extremes = [(EXPONENT_MIN, EXPONENT_MIN), (EXPONENT_MAX, EXPONENT_MAX),
                (EXPONENT_MIN, EXPONENT_MAX)]
    for k, (ea, eb) in enumerate(extremes[:blocks]):
        Ea[k], Eb[k] = ea, eb
    counters[:min(4, blocks)] = [0xFFFF_FFFE, 0xFFFF_FFFF, 0, 1][:min(4, blocks)]
    return Ea, Ma, Eb, Mb, counters, stochastic


def payload(ea, eb, ma, mb, counter, stochastic, m):
    lanes = len(ma) * (m + 1)
    return (pack_lanes([ea, eb], 8) | pack_lanes(ma, m + 1) << 16
            | pack_lanes(mb, m + 1) << (16 + lanes) | int(counter) << (16 + 2 * lanes)
            | int(stochastic) << (48 + 2 * lanes))


def _signed(value, bits):
    return value - (1 << bits) if value >> (bits - 1) else value


@cocotb.test()
async def block_dot_matches_golden(dut):
    config = load_config()
    g, m, out_m, blocks = config["g"], config["m"], config["out_m"], config["blocks"]
    Ea, Ma, Eb, Mb, counters, stochastic = stimulus(np.random.default_rng(config["seed"]),
                                                    g, m, blocks)
    E, M = block_dot(Ea, Ma, Eb, Mb, m, out_m, counters, stochastic.astype(bool))

    def check(k, word):
        e = _signed(word & ((1 << RESULT_EXPONENT_BITS) - 1), RESULT_EXPONENT_BITS)
        mantissa = _signed(word >> RESULT_EXPONENT_BITS, out_m + 1)
        assert (e, mantissa) == (int(E[k]), int(M[k])), (
            f"block {k}: ea {Ea[k]} eb {Eb[k]} ma {Ma[k].tolist()} mb {Mb[k].tolist()} "
            f"counter {int(counters[k])} stochastic {stochastic[k]}: expected "
            f"({E[k]}, {M[k]}), got ({e}, {mantissa}) (seed {config['seed']})")

    cycles = await check_stream(
        dut, config, source="i", sink="o",
        payloads=[payload(Ea[k], Eb[k], Ma[k], Mb[k], counters[k], stochastic[k], m)
                  for k in range(blocks)],
        expected=E, check=check, latency_cycles=config["latency"])
    write_report(config, {"blocks": blocks, "cycles": cycles,
                          "blocks_per_cycle": blocks / cycles})
