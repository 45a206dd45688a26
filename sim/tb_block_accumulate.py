"""cocotb testbench: a block pair added to a float32 sum (``codnn.hw.bfp.BlockAccumulate``)
against section 11's golden: ``codnn.golden.bfp_training.block_term``, then NumPy's
float32 addition (NaN results as ``CANONICAL_NAN``).

Configuration (``CODNN_TB_CONFIG``): ``g``, ``m``, ``pairs``, ``idle`` and
``backpressure`` probabilities, ``latency`` (the unit's), ``seed``. Pairs (``stimulus``)
cover exponents over their whole range, every width 2..``m``, all-zero, largest and
cancelling blocks, terms that overflow, fall to subnormals or tie below the smallest
one, and sums of every class (zeros of both signs, infinities, NaN). Without stalls the
cycle count must equal ``pairs + latency``.

Report: ``pairs``, ``cycles``, ``pairs_per_cycle``.
"""

import random

import cocotb
import numpy as np

from codnn.golden.bfp_training import block_term
from codnn.golden.lanes import pack_lanes
from codnn.hw.bfp.float32 import CANONICAL_NAN
from codnn.sim.testbench import check_stream, load_config, write_report


def _pair(rng, g, m):
    wa, wb = rng.randrange(2, m + 1), rng.randrange(2, m + 1)
    top_a, top_b = (1 << wa) - 1, (1 << wb) - 1
    form = rng.randrange(6)
    if form == 0:
        ma, mb = [0] * g, [rng.randrange(-top_b, top_b + 1) for _ in range(g)]
    elif form == 1:                                   # the largest sum
        ma, mb = [rng.choice((-1, 1)) * top_a] * g, [top_b] * g
    elif form == 2 and g > 1:                         # a pair that cancels
        half = [rng.randrange(0, top_b + 1) for _ in range(g // 2)]
        ma = [rng.randrange(-top_a, top_a + 1) for _ in range(g // 2)] * 2 + [0] * (g % 2)
        mb = half + [-v for v in half] + [0] * (g % 2)
    else:
        ma = [rng.randrange(-top_a, top_a + 1) for _ in range(g)]
        mb = [rng.randrange(-top_b, top_b + 1) for _ in range(g)]
    edge = rng.randrange(4)
    if edge == 0:                                     # overflow
        ea, eb = rng.randrange(100, 128), rng.randrange(100, 128)
    elif edge == 1:                                   # subnormal or zero terms
        ea, eb = rng.randrange(-128, -40), rng.randrange(-128, -40)
    else:
        ea, eb = rng.randrange(-128, 128), rng.randrange(-128, 128)
    return {"ea": ea, "eb": eb, "wa": wa, "wb": wb, "ma": ma, "mb": mb}


def _psum(rng):
    if rng.randrange(6) == 0:
        return rng.choice((0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 1))
    return rng.getrandbits(32)


def stimulus(seed, g, m, count):
    """``count`` random beats (dicts of the input's fields), then the edges: exponents
    around float32's smallest normal, and ties below its smallest subnormal."""
    rng = random.Random(seed)
    beats = [dict(_pair(rng, g, m), psum=_psum(rng)) for _ in range(count)]
    top = (1 << m) - 1
    for ea in range(-128, -100, 3):
        beats.append({"ea": ea, "eb": -16 - ea - 100, "wa": m, "wb": m,
                      "ma": [rng.randrange(-top, top + 1) for _ in range(g)],
                      "mb": [rng.randrange(-top, top + 1) for _ in range(g)], "psum": 0})
    # |P| * 2**(q + 149) = k + 1/2 (widths 2): rounds to even
    for eb in (-20, -21):
        for ma, mb in (([1], [1]), ([3], [1]), ([3, 1], [1, 2]), ([3, 3], [3, 2])):
            for sign in (1, -1):
                if len(ma) <= g:
                    beats.append({"ea": -128, "eb": eb, "wa": 2, "wb": 2,
                                  "ma": [sign * v for v in ma] + [0] * (g - len(ma)),
                                  "mb": mb + [0] * (g - len(mb)), "psum": 0x80000000})
    return beats


def term_bits(beat):
    """The golden term's 32 bits."""
    term = block_term(beat["ea"], np.array(beat["ma"]), beat["eb"], np.array(beat["mb"]),
                      beat["wa"], beat["wb"])
    return int(np.float32(term).view(np.uint32))


def sum_bits(beat):
    """The golden ``psum + term``'s 32 bits."""
    with np.errstate(all="ignore"):
        total = (np.uint32(beat["psum"]).view(np.float32)
                 + np.uint32(term_bits(beat)).view(np.float32))
    return CANONICAL_NAN if np.isnan(total) else int(total.view(np.uint32))


def payload(beat, m):
    lanes = len(beat["ma"]) * (m + 1)
    return (pack_lanes([beat["ea"], beat["eb"]], 8) | pack_lanes([beat["wa"], beat["wb"]], 4)
            << 16 | pack_lanes(beat["ma"], m + 1) << 24
            | pack_lanes(beat["mb"], m + 1) << (24 + lanes)
            | beat["psum"] << (24 + 2 * lanes))


@cocotb.test()
async def block_accumulate_matches_golden(dut):
    config = load_config()
    g, m = config["g"], config["m"]
    beats = stimulus(config["seed"], g, m, config["pairs"])
    expected = [sum_bits(beat) for beat in beats]

    def check(k, word):
        assert word == expected[k], (f"pair {k}: {beats[k]}: expected {expected[k]:#010x}, "
                                     f"got {word:#010x} (seed {config['seed']})")

    cycles = await check_stream(dut, config, source="i", sink="o",
                                payloads=[payload(beat, m) for beat in beats],
                                expected=expected, check=check,
                                latency_cycles=config["latency"])
    write_report(config, {"pairs": len(beats), "cycles": cycles,
                          "pairs_per_cycle": len(beats) / cycles})
