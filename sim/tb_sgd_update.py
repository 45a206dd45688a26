"""cocotb testbench: the training step's weight update (``codnn.hw.bfp.SgdUpdate``) against
section 11's golden (``codnn.golden.bfp_training.sgd_update``; NaN results as
``CANONICAL_NAN``).

Configuration (``CODNN_TB_CONFIG``): ``weights``, ``idle`` and ``backpressure``
probabilities, ``latency`` (the unit's), ``seed``. Beats (``stimulus``): weights,
momenta and gradients of every float32 class (zeros of both signs, subnormals, typical
values, the largest finite value, infinities, NaN, any bits), the settings changed from
one beat to the next (zero, typical or any). Without stalls the cycle count must equal
``weights + latency``.

Report: ``weights``, ``cycles``, ``weights_per_cycle``.
"""

import random

import cocotb
import numpy as np

from codnn.golden.bfp_training import sgd_update
from codnn.hw.bfp.float32 import CANONICAL_NAN
from codnn.sim.testbench import check_stream, load_config, write_report

FIELDS = ("w", "v", "g", "lr", "momentum", "decay")


def _bits(x):
    return int(np.float32(x).view(np.uint32))


def _value(rng):
    kind = rng.randrange(10)
    if kind == 0:
        return rng.choice((0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 1, 0x7F7FFFFF))
    if kind == 1:
        return (rng.getrandbits(1) << 31) | rng.randrange(1, 1 << 23)       # subnormal
    if kind < 5:
        return _bits(rng.gauss(0, 0.1))                                     # typical
    return rng.getrandbits(32)


def stimulus(seed, count):
    """``count`` beats: dicts of the input's six fields (their bits)."""
    rng = random.Random(seed)

    def setting(typical):
        return rng.choice((0, _bits(typical), _bits(typical), _value(rng)))

    return [{"w": _value(rng), "v": _value(rng), "g": _value(rng), "lr": setting(0.05),
             "momentum": setting(0.9), "decay": setting(5e-4)} for _ in range(count)]


def _canonical(x):
    return CANONICAL_NAN if np.isnan(x) else int(np.float32(x).view(np.uint32))


def expected(beat):
    """The golden ``(w', v')`` bits of a beat."""
    f = {k: np.uint32(v).view(np.float32) for k, v in beat.items()}
    w, v = sgd_update(f["w"], f["v"], f["g"], f["lr"], f["momentum"], f["decay"])
    return _canonical(w), _canonical(v)


@cocotb.test()
async def sgd_update_matches_golden(dut):
    config = load_config()
    beats = stimulus(config["seed"], config["weights"])
    results = [expected(beat) for beat in beats]

    def check(k, word):
        got = (word & 0xFFFFFFFF, word >> 32)
        assert got == results[k], (f"weight {k}: {beats[k]}: expected "
                                   f"{[hex(x) for x in results[k]]}, got "
                                   f"{[hex(x) for x in got]} (seed {config['seed']})")

    cycles = await check_stream(
        dut, config, source="i", sink="o",
        payloads=[sum(beat[name] << (32 * k) for k, name in enumerate(FIELDS))
                  for beat in beats],
        expected=results, check=check, latency_cycles=config["latency"])
    write_report(config, {"weights": len(beats), "cycles": cycles,
                          "weights_per_cycle": len(beats) / cycles})
