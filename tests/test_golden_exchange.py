"""codnn.golden.exchange against a restatement per chunk: the ring's sum of chunk c runs
``dec(enc(...dec(enc(g_c)) + g_{c+1}...)) + g_{c-1}``, then ``dec(enc(sum / N))``; the
aggregator's is ``g_0 + dec(enc(g_1)) + ...``; every node gets the same values; each node's
bytes are its messages' bytes. Edges: one node, fewer values than nodes, NaN and -0.0
through the INCEPTIONN-style codec, TernGrad's refusal of NaN, seeds that wrap."""

import numpy as np
import pytest

from codnn.golden import inceptionn, rice, terngrad
from codnn.golden.exchange import (Codec, aggregator_allreduce, chunk_bounds, message_seed,
                                   ring_allreduce)

SEED = 20261126
CODECS = [Codec("none"), Codec("inceptionn", 7), Codec("inceptionn", 15),
          Codec("terngrad"), Codec("terngrad", clip=terngrad.CLIP_SIGMAS),
          Codec("rice", 8), Codec("rice", 12, rounding="stochastic")]


def _grads(rng, nodes, count):
    """Gradients over the whole float32 range a codec meets: mostly small, some huge, some
    tiny, exact zeros and -0.0."""
    grads = []
    for _ in range(nodes):
        g = (rng.standard_normal(count) * 10.0 ** rng.integers(-6, 2, count)).astype(np.float32)
        g[rng.random(count) < 0.1] = 0.0
        g[rng.random(count) < 0.05] = -0.0
        grads.append(g)
    return grads


def _encode_decode(codec, values, seed):
    if codec.name == "inceptionn":
        return inceptionn.decompress(inceptionn.compress(values, codec.bound_bits),
                                     codec.bound_bits)
    if codec.name == "terngrad":
        return terngrad.decompress(terngrad.compress(values, seed, clip=codec.clip))
    if codec.name == "rice":
        return rice.decompress(rice.compress(values, codec.bound_bits, codec.rounding, seed))
    return values.copy()


def _ring_reference(grads, codec, seed, step):
    nodes, count = len(grads), grads[0].size
    bounds = chunk_bounds(count, nodes)
    out = np.empty(count, np.float32)
    for c in range(nodes):
        part = slice(bounds[c], bounds[c + 1])
        value = grads[c][part]
        for hop in range(1, nodes):          # node c + hop - 1 sends at step hop - 1
            sender = (c + hop - 1) % nodes
            value = _encode_decode(codec, value, message_seed(
                seed, step, 0, (hop - 1) * nodes + sender)) + grads[(c + hop) % nodes][part]
        owner = (c - 1) % nodes
        out[part] = _encode_decode(codec, value / np.float32(nodes), message_seed(
            seed, step, 0, (nodes - 1) * nodes + owner))
    return out


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: f"{c.name}-{c.bound_bits}-{c.clip}")
@pytest.mark.parametrize("nodes,count", [(1, 37), (2, 1000), (3, 2), (4, 4099), (8, 777)])
def test_ring_equals_chunk_restatement(codec, nodes, count):
    rng = np.random.default_rng(SEED + nodes * count)
    print("seed", SEED + nodes * count)
    grads = _grads(rng, nodes, count)
    step = int(rng.integers(0, 1 << 12))
    results, sent = ring_allreduce(grads, codec, seed=0xFFFF_FFF0, step=step)
    expected = _ring_reference(grads, codec, 0xFFFF_FFF0, step)
    for result in results:
        assert np.array_equal(result.view(np.uint32), expected.view(np.uint32))
    if codec.name == "none":
        bounds = chunk_bounds(count, nodes)
        sizes = np.diff(bounds) * 4
        for r in range(nodes):          # reduce-scatter chunks r-s, all-gather chunks r+1-s
            assert sent[r] == sum(sizes[(r - s) % nodes] + sizes[(r + 1 - s) % nodes]
                                  for s in range(nodes - 1))
        assert np.allclose(expected, np.mean(grads, axis=0), rtol=1e-5, atol=1e-30)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: f"{c.name}-{c.bound_bits}-{c.clip}")
@pytest.mark.parametrize("nodes", [1, 2, 5])
def test_aggregator_equals_restatement(codec, nodes):
    rng = np.random.default_rng(SEED + nodes)
    grads = _grads(rng, nodes, 513)
    results, sent = aggregator_allreduce(grads, codec, seed=SEED, step=3, bucket=2)
    total = grads[0].copy()
    lengths = []
    for r in range(1, nodes):
        seed = message_seed(SEED, 3, 2, r)
        total = total + _encode_decode(codec, grads[r], seed)
        lengths.append(len(codec.compress(grads[r], seed)))
    mean_seed = message_seed(SEED, 3, 2, nodes)
    expected = _encode_decode(codec, total / np.float32(nodes), mean_seed)
    for result in results:
        assert np.array_equal(result.view(np.uint32), expected.view(np.uint32))
    mean_bytes = len(codec.compress(total / np.float32(nodes), mean_seed))
    assert sent == [(nodes - 1) * mean_bytes] + lengths


def test_compression_shrinks_ring_traffic():
    rng = np.random.default_rng(SEED)                  # gradients of a trained network's size
    grads = [(rng.standard_normal(10_000) * 1e-3).astype(np.float32) for _ in range(4)]
    raw = sum(ring_allreduce(grads, Codec("none"))[1])
    assert raw == 2 * 3 * 10_000 * 4          # 2(N-1)/N of M per node, N = 4
    assert sum(ring_allreduce(grads, Codec("inceptionn", 7))[1]) < raw / 3
    assert sum(ring_allreduce(grads, Codec("terngrad"))[1]) < raw / 10


def test_nonfinite_values():
    grads = _grads(np.random.default_rng(SEED), 3, 64)
    grads[1][5], grads[2][40] = np.nan, -np.inf
    results, _ = ring_allreduce(grads, Codec("inceptionn", 10))
    assert np.isnan(results[0][5]) and results[0][40] == -np.inf
    assert np.array_equal(results[0], results[2], equal_nan=True)
    with pytest.raises(ValueError, match="NaN"):
        ring_allreduce(grads, Codec("terngrad"))
    with pytest.raises(ValueError, match="NaN"):
        aggregator_allreduce(grads, Codec("terngrad"))


def test_message_seed_wraps():
    assert message_seed((1 << 32) - 1, 0, 0, 0, 1) == 0
    assert message_seed(0, 1, 2, 3, 4) == 1_000_003 + 202 + 3 * 7919 + 4


def test_bad_input():
    with pytest.raises(ValueError, match="Unknown codec 'zip'"):
        Codec("zip")
    with pytest.raises(ValueError, match="7..15"):
        Codec("inceptionn", 20)
    with pytest.raises(ValueError, match="one size"):
        ring_allreduce([np.zeros(4, np.float32), np.zeros(5, np.float32)], Codec())
    with pytest.raises(ValueError, match="float32"):
        aggregator_allreduce([np.zeros(4)], Codec())
    with pytest.raises(ValueError, match="at least one node"):
        ring_allreduce([], Codec())
    with pytest.raises(inceptionn.CorruptMessage, match="not whole"):
        Codec().decompress(b"abc")


def test_semantics_vector():
    """docs/semantics.md section 6's worked example."""
    results, sent = ring_allreduce([np.array([1, 2, 3], np.float32),
                                    np.array([5, 6, 7], np.float32)], Codec("none"))
    assert [r.tolist() for r in results] == [[3, 4, 5], [3, 4, 5]] and sent == [12, 12]
