"""The network compiler: an integer network (``golden.network``) to the network engine's
program and weight image (``golden.network_program``), with the engine's cycle model and
the bytes each memory moves per image (docs/networks.md, "The network engine").

Allocation: every tensor gets a region of the activation buffer (the accumulators of a
layer without output stage: of the accumulator buffer) from the step that writes it to the
last step that reads it, at the end of the buffer away from the step's input; a flatten
is the same region, read by the next layer's gather table; a residual add writes over an
input that nothing reads after it. A network that does not fit its engine is refused with
one line naming the step and the buffer.

Cycles (the model the engine's gateware is to be held to): a layer is
``golden.systolic``'s cycle model of its tiles on the engine's array, a data beat at most
every ``max(beat_cycles, ceil(alpha / GATHER_PORTS))`` cycles (each array column gathers
its ``alpha`` values through ``GATHER_PORTS`` read ports of its own copy of the activation
buffer) and a weight beat (an array row of cells, ``2 * cols`` bytes) at most every
``ceil(2 * cols / EXTERNAL_PORT_BYTES)`` cycles when the weight image is external;
pooling and the add take the cycles of ``hw.network.PostProcess`` (a cycle to set up, a
window position a cycle, all lanes at once, and per output word 2 more for a max,
``out_bits + 3`` for an average; an add a word a cycle, and 2 more); each step costs ``STEP_CYCLES`` more (the
sequencer's fetch and the pipeline's drain).
"""

from dataclasses import dataclass

import numpy as np

from codnn.golden.column_combining import im2col
from codnn.golden.network import Add, ArrayLayer, Flatten, Pool
from codnn.golden.network_program import (MAX_KERNEL, MULTIPLIER_BITS, AddStep, LayerStep,
                                          PoolStep,
                                          Program, ProgramError, Region, gather_entries,
                                          bias_bytes, layer_block, tile_bytes, words)
from codnn.golden.systolic import cycle_model, mac_timing, make_tiles

__all__ = ["GATHER_PORTS", "EXTERNAL_PORT_BYTES", "STEP_CYCLES", "CompileError", "StepCost",
           "CompiledNetwork", "compile_network"]

#: Read ports of each array column's copy of the activation buffer.
GATHER_PORTS = 2
#: Bytes a cycle of the external memory port (a 64-bit AXI4 master).
EXTERNAL_PORT_BYTES = 8
#: Cycles a step costs beyond its work: the descriptor's fetch and the pipeline's drain.
STEP_CYCLES = 4


class CompileError(ValueError):
    """A network the engine cannot run: one line naming the step and the buffer."""


@dataclass(frozen=True)
class StepCost:
    """One step's cycles and what it moves per image: words of the activation buffer read
    (gathers, window reads) and written, accumulator and partial-sum words written and
    read, and weight image bytes (on-chip, or through the external port)."""

    name: str
    op: str
    cycles: int
    act_reads: int
    act_writes: int
    acc_writes: int
    psum_words: int
    weight_bytes: int


@dataclass(frozen=True)
class CompiledNetwork:
    program: Program
    image: bytes
    costs: tuple
    external_weights: bool

    @property
    def cycles(self):
        return sum(c.cycles for c in self.costs)

    def traffic(self):
        """Bytes per image on each memory port: ``on_chip`` (activation words of ``rows``
        activations, accumulator and partial-sum words of ``rows`` accumulators, and the
        weights when they fit) and ``external``."""
        engine = self.program.engine
        act_word = engine.rows * engine.out_bits // 8
        acc_word = engine.rows * engine.acc_bits // 8
        weights = sum(c.weight_bytes for c in self.costs)
        on_chip = sum((c.act_reads + c.act_writes) * act_word
                      + (c.acc_writes + c.psum_words) * acc_word for c in self.costs)
        return {"on_chip": on_chip + (0 if self.external_weights else weights),
                "external": weights if self.external_weights else 0}


class _Allocator:
    """Regions of one buffer, each held until its last reader has run."""

    def __init__(self, memory, size, lanes):
        self.memory, self.size, self.lanes = memory, size, lanes
        self.held = {}                                  # tensor -> (addr, end, last use)

    def free_after(self, index):
        self.held = {t: r for t, r in self.held.items() if r[2] > index}

    def place(self, tensor, shape, last, what, high=False):
        """A region for ``tensor`` (``what`` it is, for the error): the lowest free one, or
        with ``high`` the highest."""
        need = words(shape, self.lanes)
        edges = [0] + [a for r in sorted(self.held.values()) for a in r[:2]] + [self.size]
        gaps = [(edges[k], edges[k + 1]) for k in range(0, len(edges), 2)
                if edges[k + 1] - edges[k] >= need]
        if not gaps:
            used = sum(end - start for start, end, _ in self.held.values())
            held = (f" ({used} already held by {', '.join(sorted(self.held))})"
                    if self.held else "")
            raise CompileError(
                f"{what} ({' x '.join(map(str, shape))}: {need} words of "
                f"{self.lanes}) does not fit the {self.memory} buffer of {self.size} "
                f"words{held}")
        addr = gaps[-1][1] - need if high else gaps[0][0]
        self.held[tensor] = (addr, addr + need, last)
        return Region("act" if self.memory == "activation" else "acc", addr, tuple(shape))


def _check_network(network, engine):
    if network.out_bits != engine.out_bits or network.acc_bits != engine.acc_bits:
        raise CompileError(f"the network has {network.out_bits}-bit activations and "
                           f"{network.acc_bits}-bit accumulators, the engine "
                           f"{engine.out_bits} and {engine.acc_bits}")
    for layer in network.array_layers:
        if layer.kernel > MAX_KERNEL:
            raise CompileError(f"{layer.name}: a {layer.kernel} x {layer.kernel} kernel; the "
                               f"engine's gather takes at most {MAX_KERNEL} x {MAX_KERNEL}")
        if layer.tq is not None:
            raise CompileError(f"{layer.name}: term-quantized layers do not run on the "
                               f"network engine yet (column-combined arrays only)")
        if layer.packed.alpha > engine.alpha:
            raise CompileError(f"{layer.name}: packed with alpha {layer.packed.alpha}, the "
                               f"engine's array takes {engine.alpha}")
        top = 1 << (engine.weight_bits - 1)
        if layer.packed.P.size and (layer.packed.P.min() < -top or layer.packed.P.max() >= top):
            raise CompileError(f"{layer.name}: weights outside {engine.weight_bits} bits")
    for step in network.steps:
        if isinstance(step, Add) and not all(0 <= v < 1 << MULTIPLIER_BITS
                                             for v in (step.ma, step.mb)):
            raise CompileError(f"{step.name}: multipliers {step.ma} and {step.mb} outside "
                               f"the engine's {MULTIPLIER_BITS} unsigned bits")


def _last_uses(network):
    """The index of the last step that reads each tensor (a flatten's reads count for
    the tensor it reshapes); the output is read after every step."""
    storage = {}
    last = {}
    for k, step in enumerate(network.steps):
        reads = [step.source] + ([step.other] if isinstance(step, Add) else [])
        for name in reads:
            root = storage.get(name, name)
            last[root] = k
        if isinstance(step, Flatten):
            storage[step.output] = storage.get(step.source, step.source)
    last[storage.get(network.output, network.output)] = len(network.steps)
    return storage, last


def _in_bounds(shape, kernel, stride, padding):
    """Per im2col column and output position, whether the value lies inside the map
    (padding is not read); a dense layer (``kernel == 0``) reads every input once."""
    if not kernel:
        return np.ones((int(np.prod(shape)), 1), np.int64)
    return im2col(np.ones((1, *shape), np.int64), kernel, stride, padding)


def _layer(step, src, dst, offset, engine, external):
    """The ``LayerStep``, its block of the weight image and its cost."""
    tiles = make_tiles(step.packed, engine.rows, engine.cols, engine.alpha)
    entries = gather_entries(step.packed.columns, src.shape, step.kernel, engine.rows)
    block = layer_block(tiles, step.bias, entries, engine)
    col_blocks = 1 + max(t.col_block for t in tiles)
    row_blocks = len(tiles) // col_blocks
    inside = _in_bounds(src.map_shape if step.kernel else src.shape, step.kernel,
                        step.stride, step.padding)
    positions = inside.shape[1]
    if col_blocks > 1 and positions > engine.psum_words:
        raise CompileError(f"{step.name}: its partial sums ({positions} positions, a word "
                           f"each) do not fit the partial-sum buffer of {engine.psum_words} "
                           f"words")
    timing = mac_timing(engine.mac, data_bits=engine.out_bits, weight_bits=engine.weight_bits,
                        cols=engine.cols, acc_bits=engine.acc_bits)
    timing["beat_cycles"] = max(timing["beat_cycles"], -(-engine.alpha // GATHER_PORTS))
    weight_cycles = -(-2 * engine.cols // EXTERNAL_PORT_BYTES) if external else 1
    report = cycle_model([positions] * len(tiles), rows=engine.rows, cols=engine.cols,
                         out_stage=True, weight_cycles=weight_cycles,
                         used_cells=[t.used_cells for t in tiles], **timing)
    padded = np.concatenate([inside, np.zeros((1, positions), np.int64)])
    act_reads = sum(int(padded[t.channels].sum()) for t in tiles)
    layer = LayerStep(name=step.name, src=src, dst=dst, filters=step.packed.rows,
                      row_blocks=row_blocks, col_blocks=col_blocks, positions=positions,
                      weights=offset, shift=step.shift, kernel=step.kernel,
                      stride=step.stride, padding=step.padding)
    written = row_blocks * positions
    cost = StepCost(step.name, "layer", report.cycles + STEP_CYCLES, act_reads,
                    written if dst.memory == "act" else 0,
                    written if dst.memory == "acc" else 0,
                    2 * positions * row_blocks * (col_blocks - 1), len(block))
    return layer, block, cost


def compile_network(network, engine):
    """Compile ``network`` for ``engine`` (an ``EngineConfig``); return a
    ``CompiledNetwork``.

    Raises
    ------
    CompileError
        If the engine's parameters do not match the network, or a tensor or a layer's
        partial sums do not fit their buffer.
    """
    try:
        engine.check()
    except ProgramError as error:
        raise CompileError(str(error)) from None
    _check_network(network, engine)
    q = np.zeros((1, *network.input_shape), dtype=np.int64)
    shapes = {name: value.shape[1:] for name, value in network.run(q, keep=True).items()}
    storage, last = _last_uses(network)
    R = engine.rows
    act = _Allocator("activation", engine.act_words, R)
    acc = _Allocator("accumulator", engine.acc_words, R)
    regions = {network.input: act.place(network.input, shapes[network.input],
                                        last.get(network.input, -1), "the input")}
    image_bytes = 0
    for layer in network.array_layers:
        tiles = make_tiles(layer.packed, engine.rows, engine.cols, engine.alpha)
        row_blocks = 1 + max(t.row_block for t in tiles)
        image_bytes += row_blocks * bias_bytes(engine) + len(tiles) * tile_bytes(engine)
    external = image_bytes > engine.weight_bytes
    steps, blocks, costs = [], [], []
    offset = 0
    for k, step in enumerate(network.steps):
        if isinstance(step, Flatten):
            regions[step.output] = regions[step.source]
            continue
        for allocator in (act, acc):
            allocator.free_after(k - 1)
        raw = isinstance(step, ArrayLayer) and step.shift is None
        target = acc if raw else act
        # The output goes to the end of the buffer away from the step's input (two banks
        # in effect, and fewer holes than first fit).
        source = regions[step.source]
        name = storage.get(step.output, step.output)
        reused = [other for other in ((step.other, step.source) if isinstance(step, Add)
                                      else ()) if last[storage.get(other, other)] == k
                  and regions[other].memory == "act"]
        if reused:
            # An add reads each element of its inputs before it writes that element, so
            # it writes over an input that nothing reads after it.
            dst = regions[reused[0]]
            act.held[name] = (dst.addr, dst.addr + dst.words(R), last.get(step.output, k))
        else:
            middle = source.addr + source.words(R) / 2
            dst = target.place(name, shapes[step.output], last.get(step.output, k),
                               f"{step.name}: its output", high=middle < target.size / 2)
        regions[step.output] = dst
        if isinstance(step, ArrayLayer):
            layer, block, cost = _layer(step, regions[step.source], dst, offset, engine,
                                        external)
            steps.append(layer)
            blocks.append(block)
            offset += len(block)
            costs.append(cost)
        elif isinstance(step, Pool):
            src = regions[step.source]
            steps.append(PoolStep(step.name, src, dst, step.kind, step.kernel, step.stride,
                                  step.padding, step.count_pad))
            # A window position a cycle (every lane at once), padding not read.
            c, h, w = src.map_shape
            inside = (_in_bounds((1, h, w), step.kernel, step.stride, step.padding).sum()
                      if step.kernel else h * w)
            window = step.kernel ** 2 if step.kernel else h * w
            finish = 2 if step.kind == "max" else engine.out_bits + 3
            cycles = 1 + dst.words(R) * (window + finish)
            costs.append(StepCost(step.name, "pool", cycles + STEP_CYCLES,
                                  -(-c // R) * int(inside), dst.words(R), 0, 0, 0))
        else:
            a, b = regions[step.source], regions[step.other]
            steps.append(AddStep(step.name, a, b, dst, step.ma, step.mb))
            costs.append(StepCost(step.name, "add", dst.words(R) + 2 + STEP_CYCLES,
                                  2 * dst.words(R), dst.words(R), 0, 0, 0))
    image = b"".join(blocks)
    program = Program(engine, tuple(steps), regions[network.input], regions[network.output],
                      len(image))
    return CompiledNetwork(program, image, tuple(costs), external)
