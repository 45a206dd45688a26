"""The network compiler: an integer network (``codnn.golden.network``) to the network engine's
program and weight image (``codnn.golden.network_program``), with the engine's cycle model and
the bytes each memory moves per image (docs/networks.md, "The network engine").

Allocation: every tensor gets a region of the activation buffer (the accumulators of a
layer without output stage, the logits or a residual branch that an add reads: of the
accumulator buffer) from the step that writes it to the last step that reads it, at the
end of the buffer away from the step's input; a flatten is the same region, read by the
next layer's gather table; a residual add writes over an input that nothing reads after
it. On an engine with external activation memory
(``spill_words``), a tensor that does not fit waits there instead: when a step's output or
an input it reads back finds no room, the held tensors that the step does not read go
out, the one read again last first (a store step the first time; a tensor is never
changed once written, so a copy out stays good), and come back by a load step before the
step that reads them next. A network that does not fit its engine is refused with one line
naming the step and the buffer.

Packing: each layer keeps its column groups, or takes narrower ones (no conflict pruned,
every weight kept) where that runs in fewer cycles on the engine: a layer of many
positions with wide groups is bound by the gather's reads (a round of two per cycle),
a layer of few positions by its tiles (unless the narrower weight image would not fit).

Fused pooling: a convolution with an output stage whose result only a 2 x 2, stride 2 max
pooling reads becomes one layer step with ``pool`` (``fuse_pools``): the result writer
pools as it writes, so the pooling step, its reads and the unpooled map's words are gone.
Fused adds: every residual add of a layer's accumulators (a layer without an output
stage that only this add reads) becomes that layer with the add, in the add's place
(``fuse_adds``; a projection block's, both operands accumulators, goes into the later
layer): the result writer adds as it writes, so the add step and the accumulators'
words are gone. The engine runs no other add of accumulators, so a network whose
accumulators another step reads too is refused.

Cycles are the engine's (``codnn.golden.network_program.step_cycles``, which
``codnn.hw.network.NetworkEngine`` equals): its sequencer reads a step's descriptor, then a
layer's row blocks and tiles one after another (a bias, a gather table and the cells
into the array, then the positions through the gather and the array until the last
result), or runs pooling and the add on the post-processing unit.
"""

import dataclasses
from dataclasses import dataclass

import numpy as np

from codnn.golden.column_combining import im2col, pack, padding_sides
from codnn.golden.network import Add, ArrayLayer, Concat, Flatten, Pool
from codnn.golden.network_program import (HEADER_CYCLES, MAX_KERNEL, MULTIPLIER_BITS,
                                          POOL_LINE_WORDS, AddStep, LayerStep, LoadStep,
                                          PoolStep, Program, ProgramError, Region, StoreStep,
                                          act_stride, bias_bytes, image_word, layer_block,
                                          max_shift, step_cycles, tile_bytes, words)
from codnn.model.gather_plan import plan_layer

__all__ = ["BUFFERS", "BufferAllocator", "CompileError", "Moves", "StepCost", "step_costs",
           "CompiledNetwork",
           "check_network", "choose_packings", "compile_network", "fit_buffers", "fuse_adds",
           "fuse_pools", "fuse_steps",
           "largest_buffers", "last_uses", "layer_step", "leaves_accumulators",
           "network_shapes", "post_steps",
           "step_reads"]

#: The engine's on-chip buffers that ``fit_buffers`` sizes (``EngineConfig`` fields).
BUFFERS = ("act_words", "acc_words", "psum_words", "weight_bytes")
_BUFFER_TEXT = {"act_words": "an activation buffer of {} words",
                "acc_words": "an accumulator buffer of {} words",
                "psum_words": "a partial-sum buffer of {} words",
                "weight_bytes": "a weight memory of {} bytes"}
#: The most words a buffer or memory of the engine holds: its gather offsets and the
#: board top's addresses are 16 bits.
_MAX_WORDS = 1 << 16


class CompileError(ValueError):
    """A network the engine cannot run: one line naming the step and the buffer."""


@dataclass(frozen=True)
class Moves:
    """What a step moves per run: words of the activation buffer read (gathers, window
    reads) and written, accumulator words written and read, partial-sum words written
    and read, weight image bytes read, and words of external activation memory read
    (loads) and written (stores)."""

    act_reads: int = 0
    act_writes: int = 0
    acc_writes: int = 0
    acc_reads: int = 0
    psum_words: int = 0
    weight_bytes: int = 0
    external_reads: int = 0
    external_writes: int = 0

    def for_images(self, n):
        """A layer's moves over ``n`` images: its buffer words ``n`` times, its weight
        bytes once."""
        return dataclasses.replace(self, **{
            name: n * getattr(self, name) for name in
            ("act_reads", "act_writes", "acc_writes", "acc_reads", "psum_words")})


@dataclass(frozen=True)
class StepCost(Moves):
    """One step's cycles (its descriptor's included) and what it moves per run
    (``Moves``)."""

    name: str = ""
    op: str = ""
    cycles: int = 0


def step_costs(program, moved):
    """The ``StepCost`` of each of ``program``'s steps, from its cycles and ``moved`` (a
    ``Moves`` per step)."""
    return tuple(StepCost(name=step.name, op=step.op, cycles=cycles,
                          **dataclasses.asdict(moves))
                 for step, cycles, moves in zip(program.steps, step_cycles(program), moved,
                                                strict=True))


@dataclass(frozen=True)
class CompiledNetwork:
    """A program, its weight image and its steps' costs; ``peak_words``: the most words
    the activation and accumulator buffers' tensors held at once (``act_words``,
    ``acc_words``), where the compiler tracked them."""

    program: Program
    image: bytes
    costs: tuple
    peak_words: dict = None

    @property
    def cycles(self):
        """Cycles per run (of the program's ``images``): the header and every step."""
        return HEADER_CYCLES + sum(c.cycles for c in self.costs)

    def external_cycles(self, memory_latency, act_latency=0, write_latency=0):
        """Cycles per run with the weight image in external memory of
        ``memory_latency``, and loads and stores of activations of ``act_latency`` and
        ``write_latency`` (``codnn.golden.network_program.step_cycles``)."""
        return HEADER_CYCLES + sum(step_cycles(self.program, memory_latency, act_latency,
                                               write_latency))

    def traffic(self):
        """Bytes per run (of the program's ``images``) each memory moves: ``activations``
        (words of ``rows``
        activations), ``accumulators`` and ``partial_sums`` (words of ``rows``
        accumulators), ``weights``, and the external activation memory's bus bytes read
        and written (``spill_read``, ``spill_written``; ``act_stride`` bytes a word)."""
        engine = self.program.engine
        stride = act_stride(engine)
        act_word = engine.rows * engine.out_bits // 8
        acc_word = engine.rows * engine.acc_bits // 8
        return {"activations": sum(c.act_reads + c.act_writes for c in self.costs) * act_word,
                "accumulators": sum(c.acc_writes + c.acc_reads for c in self.costs) * acc_word,
                "partial_sums": sum(c.psum_words for c in self.costs) * acc_word,
                "weights": sum(c.weight_bytes for c in self.costs),
                "spill_read": sum(c.external_reads for c in self.costs) * stride,
                "spill_written": sum(c.external_writes for c in self.costs) * stride}


class BufferAllocator:
    """Regions of one buffer, each held until its last reader has run."""

    def __init__(self, memory, size, lanes):
        self.memory, self.size, self.lanes = memory, size, lanes
        self.held = {}                                  # tensor -> (addr, end, last use)
        self.peak = 0                                   # the most words held at once

    def free_after(self, index):
        self.held = {t: r for t, r in self.held.items() if r[2] > index}

    def reserve(self, tensor, addr, need, last):
        """Hold words ``addr .. addr + need - 1`` for ``tensor`` until step ``last``."""
        self.held[tensor] = (addr, addr + need, last)

    def fits(self, shape):
        """True when a region of ``shape`` finds room."""
        return bool(self._gaps(words(shape, self.lanes)))

    def _gaps(self, need):
        edges = [0] + [a for r in sorted(self.held.values()) for a in r[:2]] + [self.size]
        return [(edges[k], edges[k + 1]) for k in range(0, len(edges), 2)
                if edges[k + 1] - edges[k] >= need]

    def place(self, tensor, shape, last, what, high=False):
        """A region for ``tensor`` (``what`` it is, for the error): the lowest free one, or
        with ``high`` the highest."""
        need = words(shape, self.lanes)
        gaps = self._gaps(need)
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
        self.peak = max(self.peak, sum(end - start for start, end, _ in self.held.values()))
        return Region("act" if self.memory == "activation" else "acc", addr, tuple(shape))


def check_network(network, engine):
    """Raise ``CompileError`` for a network the engine cannot run: other widths, a kernel
    past the gather's, term-quantized layers, a packing wider than the array, weights or
    multipliers outside the engine's bits."""
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
        if layer.multiplier is not None and layer.shift is not None \
                and engine.requant != "multiplier":
            raise CompileError(f"{layer.name}: requantized by a multiplier; the engine's "
                               f"output stage shifts only (an engine with requant "
                               f"'multiplier' runs it)")
        if layer.shift is not None and (np.min(layer.shift) < 0
                                        or np.max(layer.shift) > max_shift(engine)):
            raise CompileError(f"{layer.name}: a shift outside the output stage's "
                               f"0..{max_shift(engine)}")
    for step in network.steps:
        multipliers = ((step.ma, step.mb) if isinstance(step, Add) else
                       step.multipliers if isinstance(step, Concat) else ())
        if not all(0 <= v < 1 << MULTIPLIER_BITS for v in multipliers):
            raise CompileError(f"{step.name}: multipliers "
                               f"{' and '.join(map(str, multipliers))} outside the engine's "
                               f"{MULTIPLIER_BITS} unsigned bits")


def step_reads(step):
    """The tensors ``step`` reads (a layer with a fused add: its source, then the add's
    other operand)."""
    residual = step.residual if isinstance(step, ArrayLayer) else None
    return [step.source, *([step.other] if isinstance(step, Add) else []),
            *([residual.other] if residual is not None else []),
            *getattr(step, "others", ())]


def leaves_accumulators(step):
    """Whether network step ``step`` writes accumulators: an ``ArrayLayer`` without an
    output stage or a fused add (the logits, or a residual branch an add reads)."""
    return isinstance(step, ArrayLayer) and step.shift is None and step.residual is None


def _readers(network):
    """The steps that read each tensor, by name."""
    readers = {}
    for step in network.steps:
        for name in step_reads(step):
            readers.setdefault(name, []).append(step)
    return readers


def fuse_pools(network):
    """``network`` with each convolution that has an output stage and whose result only a
    max pooling of 2 x 2, stride 2, no padding reads (a pooled map at most
    ``POOL_LINE_WORDS`` wide) made one ``ArrayLayer`` with ``pool`` in the convolution's
    place, the pooling's output its output (semantics section 9: the result writer pools
    as it writes)."""
    readers = _readers(network)
    shapes = None
    fused, dropped = {}, set()
    for step in network.steps:
        after = readers.get(step.output, [])
        if not (isinstance(step, ArrayLayer) and step.kernel and step.shift is not None
                and not step.pool and step.output != network.output and len(after) == 1):
            continue
        pooling = after[0]
        if not (isinstance(pooling, Pool) and pooling.kind == "max" and pooling.kernel == 2
                and pooling.stride == 2
                and padding_sides(pooling.padding) == ((0, 0), (0, 0))):
            continue
        shapes = shapes or network_shapes(network)
        if shapes[pooling.output][-1] > POOL_LINE_WORDS:
            continue
        fused[step.name] = dataclasses.replace(step, output=pooling.output, pool=True)
        dropped.add(pooling.name)
    if not fused:
        return network
    return dataclasses.replace(network, steps=tuple(
        fused.get(step.name, step) for step in network.steps if step.name not in dropped))


def fuse_adds(network):
    """``network`` with each residual add one of whose operands is the accumulators of an
    ``ArrayLayer`` without an output stage (not offset binary) that only this add reads
    made one ``ArrayLayer`` with ``residual``, in the add's place, the add's output its
    output (semantics section 9: the result writer adds as it writes). Where both
    operands are such accumulators (a projection block), the layer made later takes the
    add and reads the other's; the add's operands are swapped where the layer's
    accumulators are its ``other``."""
    readers = _readers(network)
    made = {step.output: k for k, step in enumerate(network.steps)}
    raw = {step.output for step in network.steps if leaves_accumulators(step)}
    fused, dropped = {}, set()
    for add in network.steps:
        if not isinstance(add, Add) or add.source == add.other:
            continue
        candidates = [(add.source, add.other, add.ma, add.mb, add.signed_a, add.signed_b),
                      (add.other, add.source, add.mb, add.ma, add.signed_b, add.signed_a)]
        candidates.sort(key=lambda c: -made.get(c[0], -1))      # the later layer first
        for acc, other, ma, mb, signed_acc, signed_other in candidates:
            if acc not in raw or signed_acc or readers[acc] != [add]:
                continue
            layer = network.steps[made[acc]]
            fused[add.name] = dataclasses.replace(layer, output=add.output, residual=Add(
                add.name, acc, other, add.output, ma, mb, False, signed_other,
                add.signed_out))
            dropped.add(layer.name)
            break
    if not fused:
        return network
    return dataclasses.replace(network, steps=tuple(
        fused.get(step.name, step) for step in network.steps if step.name not in dropped))


def _check_accumulators_read(layer, later):
    """``CompileError`` unless the accumulators of ``layer`` (no output stage) are read by
    a fused add alone (the add's other operand) or by no step (the logits)."""
    for step in later:
        if layer.output not in step_reads(step):
            continue
        if isinstance(step, ArrayLayer) and step.residual is not None \
                and step.residual.other == layer.output and step.source != layer.output:
            continue
        if isinstance(step, Add):
            raise CompileError(f"{layer.name}: its accumulators feed {step.name}, an add "
                               f"that cannot be fused into a layer (the accumulators are "
                               f"read by another step too, added to themselves or taken as "
                               f"offset binary); the engine adds accumulators only as a "
                               f"layer writes them")
        raise CompileError(f"{layer.name}: its output, accumulators (no ReLU or output "
                           f"stage after it), feeds a step other than an add; the "
                           f"engine's layers and pooling read activations")


def fuse_steps(network):
    """``network`` with its poolings and adds fused into the layers before them where the
    engine can (``fuse_pools``, then ``fuse_adds``)."""
    return fuse_adds(fuse_pools(network))


def _concat_steps(step, parts, dst, lanes):
    """A Concat as the engine's adds: each part copied through the add's requantization
    (``b`` the part again, with multiplier 0) into its channels' words of ``dst``; each
    part must start on a whole word (its channel offset a multiple of ``lanes``)."""
    steps, offset = [], 0
    _, h, w = dst.map_shape
    for k, (part, multiplier) in enumerate(zip(parts, step.multipliers)):
        if offset % lanes:
            raise CompileError(f"{step.name}: its part {k} starts at channel {offset}, not "
                               f"on a word of {lanes} lanes; the engine concatenates whole "
                               f"words (parts of a multiple of {lanes} channels)")
        channels = part.map_shape[0]
        target = Region("act", dst.addr + offset // lanes * h * w,
                        (channels, h, w) if len(dst.shape) == 3 else (channels,))
        steps.append(AddStep(f"{step.name}/{k}", part, part, target, multiplier, 0))
        offset += channels
    return steps


def last_uses(network):
    """The index of the last step that reads each tensor (a flatten's reads count for
    the tensor it reshapes); the output is read after every step."""
    storage = {}
    last = {}
    for k, step in enumerate(network.steps):
        reads = step_reads(step)
        for name in reads:
            root = storage.get(name, name)
            last[root] = k
        if isinstance(step, Flatten):
            storage[step.output] = storage.get(step.source, step.source)
    last[storage.get(network.output, network.output)] = len(network.steps)
    return storage, last


class _Spill:
    """The tensors that wait in external activation memory (``spill_words`` words), and
    the load and store steps that move them."""

    def __init__(self, network, storage, engine, act, regions):
        self.size, self.act, self.regions = engine.spill_words, act, regions
        self.storage, self.keep_always = storage, storage.get(network.output, network.output)
        self.uses = {}
        for k, step in enumerate(network.steps):
            for name in step_reads(step):
                self.uses.setdefault(storage.get(name, name), []).append(k)
        self.at = {}                # tensor -> its external word (a copy there is good)
        self.away = set()           # tensors not in the activation buffer now
        self.top = 0

    def make_room(self, shape, k, keep, name, steps, moved):
        """Send held tensors that step ``k`` does not read (``keep``) out until a region of
        ``shape`` fits, the one read again last first; stores go to ``steps``."""
        while self.size and not self.act.fits(shape):
            victims = [t for t in self.act.held if t not in keep and t != self.keep_always]
            if not victims:
                return                          # the caller's placement refuses it
            victim = max(victims, key=lambda t: next(
                (j for j in self.uses.get(t, ()) if j >= k), float("inf")))
            start, end, _ = self.act.held.pop(victim)
            self.away.add(victim)
            if victim in self.at:
                continue
            if self.top + end - start > self.size:
                raise CompileError(f"{name}: {victim} ({end - start} words) does not fit the "
                                   f"external activation memory of {self.size} words "
                                   f"({self.top} already used)")
            self.at[victim] = self.top
            self.top += end - start
            region = Region("act", start, self.regions[victim].shape)
            steps.append(StoreStep(f"{name}/store {victim}", region, self.at[victim]))
            moved.append(Moves(act_reads=end - start, external_writes=end - start))

    def bring_back(self, reads, k, last, name, steps, moved):
        """Load the tensors step ``k`` reads that wait outside."""
        for tensor in reads:
            if tensor not in self.away:
                continue
            shape = self.regions[tensor].shape
            self.make_room(shape, k, set(reads), name, steps, moved)
            region = self.act.place(tensor, shape, last[tensor],
                                    f"{name}: its input {tensor}, back from external memory")
            self.away.discard(tensor)
            for alias, old in list(self.regions.items()):
                if self.storage.get(alias, alias) == tensor:
                    self.regions[alias] = Region("act", region.addr, old.shape)
            n = region.words(self.act.lanes)
            steps.append(LoadStep(f"{name}/load {tensor}", region, self.at[tensor]))
            moved.append(Moves(act_writes=n, external_reads=n))


def _in_bounds(shape, kernel, stride, padding):
    """Per im2col column and output position, whether the value lies inside the map
    (padding is not read); a dense layer (``kernel == 0``) reads every input once."""
    if not kernel:
        return np.ones((int(np.prod(shape)), 1), np.int64)
    return im2col(np.ones((1, *shape), np.int64), kernel, stride, padding)


def layer_step(step, src, dst, offset, engine, other=None):
    """The ``LayerStep`` of array layer ``step`` (its packing) from ``src`` to ``dst``
    with its weights at byte ``offset`` (and, with a fused add, that add's ``other``
    operand at region ``other``), its block of the weight image and what it moves
    (``StepCost``'s word and byte counts)."""
    inside = _in_bounds(src.map_shape if step.kernel else src.shape, step.kernel,
                        step.stride, step.padding)
    positions = inside.shape[1]
    plan = plan_layer(step.packed, src.shape, step.kernel, engine, positions)
    tiles = plan.tiles
    # A layer of fewer filters than rows computes them again in the rows past them.
    again = np.arange(max(engine.rows, len(step.bias))) % len(step.bias)
    shift = None if step.shift is None else np.broadcast_to(step.shift, len(step.bias))[again]
    multiplier = None if step.multiplier is None or step.shift is None else \
        np.broadcast_to(step.multiplier, len(step.bias))[again]
    block = layer_block(tiles, plan.tables, np.asarray(step.bias)[again], shift, engine,
                        multiplier)
    col_blocks = 1 + max(t.col_block for t in tiles)
    row_blocks = len(tiles) // col_blocks
    if col_blocks > 1 and positions > engine.psum_words:
        raise CompileError(f"{step.name}: its partial sums ({positions} positions, a word "
                           f"each) do not fit the partial-sum buffer of {engine.psum_words} "
                           f"words")
    padded = np.concatenate([inside, np.zeros((1, positions), np.int64)])
    act_reads = sum(int(padded[t.channels].sum()) for t in tiles)
    add = step.residual
    fields = {} if add is None else dict(add_b=other, ma=add.ma, mb=add.mb,
                                         signed_b=add.signed_b, signed_out=add.signed_out)
    layer = LayerStep(name=step.name, src=src, dst=dst, filters=step.packed.rows,
                      row_blocks=row_blocks, col_blocks=col_blocks, positions=positions,
                      weights=offset, output_stage=step.shift is not None,
                      kernel=step.kernel, pad=step.pad,
                      stride=step.stride, padding=step.padding,
                      rounds=plan.rounds, pool=step.pool, **fields)
    written = row_blocks * (dst.map_shape[1] * dst.map_shape[2] if step.pool else positions)
    # A fused add reads its operand's words from where they are.
    b_reads = 0 if add is None else written
    from_acc = add is not None and other.memory == "acc"
    moved = Moves(act_reads=act_reads + (0 if from_acc else b_reads),
                  acc_reads=b_reads if from_acc else 0,
                  act_writes=written if dst.memory == "act" else 0,
                  acc_writes=written if dst.memory == "acc" else 0,
                  psum_words=2 * positions * row_blocks * (col_blocks - 1),
                  weight_bytes=len(block))
    return layer, block, moved


def _image_bytes(layers, src_shapes, engine):
    """Bytes of the weight image of ``layers`` (``ArrayLayer``; their sources stored as
    ``src_shapes``, by name) on ``engine``."""
    total = 0
    for layer in layers:
        src = src_shapes[layer.name]
        positions = _in_bounds(src if layer.kernel else (int(np.prod(src)),), layer.kernel,
                               layer.stride, layer.padding).shape[1]
        tiles = plan_layer(layer.packed, src, layer.kernel, engine, positions).tiles
        row_blocks = 1 + max(t.row_block for t in tiles)
        total += row_blocks * bias_bytes(engine) + len(tiles) * tile_bytes(engine)
    return total


def _fastest_packing(step, src_shape, dst_shape, engine):
    """``step`` (an ``ArrayLayer``) packed as it takes the fewest cycles on ``engine``: its
    own groups, or narrower ones (at most 1, 2, 4 ... columns, no conflict pruned) where
    every weight stays. A narrower packing has more tiles but its gather reads each
    position in fewer rounds, which pays in a layer of many positions."""
    weights = step.packed.dense()
    options = [step]
    width = 1
    while width < max(map(len, step.packed.groups), default=1):
        packed = pack(weights, width, 0.0)
        if np.array_equal(packed.dense(), weights):
            options.append(dataclasses.replace(step, packed=packed))
        width *= 2
    if len(options) == 1:
        return step
    src, dst = Region("act", 0, tuple(src_shape)), Region("act", 0, tuple(dst_shape))

    def cycles(option):
        try:
            layer, block, _ = layer_step(option, src, dst, 0, engine, dst)
        except CompileError:                # its partial sums do not fit: not an option
            return float("inf")
        return step_cycles(Program(engine, (layer,), src, dst, len(block)))[0]
    return min(options, key=cycles)


def post_steps(step, sources, dst, lanes):
    """The post-processing steps of network step ``step`` (a ``Pool``, ``Add`` or
    ``Concat``) from ``sources`` (the regions it reads, in ``step_reads`` order) to ``dst``,
    each with what it moves (``StepCost``'s order, from ``act_reads``)."""
    R = lanes
    if isinstance(step, Pool):
        src = sources[0]
        # Every lane of a word at once; padding is not read.
        c, h, w = src.map_shape
        inside = (_in_bounds((1, h, w), step.kernel, step.stride, step.padding).sum()
                  if step.kernel else h * w)
        return [(PoolStep(step.name, src, dst, step.kind, step.kernel, step.stride,
                          step.padding, step.count_pad),
                 Moves(act_reads=-(-c // R) * int(inside), act_writes=dst.words(R)))]
    if isinstance(step, Concat):
        return [(add, Moves(act_reads=2 * add.dst.words(R), act_writes=add.dst.words(R)))
                for add in _concat_steps(step, sources, dst, R)]
    a, b = sources
    return [(AddStep(step.name, a, b, dst, step.ma, step.mb, step.signed_a, step.signed_b,
                     step.signed_out),
             Moves(act_reads=2 * dst.words(R), act_writes=dst.words(R)))]


def network_shapes(network):
    """Each tensor's shape (one image) in ``network``."""
    q = np.zeros((1, *network.input_shape), dtype=np.int64)
    return {name: value.shape[1:] for name, value in network.run(q, keep=True).items()}


def choose_packings(network, engine, shapes):
    """Each array layer's packing, by name (``_fastest_packing``, or the model's where the faster
    ones' weight image would not fit); ``CompileError`` if neither fits."""
    storage, _ = last_uses(network)
    src_shapes = {step.name: shapes[storage.get(step.source, step.source)]
                  for step in network.array_layers}         # a flatten's: the map it reads
    packings = {step.name: _fastest_packing(step, src_shapes[step.name],
                                            shapes[step.output], engine)
                for step in network.array_layers}
    if _image_bytes(packings.values(), src_shapes, engine) > engine.weight_bytes:
        packings = {step.name: step for step in network.array_layers}   # as packed
    image_bytes = _image_bytes(packings.values(), src_shapes, engine)
    if image_bytes > engine.weight_bytes:
        raise CompileError(f"the weight image ({image_bytes} bytes) does not fit the engine's "
                           f"on-chip weight memory of {engine.weight_bytes} bytes (give a "
                           f"larger one, or put the weights in external memory)")
    return packings


def compile_network(network, engine, *, fuse=True):
    """Compile ``network`` for ``engine`` (an ``EngineConfig``); return a
    ``CompiledNetwork``. With ``fuse`` its max poolings of 2 x 2 that follow a
    convolution are fused into it (``fuse_pools``); without, each is a pooling step. Its
    residual adds of a layer's accumulators are always fused into a layer
    (``fuse_adds``: the engine adds accumulators only as a layer writes them).

    Raises
    ------
    CompileError
        If the engine's parameters do not match the network, a layer's accumulators feed
        a step other than one add, or a tensor or a layer's partial sums do not fit
        their buffer.
    """
    try:
        engine.check()
    except ProgramError as error:
        raise CompileError(str(error)) from None
    check_network(network, engine)
    network = fuse_adds(fuse_pools(network) if fuse else network)
    shapes = network_shapes(network)
    storage, last = last_uses(network)
    packings = choose_packings(network, engine, shapes)
    R = engine.rows
    act = BufferAllocator("activation", engine.act_words, R)
    acc = BufferAllocator("accumulator", engine.acc_words, R)
    regions = {network.input: act.place(network.input, shapes[network.input],
                                        last.get(network.input, -1), "the input")}
    steps, blocks, moved = [], [], []
    offset = 0
    entry = regions[network.input]
    spill = _Spill(network, storage, engine, act, regions)
    for k, step in enumerate(network.steps):
        if isinstance(step, Flatten):
            regions[step.output] = regions[step.source]
            continue
        for allocator in (act, acc):
            allocator.free_after(k - 1)
        reads = {storage.get(name, name) for name in step_reads(step)}
        spill.bring_back(sorted(reads), k, last, step.name, steps, moved)
        raw = leaves_accumulators(step)
        if raw:
            _check_accumulators_read(step, network.steps[k + 1:])
        target = acc if raw else act
        # The output goes to the end of the buffer away from the step's input (two banks
        # in effect, and fewer holes than first fit).
        source = regions[step.source]
        name = storage.get(step.output, step.output)
        operands = ((step.other, step.source) if isinstance(step, Add) else
                    (step.residual.other,) if isinstance(step, ArrayLayer)
                    and step.residual is not None else ())
        reused = [other for other in operands if last[storage.get(other, other)] == k
                  and regions[other].memory == "act"]
        if reused:
            # An add reads each element of its inputs before it writes that element, so
            # it writes over an input that nothing reads after it.
            dst = regions[reused[0]]
            act.held[name] = (dst.addr, dst.addr + dst.words(R), last.get(step.output, k))
        else:
            if target is act:
                spill.make_room(shapes[step.output], k, reads, step.name, steps, moved)
            middle = source.addr + source.words(R) / 2
            dst = target.place(name, shapes[step.output], last.get(step.output, k),
                               f"{step.name}: its output", high=middle < target.size / 2)
        regions[step.output] = dst
        if isinstance(step, ArrayLayer):
            other = regions[step.residual.other] if step.residual is not None else None
            layer, block, moves = layer_step(packings[step.name], regions[step.source], dst,
                                             offset, engine, other)
            steps.append(layer)
            blocks.append(block)
            offset += len(block)
            moved.append(moves)
        else:
            for post, moves in post_steps(step, [regions[name] for name in step_reads(step)],
                                          dst, R):
                steps.append(post)
                moved.append(moves)
    image = b"".join(blocks)
    program = Program(engine, tuple(steps), entry, regions[network.output], len(image))
    return CompiledNetwork(program, image, step_costs(program, moved),
                           {"act_words": act.peak, "acc_words": acc.peak})


def largest_buffers(engine):
    """``engine`` with every buffer at the largest the engine (and its board top) can
    have: 65536 activation words, 65535 accumulator and partial-sum words, 65536 weight
    words of ``2 * cols`` bytes."""
    return dataclasses.replace(engine, act_words=_MAX_WORDS, acc_words=_MAX_WORDS - 1,
                               psum_words=_MAX_WORDS - 1,
                               weight_bytes=_MAX_WORDS * image_word(engine))


def _smallest(compile, engine, name, low, same):
    """The smallest size of buffer ``name`` from ``low`` up to ``engine``'s at which
    ``compile`` succeeds and ``same(compiled)`` holds, and that program: sizes from
    ``low`` up by steps that double until one works, then halving back between it and the
    last that did not (placement is nearly, not strictly, monotone in the size)."""
    top = getattr(engine, name)

    def attempt(size):
        try:
            compiled = compile(dataclasses.replace(engine, **{name: size}))
        except CompileError:
            return None
        return compiled if same(compiled) else None
    failed, step, size = low - 1, 1, min(low, top)
    while (found := attempt(size)) is None:
        if size == top:
            raise CompileError(f"no {name} up to {top} compiles")   # the limit itself did
        failed, size, step = size, min(top, size + step), step * 2
    while size - failed > 1:
        middle = (failed + size) // 2
        smaller = attempt(middle)
        if smaller is None:
            failed = middle
        else:
            size, found = middle, smaller
    return size, found


def fit_buffers(compile, limits, *, sized=BUFFERS):
    """Compile with ``compile(engine)`` on the smallest buffers, each up to its size in
    ``limits`` (an ``EngineConfig``), at which the program runs in as many cycles and
    steps as on the limits themselves (no more loads and stores, the same packings);
    the buffers not in ``sized`` stay as ``limits`` gives them. Returns the
    ``CompiledNetwork`` (or what ``compile`` returns: an object with ``.compiled``
    also works) and its engine.

    The weight memory is the weight image's size, the partial-sum buffer the most
    positions a layer of several column blocks keeps; the activation and accumulator
    buffers are searched upwards from the most words their tensors hold at once.

    Raises
    ------
    CompileError
        When the network does not compile within ``limits``; if it would with larger
        buffers, the message ends with the sizes it needs.
    """
    def program(result):
        return getattr(result, "compiled", result)

    try:
        result = compile(limits)
    except CompileError as error:
        larger = largest_buffers(limits)
        larger = dataclasses.replace(larger, **{n: getattr(limits, n) for n in BUFFERS
                                                if n not in sized})
        if larger == limits:
            raise
        try:
            _, needed = fit_buffers(compile, larger, sized=sized)
        except CompileError:
            raise error from None
        over = [_BUFFER_TEXT[n].format(getattr(needed, n)) for n in BUFFERS
                if getattr(needed, n) > getattr(limits, n)]
        raise CompileError(f"{error}; it needs {' and '.join(over)}") from None
    goal = program(result)
    target = (goal.cycles, len(goal.program.steps))

    def same(candidate):
        c = program(candidate)
        return (c.cycles, len(c.program.steps)) == target
    engine = limits
    exact = {"weight_bytes": max(image_word(limits), len(goal.image)),
             "psum_words": max([s.positions * s.images for s in goal.program.steps
                                if isinstance(s, LayerStep) and s.col_blocks > 1],
                               default=1)}
    for name in BUFFERS:
        if name not in sized:
            continue
        low = exact.get(name, 1)
        if name in ("act_words", "acc_words"):
            low = max(1, goal.peak_words.get(name, 1) if goal.peak_words else 1)
        low = min(low, getattr(engine, name))
        size, result = _smallest(compile, engine, name, low, same)
        engine = dataclasses.replace(engine, **{name: size})
    return result, engine
