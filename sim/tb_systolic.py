"""cocotb testbench: the column-combined systolic array against ``codnn.golden.systolic``.

Configuration (``CODNN_TB_CONFIG``): the array's parameters (``rows``, ``cols``, ``alpha``,
``weight_bits``, ``data_bits``, ``data_signed``, ``acc_bits``, ``mac``, ``out_bits``,
``requant``), the run-time ``shift`` (and with ``requant`` ``"multiplier"``
``multiplier``; each one, or a list with one per layer row: the rows' own, taken with
their weight beats), the layer (``packed``: a packed layer's arrays in an ``.npz``, or else a
``layer_rows`` x ``layer_cols`` filter matrix at ``sparsity``, magnitude-pruned from a
structured random layer, packed with ``gamma``), ``vectors`` input vectors per tile (or
``inputs``: an ``.npy`` of the layer's input vectors, channels x vectors, and ``bias``: an
``.npy`` of its bias, as a whole network's run gives them), ``idle``/``backpressure``
probabilities and ``seed``.

The layer runs as tiles: all tiles' weights go in on the weight stream, all tiles' data
beats on the data stream. A beat's ``psum`` is the bias (first column block) or the golden
result of the previous column block, which every earlier output was checked to equal, so
the chain is the one the hardware computed. Every result beat (``acc``, ``y``, ``last``) is
compared with golden; without idle cycles and backpressure the cycles from the first weight
beat to the last result must equal ``codnn.golden.systolic.cycle_model``.
"""

import cocotb
import numpy as np

from codnn.golden.column_combining import PackedLayer, pack
from codnn.golden.systolic import (
    check_fits,
    cycle_model,
    mac_timing,
    run_layer,
    select_bits,
)
from codnn.golden.workloads import quantize_symmetric, structured_layer
from codnn.sim.testbench import (load_config, pack_lanes, result_checker, run_array,
                                  tile_stage, write_report)


def build_workload(config):
    """Return ``(packed, per_tile, acc)`` for a configuration.

    The layer is ``config["packed"]`` (an ``.npz`` of ``PackedLayer.to_arrays``, integer
    weights that fit the array) when given, else a structured random layer.
    """
    rng = np.random.default_rng(config["seed"])
    if config.get("packed"):
        with np.load(config["packed"], allow_pickle=False) as arrays:
            packed = PackedLayer.from_arrays(arrays)
        check_fits(packed, alpha=config["alpha"], weight_bits=config["weight_bits"])
    else:
        layer = structured_layer(rng, config["layer_rows"], config["layer_cols"],
                                 config["sparsity"])
        weights, _ = quantize_symmetric(layer, config["weight_bits"])
        packed = pack(weights, config["alpha"], config["gamma"])
    bits = config["data_bits"]
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if config["data_signed"] else (0, 1 << bits)
    if config.get("inputs"):
        X, bias = np.load(config["inputs"]), np.load(config["bias"])
    else:
        X = rng.integers(low, high, size=(packed.columns, config["vectors"]))
        X[:, 0] = high - 1                               # a full-scale vector
        bias = rng.integers(-(1 << 12), 1 << 12, size=packed.rows)
    per_tile, acc = run_layer(packed, X, rows=config["rows"], cols=config["cols"],
                              acc_bits=config["acc_bits"], bias=bias, alpha=config["alpha"])
    return packed, per_tile, acc


@cocotb.test()
async def array_matches_golden(dut):
    config = load_config()
    seed = config["seed"]
    R, W, alpha = config["rows"], config["cols"], config["alpha"]
    wb, db, ab, ob = (config["weight_bits"], config["data_bits"], config["acc_bits"],
                      config["out_bits"])
    sel_bits = select_bits(alpha)
    packed, per_tile, _ = build_workload(config)

    weight_beats, data_beats, expected = [], [], []
    for tile, beats, psum, results in per_tile:
        stages = tile_stage(config, tile.row_block)
        for r in range(R):
            weight_beats.append((pack_lanes(
                [(int(w) & ((1 << wb) - 1)) | int(sel) << wb
                 for w, sel in zip(tile.weights[r], tile.selects[r])], wb + sel_bits),
                stages[r]))
        for t in range(len(beats)):
            x = pack_lanes(beats[t].reshape(-1), db)
            word = x | pack_lanes(psum[t], ab) << (W * alpha * db)
            data_beats.append(word | int(t == len(beats) - 1) << (W * alpha * db + R * ab))
            expected.append((f"tile ({tile.row_block},{tile.col_block}) vector {t}",
                             results[t], t == len(beats) - 1, stages))

    cycles, held = await run_array(dut, config, weight_beats=weight_beats, data_beats=data_beats,
                             results=len(expected), check=result_checker(config, expected))
    model = cycle_model([len(beats) for _, beats, _, _ in per_tile], rows=R, cols=W,
                        out_stage=ob is not None, requant=config.get("requant", "shift"),
                        **mac_timing(config["mac"], data_bits=db, weight_bits=wb, cols=W,
                                     acc_bits=ab),
                        used_cells=[tile.used_cells for tile, *_ in per_tile])
    if config["idle"] == 0 and config["backpressure"] == 0:
        assert cycles == model.cycles, (f"{cycles} cycles from first weight to last result, "
                                        f"cycle model says {model.cycles} (seed {seed})")
    write_report(config, {"tiles": model.tiles, "beats": model.beats, "cycles": cycles,
                          "results_held": held,
                          "model_cycles_without_stalls": model.cycles,
                          "groups": len(packed.groups),
                          "layer_nonzeros": packed.nonzeros, "conflicts_pruned": packed.pruned,
                          "overall_util": model.useful_macs / (cycles * R * W),
                          "mapping_efficiency": model.mapping_efficiency,
                          "packing_efficiency": packed.efficiency})
