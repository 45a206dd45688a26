"""codnn.golden.rice against docs/semantics.md section 10: its worked vectors, a literal
restatement of the quantizer in exact fractions, the bound on every float32 class, the
Rice parameter's choice, and corrupt messages."""

from fractions import Fraction

import numpy as np
import pytest

from codnn.golden import rice
from codnn.golden.fmix32 import fmix32
from codnn.golden.inceptionn import CorruptMessage

SEED = 20261128
SPEC_VALUES = [0.01, -0.02, 0.0005, 0.03, 100.0, -0.0]


def test_semantics_vectors():
    x = np.array(SPEC_VALUES, np.float32)
    q, escape = rice.quantize(x, 10)
    assert q.tolist() == [5, -10, 0, 15, 0, 0] and escape.tolist() == [0, 0, 0, 0, 1, 0]
    message = rice.compress(x, 10)
    assert message.hex() == "060000000a65bef1e7ff1f0000590800000000b3c6b92d"
    assert rice.decompress(message).tolist() == [5 / 512, -10 / 512, 0.0, 15 / 512, 100.0, 0.0]
    q, _ = rice.quantize(x, 10, "stochastic", seed=0x12345678)
    assert q.tolist() == [11, -20, 0, 31, 0, 0]
    message = rice.compress(x, 10, "stochastic", seed=0x12345678)
    assert message.hex() == "060000008a677e873fffff01009085000000000000bae6f7e0"


def literal_q(value, b, rounding, draw):
    """Section 10's quantizer for one float32, in exact fractions: q, or None to escape."""
    if not np.isfinite(value):
        return None
    step = Fraction(2) ** (1 - b if rounding == "nearest" else -b)
    t = abs(Fraction(float(value))) / step
    if rounding == "nearest":
        mag = int(t + Fraction(1, 2))
    else:
        whole = int(t)
        mag = whole + (int((t - whole) * 2 ** 32) + draw >= 2 ** 32)
    if mag >= rice.MAX_MAGNITUDE:
        return None
    return -mag if np.signbit(value) else mag


def _values(rng, count):
    """Random float32 bit patterns over every exponent, and the edges: zeros, denormals,
    infinities, NaNs, ties, the largest coded magnitudes and the first escapes."""
    bits = rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)
    edges = [0.0, -0.0, 1e-45, -1e-40, np.inf, -np.inf, np.float32(3.4028235e38)]
    for b in (7, 10, 15):
        for k in range(1, 40):
            edges += [k * 2.0 ** -b, -(k + 0.5) * 2.0 ** (1 - b)]
        edges += [(2 ** 15 - 0.5) * 2.0 ** (1 - b), (2 ** 15 - 0.51) * 2.0 ** (1 - b),
                  2 ** 15 * 2.0 ** -b, (2 ** 15 - 1) * 2.0 ** -b]
    nans = np.array([0x7FC00000, 0xFFC00001, 0x7F800001], np.uint32).view(np.float32)
    return np.concatenate([bits.view(np.float32), np.array(edges, np.float32), nans])


@pytest.mark.parametrize("rounding", rice.ROUNDINGS)
@pytest.mark.parametrize("b", [7, 10, 15])
def test_quantizer_equals_literal_and_holds_the_bound(b, rounding):
    rng = np.random.default_rng(SEED + b)
    print(f"seed={SEED + b}")
    x = _values(rng, 3000)
    # Scale some patterns into the coded range so every path is reached.
    x[:1000] = (x[:1000].view(np.uint32) & 0x807FFFFF | (rng.integers(100, 135, 1000) << 23)
                .astype(np.uint32)).view(np.float32)
    seed = 0xFFFF_FF00                      # the counter wraps inside the message
    q, escape = rice.quantize(x, b, rounding, seed)
    draws = fmix32((np.arange(x.size, dtype=np.uint64) + seed) % (1 << 32))
    for i, value in enumerate(x):
        want = literal_q(value, b, rounding, int(draws[i]))
        assert (escape[i], q[i]) == ((True, 0) if want is None else (False, want)), \
            f"value {i} = {value!r} (seed {SEED + b})"
    assert escape.any() and (q != 0).any() and (np.abs(q) > 1000).any()
    decoded = rice.decompress(rice.compress(x, b, rounding, seed))
    assert np.array_equal(decoded.view(np.uint32)[escape], x.view(np.uint32)[escape])
    error = np.abs(decoded[~escape].astype(np.float64) - x[~escape].astype(np.float64))
    if rounding == "nearest":
        assert error.max() <= 2.0 ** -b and (error == 2.0 ** -b).any()
    else:
        assert error.max() < 2.0 ** -b


def test_stochastic_rounding_is_unbiased():
    # 0.3 steps above an integer, 40,000 draws: the mean decodes to the value.
    step = 2.0 ** -10
    x = np.full(40_000, np.float32(5.3 * step))
    decoded = rice.decompress(rice.compress(x, 10, "stochastic", seed=SEED))
    assert set(np.unique(decoded)) == {np.float32(5 * step), np.float32(6 * step)}
    sigma = step * np.sqrt(0.3 * 0.7 / x.size)
    assert abs(decoded.astype(np.float64).mean() - float(x[0])) < 4 * sigma
    nearest = rice.decompress(rice.compress(x, 10))
    assert np.all(nearest == np.float32(6 * step))     # 2.65 steps of 2**-9 round to 3


def test_rice_parameter_is_the_shortest():
    rng = np.random.default_rng(SEED)
    z = np.minimum(rng.geometric(rng.uniform(0.01, 1, (400, 1)), (400, rice.BLOCK)) - 1,
                   2 ** 16 - 1)
    z[:20] = 0
    escape = rng.uniform(size=z.shape) < 0.02
    escape[:10] = False
    chosen = rice.choose_k(z, escape)
    assert np.all(chosen[:10] == -1)
    for block in range(400):
        costs = [sum(47 if e or (v >> k) >= 15 else (v >> k) + 1 + k
                     for v, e in zip(z[block], escape[block])) for k in range(15)]
        zero = not z[block].any() and not escape[block].any()
        assert chosen[block] == (-1 if zero else costs.index(min(costs))), \
            f"block {block} (seed {SEED})"
    assert len(set(chosen.tolist())) > 5


def test_ratio_on_zero_and_dense_blocks():
    # An all-zero message costs a bit per block; the largest message is max_message_bytes.
    assert len(rice.compress(np.zeros(1600, np.float32), 10)) == 9 + 100 // 8 + 1
    worst = np.full(112, np.nan, np.float32)
    assert len(rice.compress(worst, 10)) == rice.max_message_bytes(112)
    assert len(rice.compress(np.zeros(0, np.float32), 10)) == 9
    assert rice.decompress(rice.compress(np.zeros(0, np.float32), 10)).size == 0


def test_corrupt_messages_are_refused():
    rng = np.random.default_rng(SEED)
    x = (rng.standard_normal(100) * 0.01).astype(np.float32)
    x[99] = 0.05
    message = rice.compress(x, 10)
    for cut in range(len(message)):
        with pytest.raises(CorruptMessage):
            rice.decompress(message[:cut])
    for bit in range(8 * len(message)):
        flipped = bytearray(message)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CorruptMessage, match="CRC"):
            rice.decompress(bytes(flipped))
    with pytest.raises(CorruptMessage):
        rice.decompress(message + b"\0")
    body = message[:-4]
    cases = {
        "Reserved settings": body[:4] + bytes([body[4] | 0x20]) + body[5:],
        "Error bound bits": body[:4] + bytes([20]) + body[5:],
        "past the message's count": (99).to_bytes(4, "little") + body[4:],
        "Bits past": body + b"\x01",
        "Message cut": body[:-3],
        # one value, its block a 1 bit and the parameter 15
        "Rice parameter 15": (1).to_bytes(4, "little") + bytes([10, 0x1F, 0]),
    }
    for match, forged in cases.items():
        with pytest.raises(CorruptMessage, match=match):
            rice.decompress(rice.seal(forged))
    with pytest.raises(CorruptMessage, match="more than the 99 allowed"):
        rice.decompress(message, max_values=99)
    assert rice.decompress(message, max_values=100).size == 100


@pytest.mark.parametrize("call,message", [
    (lambda: rice.compress(np.zeros(3, np.float32), 6), "Error bound bits"),
    (lambda: rice.compress(np.zeros(3, np.float32), 10, "up"), "Rounding must be one of"),
])
def test_bad_settings(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_received_values_of_cut_and_corrupt_messages():
    # What a streaming decoder gives (docs/nic.md, bad input): the values of every code
    # wholly inside the stream (the message less its header and its last 4 bytes), in
    # order, then zeros; a count too large or no whole header gives no output.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    x = (rng.standard_normal(70) * 0.01).astype(np.float32)
    x[[3, 40]] = [np.nan, 1e6]                         # escapes
    x[16:32] = 0                                       # a zero block
    message = rice.compress(x, 10)
    full = rice.decompress(message)
    values, bad = rice.received_values(message, max_values=70)
    assert not bad and values.view(np.uint32).tolist() == full.view(np.uint32).tolist()
    decoded, partial = 0, set()
    for cut in range(len(message)):
        values, bad = rice.received_values(message[:cut], max_values=70)
        assert bad
        if cut < rice.HEADER_BYTES:
            assert values is None
            continue
        kept = int(np.argmin(np.append(values.view(np.uint32) == full.view(np.uint32), 0)))
        assert kept >= decoded and not values.view(np.uint32)[kept:].any(), cut
        decoded = kept
        partial.add(kept)
    assert len(partial - {0, 70}) > 5               # cuts inside the blocks' codes
    assert rice.received_values(message, max_values=69) == (None, True)
    # A wrong CRC: every value decodes, the message is bad.
    broken = message[:-1] + bytes([message[-1] ^ 1])
    values, bad = rice.received_values(broken, max_values=70)
    assert bad and values.view(np.uint32).tolist() == full.view(np.uint32).tolist()
    # A settings byte with a reserved bit or a bound out of range: zeros.
    for settings in (message[4] | 0x40, 6, 16):
        forged = rice.seal(message[:4] + bytes([settings]) + message[5:-4])
        values, bad = rice.received_values(forged, max_values=70)
        assert bad and values.size == 70 and not values.view(np.uint32).any()
    # Block 1 with the parameter 15: block 0 decodes, zeros from there.
    one = rice.compress(x[:16], 10)
    forged = rice.seal((32).to_bytes(4, "little") + one[4:-4] + bytes([0x1F]))
    values, bad = rice.received_values(forged, max_values=70)
    assert bad and values[:16].view(np.uint32).tolist() == full[:16].view(np.uint32).tolist()
    assert not values.view(np.uint32)[16:].any()
    # Past the coded range (z = 2**16 with k = 14: q = 2**15): decoded all the same.
    wide = rice.seal((1).to_bytes(4, "little") + bytes([10]) + (
        1 | 14 << 1 | 0b1111 << 5 | 0 << 9).to_bytes(2, "little") + bytes(2))
    values, bad = rice.received_values(wide, max_values=70)
    assert bad and values.tolist() == [2.0 ** 15 * 2.0 ** -9]
