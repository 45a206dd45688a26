"""cocotb testbench: float32 values into a block of block floating point
(``codnn.hw.bfp.BlockRound``) against ``codnn.golden.block_float.to_block_float``.

Configuration (``CODNN_TB_CONFIG``): ``g``, ``m``, ``blocks``, ``idle`` and
``backpressure`` probabilities, ``latency`` (the unit's), ``seed``. Blocks
(``stimulus``) hold values over float32's whole range (zeros of both signs, subnormals,
blocks of subnormals only and far below ``2**-128``, the largest values, wide and
narrow spreads), take every width 2..``m`` and the rounding mode changed per beat, with
counters that wrap past ``2**32``; some hold an infinity or NaN (flagged). Without
stalls the cycle count must equal ``blocks + latency``.

Report: ``blocks``, ``cycles``, ``blocks_per_cycle``.
"""

import random

import cocotb
import numpy as np

from codnn.golden.block_float import to_block_float
from codnn.golden.lanes import pack_lanes
from codnn.sim.testbench import check_stream, load_config, write_report


def _value(rng, scale):
    kind = rng.randrange(10)
    sign = rng.getrandbits(1) << 31
    if kind == 0:
        return sign
    if kind == 1:
        return sign | rng.randrange(1, 1 << 23)                       # subnormal
    biased = max(1, min(254, scale + rng.randrange(-30, 3)))
    return sign | (biased << 23) | rng.getrandbits(23)


def _block(rng, g):
    form = rng.randrange(8)
    if form == 0:                                 # subnormals only, some far below 2**-128
        top = rng.choice((1 << 23, 1 << 12, 16))
        return [(rng.getrandbits(1) << 31) | rng.randrange(0, top) for _ in range(g)]
    if form == 1:                                 # one infinity or NaN
        block = [_value(rng, 127) for _ in range(g)]
        block[rng.randrange(g)] = rng.choice((0x7F800000, 0xFF800000, 0x7FC00000,
                                              0x7F800001))
        return block
    scale = rng.choice((1, 2, 254, 127, 100, rng.randrange(1, 255)))
    return [_value(rng, scale) for _ in range(g)]


def stimulus(seed, count, g, m):
    """``count`` beats (dicts of the input's fields)."""
    rng = random.Random(seed)
    beats = []
    for _ in range(count):
        beats.append({"values": _block(rng, g), "width": rng.randrange(2, m + 1),
                      "seed": rng.getrandbits(32),
                      "index": rng.choice((rng.getrandbits(32), 0xFFFFFFF8)),
                      "stochastic": rng.getrandbits(1)})
    return beats


def expected(beat, g):
    """The golden ``(e, mantissas, nonfinite)`` of a beat."""
    x = np.array(beat["values"], np.uint32).view(np.float32)
    if not np.all(np.isfinite(x)):
        return 0, [0] * g, 1
    E, M = to_block_float(x, beat["width"], g=g,
                          rounding="stochastic" if beat["stochastic"] else "nearest",
                          seed=(beat["seed"] + beat["index"]) % (1 << 32))
    return int(E[0]), [int(v) for v in M[0]], 0



def payload(beat, m):
    g = len(beat["values"])
    return (pack_lanes(beat["values"], 32) | beat["width"] << (32 * g)
            | beat["seed"] << (32 * g + 4) | beat["index"] << (32 * g + 36)
            | beat["stochastic"] << (32 * g + 68))


@cocotb.test()
async def block_round_matches_golden(dut):
    config = load_config()
    g, m = config["g"], config["m"]
    beats = stimulus(config["seed"], config["blocks"], g, m)
    results = [expected(beat, g) for beat in beats]

    def check(k, word):
        e = word & 0xFF
        e -= (e >> 7) << 8
        lanes = [(word >> (8 + (m + 1) * j)) & ((1 << (m + 1)) - 1) for j in range(g)]
        lanes = [v - ((v >> m) << (m + 1)) for v in lanes]
        got = (e, lanes, word >> (8 + (m + 1) * g))
        assert got == results[k], (f"block {k}: {beats[k]}: expected {results[k]}, got "
                                   f"{got} (seed {config['seed']})")

    cycles = await check_stream(dut, config, source="i", sink="o",
                                payloads=[payload(beat, m) for beat in beats],
                                expected=results, check=check,
                                latency_cycles=config["latency"])
    write_report(config, {"blocks": len(beats), "cycles": cycles,
                          "blocks_per_cycle": len(beats) / cycles})
