"""Run an integer network on a board's systolic array over the host link (or on the board
top in simulation), the board's own results feeding the next layer.

Each array layer goes to the device through ``codnn.board.Board.run_layer`` (or
``run_tq_layer`` for a term-quantized network: the device's TQ array; its tiles,
in chunks of the device's data depth; the bias added on the host, which is the same modulo
``2**acc_bits``), the output stage (``codnn.golden.systolic.output_stage``) is applied on the
host to the accumulators the device returned, and the host's steps run as in golden. The
final outputs, and every layer's accumulators, are compared with the golden network.
"""

import numpy as np

from codnn.golden.network import ArrayLayer

__all__ = ["BoardMismatch", "run_network_on_board"]


class BoardMismatch(AssertionError):
    """A layer's accumulators from the device differ from golden."""


def run_network_on_board(network, q, board, *, progress=None):
    """Run ``network`` on integer inputs ``q`` through ``board`` (a ``codnn.board.Board``).

    Returns ``(outputs, cycles)``: the network's outputs and the device cycles of each
    array layer.

    Raises
    ------
    BoardMismatch
        If a layer's accumulators differ from the golden network's.
    """
    golden = network.run(q, keep=True)
    tensors = {network.input: np.asarray(q, dtype=np.int64)}
    cycles = []
    for step in network.steps:
        if not isinstance(step, ArrayLayer):
            tensors[step.output] = network.run_step(step, tensors)
            continue
        source = tensors[step.source]
        X, shape = step.columns(source)
        if step.tq is None:
            acc, spent = board.run_layer(step.packed, X, bias=step.bias)
        else:
            acc, spent = board.run_tq_layer(step.packed.dense(), X, bias=step.bias)
        want = step.accumulate(X, network.acc_bits)
        if not np.array_equal(acc, want):
            bad = np.argwhere(acc != want)[0]
            raise BoardMismatch(f"layer {step.name}: accumulator (filter {bad[0]}, vector "
                                f"{bad[1]}) is {acc[tuple(bad)]} on the device, golden "
                                f"{want[tuple(bad)]}")
        tensors[step.output] = step.finish(acc, source.shape[0], shape, network.out_bits)
        cycles.append({"name": step.name, "vectors": int(X.shape[1]), "cycles": int(spent)})
        if progress:
            progress(len(cycles), len(network.array_layers), step.name)
    if not np.array_equal(tensors[network.output], golden[network.output]):
        raise BoardMismatch("the network's outputs on the device differ from golden")
    return tensors[network.output], cycles
