"""Column combining on realistic sparse layers: tiles, cycles and weights lost.

Usage: python benchmarks/systolic_packing.py [--alpha 8] [--gamma 0.5] [--array 32]
       [--vectors 64] [--seed 1]

For conv-shaped layers (N x C = filters x in_channels*3*3, as in VGG/ResNet) magnitude-
pruned to 70, 80 and 90 % sparsity (codnn.golden.workloads.structured_layer: log-normal row and
channel scales, so nonzeros cluster as in trained layers), it packs each layer and prints:
groups, packing efficiency, the share of the remaining weights lost to conflict pruning,
tiles and cycles on an ``array x array`` column-combined array relative to the dense array
(alpha = 1 on the unpruned layer's shape), and the packing time. Cycles come from the cycle
model (``vectors`` input vectors per tile), which the RTL equals in every test.
"""

import argparse
import time

import numpy as np

from codnn.render import print_rows
from codnn.golden.column_combining import dense_tiles, pack, tiles
from codnn.golden.systolic import PARALLEL_PRODUCT_STEPS, cycle_model, make_tiles
from codnn.golden.workloads import structured_layer

SHAPES = [(128, 1152), (256, 2304), (512, 4608)]
SPARSITIES = [0.7, 0.8, 0.9]


def dense_cycles(shape, array, vectors):
    count = dense_tiles(shape, array, array)
    return cycle_model([vectors] * count, rows=array, cols=array, out_stage=True,
                       product_steps=PARALLEL_PRODUCT_STEPS).cycles


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=int, default=8)
    parser.add_argument("--gamma", type=float, default=0.5)
    parser.add_argument("--array", type=int, default=32)
    parser.add_argument("--vectors", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    rows = []
    for shape in SHAPES:
        base_cycles = dense_cycles(shape, args.array, args.vectors)
        for sparsity in SPARSITIES:
            layer = structured_layer(rng, *shape, sparsity)
            start = time.perf_counter()
            packed = pack(layer, args.alpha, args.gamma)
            seconds = time.perf_counter() - start
            layer_tiles = make_tiles(packed, args.array, args.array)
            cycles = cycle_model([args.vectors] * len(layer_tiles), rows=args.array,
                                 cols=args.array, out_stage=True,
                                 product_steps=PARALLEL_PRODUCT_STEPS,
                                 used_cells=[t.used_cells for t in layer_tiles]).cycles
            nonzeros = int(np.count_nonzero(layer))
            packed_tiles = tiles(packed, args.array, args.array)
            rows.append({
                "layer": f"{shape[0]}x{shape[1]}", "sparsity": f"{sparsity:.0%}",
                "groups": len(packed.groups), "pack_eff": f"{packed.efficiency:.3f}",
                "lost": f"{packed.pruned / nonzeros:.1%}",
                "tiles": packed_tiles,
                "tiles_ratio": f"{packed_tiles / dense_tiles(shape, args.array, args.array):.3f}",
                "cycles_ratio": f"{cycles / base_cycles:.3f}",
                "pack_s": f"{seconds:.2f}"})
    print_rows(f"column combining, alpha={args.alpha}, gamma={args.gamma}, "
               f"{args.array}x{args.array} array, {args.vectors} vectors/tile, "
               f"seed {args.seed}", rows,
               [("layer", "N x C"), ("sparsity", "sparsity"), ("groups", "groups"),
                ("pack_eff", "packing eff"), ("lost", "weights lost to conflicts"),
                ("tiles", "tiles"), ("tiles_ratio", "tiles vs dense"),
                ("cycles_ratio", "cycles vs dense"), ("pack_s", "pack time s")])


if __name__ == "__main__":
    main()
