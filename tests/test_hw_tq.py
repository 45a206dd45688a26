# amaranth: UnusedElaboratable=no
"""The term-quantization units' parameters and signatures (behaviour: test_sim_tq)."""

import pytest

from codnn.hw.tq import PMac, TermEncoder, TermLister, TermQuantArray, TermRevealer, TMac


def test_signature_widths():
    assert len(TermEncoder(lanes=3).o.payload.as_value()) == 3 * 2 * 8
    assert len(TermLister(lanes=2, slots=3).o.payload.as_value()) == 2 * 3 * (3 + 2)
    array = TermQuantArray(rows=2, cols=3, g=8, alpha=12, beta=3)
    assert array.beat_cycles == 12 and array.edge_latency == 4
    assert array.product_steps == 12 + 2 and array.weight_cycles == 12
    assert len(array.weights.payload.as_value()) == 3 * 12 * (3 + 1 + 3 + 1)
    assert len(array.data.payload.as_value()) == 3 * 8 * 8 + 2 * 32 + 1
    assert TermRevealer(lanes=4, group=2, budget=5, mag_bits=9).latency == 10


@pytest.mark.parametrize("build,error,message", [
    (lambda: TermEncoder(lanes=0), TypeError, "Lane count must be a positive integer"),
    (lambda: TermEncoder(encoding="csd"), ValueError, "Encoding must be one of binary, naf"),
    (lambda: TermEncoder(mag_bits=16), ValueError, "Magnitude width must lie in 1..15"),
    (lambda: TermEncoder(mag_bits=7.0), TypeError, "Magnitude width must be an integer"),
    (lambda: TermRevealer(lanes=6, group=4), ValueError, "must be a multiple of the group"),
    (lambda: TermRevealer(budget=0), TypeError, "Budget must be a positive integer"),
    (lambda: TermLister(slots=0), TypeError, "Slot count must be a positive integer"),
    (lambda: TMac(acc_bits=1), ValueError, "Accumulator width must be an integer >= 2"),
    (lambda: PMac(mag_bits=0), ValueError, "Magnitude width must lie in 1..15"),
    (lambda: TermQuantArray(rows=1, cols=1, alpha=0), TypeError,
     "Weight term budget must be a positive integer"),
    (lambda: TermQuantArray(rows=1, cols=1, beta=-1), TypeError,
     "Data term budget must be a positive integer"),
    (lambda: TermQuantArray(rows=1, cols=1, g=0), TypeError, "Group size must be a positive"),
    (lambda: TermQuantArray(rows=1, cols=1, encoding="x"), ValueError, "Encoding must be"),
    (lambda: TermQuantArray(rows=1, cols=1, out_bits=40), ValueError,
     "must not exceed the accumulator"),
])
def test_invalid_parameters(build, error, message):
    with pytest.raises(error, match=message):
        build()
