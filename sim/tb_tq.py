"""cocotb testbench: the term-quantization units against ``codnn.golden.term_quant``.

Configuration (``CODNN_TB_CONFIG``): ``unit`` (``encoder``, ``revealer``, ``lister``,
``tmac`` or ``pmac``), the unit's parameters (``lanes``, ``mag_bits``, ``encoding``,
``group``, ``budget``, ``slots``, ``alpha``, ``beta``, ``g``, ``acc_bits``), ``beats`` (or
``groups`` for the MACs), ``idle``/``backpressure`` probabilities, ``latency`` (the
unit's) and ``seed``.

Values are random over the full range, with 0, +-max and groups of equal values (ties at
the waterline) mixed in; the revealer's first groups can be given (``first_groups``, for
docs/semantics.md's vectors). Every output beat is compared with golden; without stalls the
cycles from the first input to the last output must equal ``inputs + latency`` (for the
MACs: ``alpha * beta`` term pairs or ``g`` products per group, one per cycle).

Report: ``inputs``, ``outputs``, ``cycles``.
"""

import cocotb
import numpy as np

from codnn.golden.systolic import wrap
from codnn.golden.term_quant import digits, kept_digits, lockstep_pairs, reveal, terms, truncate
from codnn.sim.testbench import check_stream, load_config, pack_lanes, write_report


def _values(rng, shape, mag_bits):
    """Random values with corners: 0, +-max, and every fourth row all equal."""
    top = (1 << mag_bits) - 1
    values = rng.integers(-top, top + 1, size=shape)
    flat = values.reshape(-1)
    flat[:3] = [0, top, -top][:flat.size]
    if values.ndim > 1:
        values[1::4] = values[1::4, :1]
    return values


def _digit_word(d):
    """Pack signed digits (sign applied) as ``pos | neg << width`` bits."""
    width = d.shape[-1]
    weights = 1 << np.arange(width, dtype=np.int64)
    return int((d == 1) @ weights) | int((d == -1) @ weights) << width


def _digit_words(rows, width):
    return [pack_lanes([_digit_word(d) for d in row], 2 * width) for row in rows]


def _encoder(config, rng):
    mb, lanes = config["mag_bits"], config["lanes"]
    values = _values(rng, (config["beats"], lanes), mb)
    inputs = [pack_lanes([abs(v) | (v < 0) << mb for v in row], mb + 1) for row in values]
    want = _digit_words(digits(values, mb, config["encoding"]), mb + 1)
    return inputs, want, lambda k: f"values {values[k].tolist()}"


def _revealer(config, rng):
    mb, lanes, group = config["mag_bits"], config["lanes"], config["group"]
    values = _values(rng, (config["beats"] * lanes // group, group), mb)
    spec = np.array(config.get("first_groups", []), dtype=np.int64).reshape(-1, group)
    values[:len(spec)] = spec
    d = digits(values, mb, config["encoding"]).reshape(config["beats"], lanes, mb + 1)
    kept = kept_digits(values, config["budget"], config["encoding"], mb)
    values = values.reshape(config["beats"], lanes)
    return (_digit_words(d, mb + 1),
            _digit_words(kept.reshape(config["beats"], lanes, mb + 1), mb + 1),
            lambda k: f"values {values[k].tolist()}")


def _lister(config, rng):
    mb, lanes, slots = config["mag_bits"], config["lanes"], config["slots"]
    values = _values(rng, (config["beats"], lanes), mb)
    exp_bits = max(1, mb.bit_length())
    term_bits = exp_bits + 2

    def listed(v):
        listed_terms = terms(int(v), mb, config["encoding"])[:slots]
        return pack_lanes([e | (s < 0) << exp_bits | 1 << (exp_bits + 1)
                           for s, e in listed_terms] + [0] * (slots - len(listed_terms)),
                          term_bits)

    want = [pack_lanes([listed(v) for v in row], slots * term_bits) for row in values]
    return (_digit_words(digits(values, mb, config["encoding"]), mb + 1), want,
            lambda k: f"values {values[k].tolist()}")


def _mac_groups(config, rng):
    mb, g = config["mag_bits"], config["g"]
    w = _values(rng, (config["groups"], g), mb)
    x = _values(rng, (config["groups"], g), mb)
    psum = rng.integers(-(1 << 20), 1 << 20, size=config["groups"])
    return w, x, psum


def _mac_beat(config, fields, first, last, psum):
    ab = config["acc_bits"]
    word = 0
    offset = 0
    for value, width in fields:
        word |= (int(value) & ((1 << width) - 1)) << offset
        offset += width
    return word | first << offset | last << (offset + 1) | (int(psum) & ((1 << ab) - 1)) \
        << (offset + 2)


def _tmac(config, rng):
    mb, alpha, beta, ab = config["mag_bits"], config["alpha"], config["beta"], config["acc_bits"]
    e = max(1, mb.bit_length())
    w, x, psum = _mac_groups(config, rng)
    inputs, want = [], []
    for n in range(len(w)):
        slots = lockstep_pairs(w[n], x[n], alpha, beta, config["encoding"], mb)
        for k, slot in enumerate(slots):
            ew, ex, neg = slot or (0, 0, False)
            inputs.append(_mac_beat(config, [(ew, e), (ex, e), (neg, 1), (slot is not None, 1)],
                                    k == 0, k == len(slots) - 1, psum[n]))
        revealed = reveal(w[n][None], alpha, config["encoding"], mb)[0]
        data = truncate(x[n], beta, config["encoding"], mb)
        want.append(int(wrap(psum[n] + int(revealed @ data), ab)) & ((1 << ab) - 1))
    return inputs, want, lambda k: f"group {k}: w {w[k].tolist()} x {x[k].tolist()}"


def _pmac(config, rng):
    mb, ab = config["mag_bits"], config["acc_bits"]
    w, x, psum = _mac_groups(config, rng)
    inputs = [_mac_beat(config, [(w[n, j], mb + 1), (x[n, j], mb + 1)], j == 0,
                        j == w.shape[1] - 1, psum[n])
              for n in range(len(w)) for j in range(w.shape[1])]
    want = [int(wrap(psum[n] + int(w[n] @ x[n]), ab)) & ((1 << ab) - 1) for n in range(len(w))]
    return inputs, want, lambda k: f"group {k}: w {w[k].tolist()} x {x[k].tolist()}"


_UNITS = {"encoder": _encoder, "revealer": _revealer, "lister": _lister, "tmac": _tmac,
          "pmac": _pmac}
_PORTS = {"tmac": ("pairs", "result"), "pmac": ("pairs", "result")}


@cocotb.test()
async def tq_unit_matches_golden(dut):
    config = load_config()
    unit, seed = config["unit"], config["seed"]
    inputs, want, describe = _UNITS[unit](config, np.random.default_rng(seed))

    def check(k, word):
        assert word == want[k], (f"{unit} output beat {k} ({describe(k)}): expected "
                                 f"0x{want[k]:x}, got 0x{word:x} (seed {seed})")

    source, sink = _PORTS.get(unit, ("i", "o"))
    cycles = await check_stream(dut, config, source=source, sink=sink, payloads=inputs,
                                expected=want, check=check, latency_cycles=config["latency"])
    write_report(config, {"inputs": len(inputs), "outputs": len(want), "cycles": cycles})
