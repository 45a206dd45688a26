"""cocotb testbench: the TQ array against ``codnn.golden.tq_array``.

Configuration (``CODNN_TB_CONFIG``): the array's parameters (``rows``, ``cols``, ``g``,
``alpha``, ``beta``, ``mag_bits``, ``encoding``, ``acc_bits``, ``out_bits``, ``requant``),
the run-time ``shift`` (and ``multiplier``), as ``codnn.sim.tb_systolic``, the layer
(``layer_rows`` x ``layer_cols`` from a structured random layer, quantized to
``mag_bits`` magnitude bits), ``vectors`` data vectors (random over the full
range, with a full-scale one) per tile, or ``weights``, ``inputs`` and ``bias`` (``.npy``
files: a whole network's layer), ``idle``/``backpressure`` and ``seed``.

Every tile's weight queues go in on ``weights``, its vectors on ``data`` with partial sums
chained as in ``codnn.sim.tb_systolic``; every result beat is compared with golden and,
without stalls, the cycles from the first weight beat to the last result with
``codnn.golden.systolic.cycle_model`` with ``codnn.golden.tq_array.tq_timing`` (``alpha``
cycles per vector).
"""

import cocotb
import numpy as np

from codnn.golden.systolic import cycle_model
from codnn.golden.tq_array import data_vector_word, run_tq_layer, tq_timing, weight_row_word
from codnn.golden.workloads import quantize_symmetric, structured_layer
from codnn.sim.testbench import (load_config, pack_lanes, result_checker, run_array,
                                  tile_stage, write_report)


@cocotb.test()
async def tq_array_matches_golden(dut):
    config = load_config()
    seed = config["seed"]
    R, W, g, alpha, beta = (config[k] for k in ("rows", "cols", "g", "alpha", "beta"))
    mb, ab = config["mag_bits"], config["acc_bits"]
    rng = np.random.default_rng(seed)
    if config.get("weights"):
        weights, X, bias = (np.load(config[k]) for k in ("weights", "inputs", "bias"))
    else:
        layer = structured_layer(rng, config["layer_rows"], config["layer_cols"], 0.0)
        weights, _ = quantize_symmetric(layer, mb + 1)
        top = (1 << mb) - 1
        X = rng.integers(-top, top + 1, size=(config["layer_cols"], config["vectors"]))
        X[:, 0] = top
        bias = rng.integers(-(1 << 12), 1 << 12, size=config["layer_rows"])
    per_tile, _ = run_tq_layer(weights, X, g=g, alpha=alpha, beta=beta, rows=R, cols=W,
                               acc_bits=ab, bias=bias, encoding=config["encoding"],
                               mag_bits=mb)

    weight_beats, data_beats, expected = [], [], []
    for tile, beats, psum, results in per_tile:
        stages = tile_stage(config, tile.row_block)
        for r in range(R):
            weight_beats.append((weight_row_word(tile.queues[r], alpha=alpha, mag_bits=mb, g=g),
                                 stages[r]))
        for t in range(len(beats)):
            x = data_vector_word(beats[t], mag_bits=mb)
            offset = W * g * (mb + 1)
            word = x | pack_lanes(psum[t], ab) << offset
            data_beats.append(word | int(t == len(beats) - 1) << (offset + R * ab))
            expected.append((f"tile ({tile.row_block},{tile.col_block}) vector {t}",
                             results[t], t == len(beats) - 1, stages))

    config["beat_cycles"] = alpha
    cycles, held = await run_array(dut, config, weight_beats=weight_beats, data_beats=data_beats,
                             results=len(expected), check=result_checker(config, expected))
    model = cycle_model([len(beats) for _, beats, _, _ in per_tile], rows=R, cols=W,
                        out_stage=config["out_bits"] is not None,
                        requant=config.get("requant", "shift"), **tq_timing(alpha, beta, mb))
    if config["idle"] == 0 and config["backpressure"] == 0:
        assert cycles == model.cycles, (f"{cycles} cycles from first weight to last result, "
                                        f"cycle model says {model.cycles} (seed {seed})")
    write_report(config, {"tiles": model.tiles, "beats": model.beats, "cycles": cycles,
                          "results_held": held, "model_cycles_without_stalls": model.cycles})
