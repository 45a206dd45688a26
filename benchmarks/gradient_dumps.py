"""Real gradients for the NIC benchmarks: an MLP trained on scikit-learn's digits.

A 64-128-64-10 MLP (ReLU, softmax cross-entropy, float32, plain minibatch SGD written here
in NumPy so the gradients are exactly the ones a worker would send) trains on the 1797
8x8 digits that ship with scikit-learn. The full gradient of one minibatch (all layers,
weights then biases, flattened) is dumped at several steps of training.

    .venv/bin/python benchmarks/gradient_dumps.py [-o benchmarks/data/digits_mlp_gradients.npz]

Output ``.npz``: ``step<N>`` (float32, 17226 values each) for N in ``STEPS``, and
``accuracy`` (test accuracy after the last step). Seed 1; the dump is deterministic.
"""

import argparse
from pathlib import Path

import numpy as np

STEPS = (1, 100, 1000, 3000)
SIZES = (64, 128, 64, 10)
DEFAULT_OUTPUT = Path(__file__).parent / "data" / "digits_mlp_gradients.npz"


def _data(rng):
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target
    order = rng.permutation(len(x))
    train, test = order[:1400], order[1400:]
    return x[train], y[train], x[test], y[test]


def _forward(params, x):
    activations = [x]
    for k, (w, b) in enumerate(params):
        z = activations[-1] @ w + b
        activations.append(np.maximum(z, 0) if k < len(params) - 1 else z)
    return activations


def _gradients(params, x, y):
    activations = _forward(params, x)
    logits = activations[-1]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    delta = p
    delta[np.arange(len(y)), y] -= 1
    delta /= len(y)
    grads = []
    for k in reversed(range(len(params))):
        w, _ = params[k]
        grads.append((activations[k].T @ delta, delta.sum(axis=0)))
        if k:
            delta = (delta @ w.T) * (activations[k] > 0)
    return grads[::-1]


def dump(output=DEFAULT_OUTPUT, steps=STEPS, seed=1, batch=64, rate=0.1):
    """Train, write the dumps to ``output`` and return the test accuracy."""
    rng = np.random.default_rng(seed)
    x, y, x_test, y_test = _data(rng)
    params = [(rng.normal(0, np.sqrt(2 / n), (n, m)).astype(np.float32),
               np.zeros(m, np.float32)) for n, m in zip(SIZES, SIZES[1:])]
    dumps = {}
    for step in range(1, max(steps) + 1):
        pick = rng.choice(len(x), batch, replace=False)
        grads = _gradients(params, x[pick], y[pick])
        if step in steps:
            dumps[f"step{step}"] = np.concatenate(
                [g.reshape(-1) for pair in grads for g in pair]).astype(np.float32)
        params = [(w - rate * gw, b - rate * gb) for (w, b), (gw, gb) in zip(params, grads)]
    accuracy = float(np.mean(_forward(params, x_test)[-1].argmax(axis=1) == y_test))
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    np.savez(output, accuracy=np.float32(accuracy), **dumps)
    return accuracy


def load(path=DEFAULT_OUTPUT):
    """The dumped gradients, ``{step: float32 array}``."""
    with np.load(path) as f:
        return {int(k[4:]): f[k] for k in f.files if k.startswith("step")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    accuracy = dump(args.output)
    for step, g in load(args.output).items():
        print(f"step {step:5d}: {g.size} values, max|g| {np.abs(g).max():.3e}, "
              f"std {g.std():.3e}")
    print(f"test accuracy after {max(STEPS)} steps: {accuracy:.2%} -> {args.output}")


if __name__ == "__main__":
    main()
