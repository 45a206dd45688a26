"""Batch programs for the network engine: a batch of images through a network in
sub-batches, layer by layer or with mini-batch serialization (MBS, Lym et al., MLSys
2019), and the bytes each schedule moves (docs/networks.md, "Batches").

The batch's input waits in the engine's external activation memory (the host writes image
``m`` at ``m`` times the input's words). A schedule splits the network's steps into
*groups* of consecutive steps (``codnn.model.training_traffic.Group``), each run over the
batch in sub-batches of ``sub_batch`` images: a sub-batch's inputs to the group are loaded
(one load step per tensor, its images one after another), each layer of the group runs
the sub-batch through each of its tiles at once (a layer step of several images: the
tile's table and cells are read once per sub-batch), pooling and adds run image by image,
and the tensors that later groups read are stored. A tensor made and read inside a group
stays in the activation buffer. The logits (or whatever the network ends in) stay on chip
for the whole batch, image ``m`` at ``m`` times their words.

- ``"layer"``: every step its own group (a layer without an output stage with the add that
  reads its accumulators, which cannot leave the chip), the largest sub-batch that fits:
  weights are read once per sub-batch, every tensor between layers goes out and back.
- ``"mbs"``: the groups that move the fewest bytes on both memory ports (weight image
  bytes read plus external activation bytes), each with the largest sub-batch that fits,
  chosen by dynamic programming over the step order.

A group fits a sub-batch when its tensors, allocated as ``codnn.model.compile`` allocates
one image's (each from the step that makes it, or its load, to its last reader in the
group, or the group's end when it is stored), fit the buffers for that many images, and
each of its layers' partial sums (``images * positions`` words) the partial-sum buffer.

Cost: a feasibility test allocates the group's tensors; the grouping tests O(steps^2)
groups, each with a binary search over the sub-batch (LeNet-5 in well under a second).
"""

import dataclasses

from codnn.golden.network import ArrayLayer, Flatten
from codnn.golden.network_program import (MAX_PROGRAM_IMAGES, LoadStep, Program,
                                          Region, StoreStep, act_stride, image_region)

from .compile import (BufferAllocator, CompiledNetwork, CompileError, Moves, check_network,
                      choose_packings, fuse_steps, last_uses, layer_step, leaves_accumulators, network_shapes,
                      post_steps, step_costs, step_reads)
from .training_traffic import Group

__all__ = ["SCHEDULES", "BatchPlan", "compile_batch"]

#: Ways to split a network into groups.
SCHEDULES = ("layer", "mbs")


@dataclasses.dataclass(frozen=True)
class BatchPlan:
    """A compiled batch program (``compiled``, ``program.images`` of them a run), its
    ``groups`` (over the network's steps, a flatten not counted) and the step names of
    each group."""

    compiled: CompiledNetwork
    groups: tuple
    names: tuple


def _batch_region(region, n, lanes):
    """A region of ``n`` images one after another, as one region (for a load or store)."""
    c, h, w = region.map_shape
    blocks = -(-c // lanes) * lanes * n
    return Region(region.memory, region.addr,
                  (blocks, h, w) if len(region.shape) == 3 else (blocks,))


class _Network:
    """What the scheduler needs of a network on an engine for a batch of ``images``: its
    steps (no flattens), the tensor each reads and makes (flattens resolved), shapes, each
    layer's step template and weight block."""

    def __init__(self, network, engine, images):
        check_network(network, engine)
        self.engine, self.network, self.images = engine, network, images
        self.shapes = network_shapes(network)
        storage, _ = last_uses(network)
        self.root = lambda name: storage.get(name, name)
        self.steps = [s for s in network.steps if not isinstance(s, Flatten)]
        self.reads = [sorted({self.root(n) for n in step_reads(s)}) for s in self.steps]
        self.makes = [self.root(s.output) for s in self.steps]
        self.output = self.root(network.output)
        self.raw = {self.makes[k] for k, s in enumerate(self.steps) if leaves_accumulators(s)}
        self.readers = {}
        for k, reads in enumerate(self.reads):
            for name in reads:
                self.readers.setdefault(name, []).append(k)
        packings = choose_packings(network, engine, self.shapes)
        self.layers, blocks, offset = {}, [], 0
        for s in network.array_layers:
            src = Region("act", 0, tuple(self.shapes[self.root(s.source)]))
            dst = Region("act", 0, tuple(self.shapes[s.output]))
            layer, block, moves = layer_step(packings[s.name], src, dst, offset, engine,
                                             dst if s.residual is not None else None)
            self.layers[s.name] = (layer, len(block), moves)
            blocks.append(block)
            offset += len(block)
        self.image = b"".join(blocks)

    def words(self, tensor):
        return Region("act", 0, tuple(self.shapes[tensor])).words(self.engine.rows)

    def inputs(self, first, last):
        """The tensors steps ``first..last`` read that an earlier step (or the host) made."""
        made = set(self.makes[first:last + 1])
        return sorted({n for k in range(first, last + 1) for n in self.reads[k]} - made)

    def outputs(self, first, last):
        """The tensors steps ``first..last`` make that a later step reads."""
        return [n for n in self.makes[first:last + 1] if n != self.output
                and any(k > last for k in self.readers.get(n, ()))]


def _allocate(net, first, last, n, output_region):
    """The regions of steps ``first..last``'s tensors for ``n`` images (the first image's,
    each then ``n`` images long); ``None`` when they do not fit."""
    engine, R = net.engine, net.engine.rows
    if {*net.inputs(first, last), *net.outputs(first, last)} & net.raw:
        return None                         # accumulators do not leave the chip
    act = BufferAllocator("activation", engine.act_words, R)
    acc = BufferAllocator("accumulator", engine.acc_words, R)
    keep = act if output_region.memory == "act" else acc
    keep.reserve(net.output, output_region.addr, net.images * net.words(net.output), last + 1)
    stored = set(net.outputs(first, last))
    regions = {}

    def place(allocator, tensor, until, high=False):
        shape = tuple(net.shapes[tensor])
        batch = _batch_region(Region("act", 0, shape), n, R).shape
        region = allocator.place(tensor, batch, until, tensor, high)
        regions[tensor] = Region(region.memory, region.addr, shape)

    try:
        for tensor in net.inputs(first, last):
            place(act, tensor, max(k for k in net.readers[tensor] if k <= last))
        for k in range(first, last + 1):
            for allocator in (act, acc):
                allocator.free_after(k - 1)
            step, made = net.steps[k], net.makes[k]
            if isinstance(step, ArrayLayer):
                layer = net.layers[step.name][0]
                if layer.col_blocks > 1 and n * layer.positions > engine.psum_words:
                    return None
            if made == net.output:
                regions[made] = output_region
                continue
            until = last if made in stored else max(
                (j for j in net.readers.get(made, ()) if j <= last), default=k)
            source = regions[net.reads[k][0]]
            middle = source.addr + n * source.words(R) / 2
            target = acc if made in net.raw else act
            place(target, made, until, high=middle < target.size / 2)
    except CompileError:
        return None
    return regions


def _sub_batch(net, first, last, output_region):
    """The largest sub-batch (up to the batch) that steps ``first..last`` fit; 0 when not
    even one image fits."""
    if _allocate(net, first, last, 1, output_region) is None:
        return 0
    low, high = 1, net.images
    while low < high:
        middle = (low + high + 1) // 2
        if _allocate(net, first, last, middle, output_region) is None:
            high = middle - 1
        else:
            low = middle
    return low


def _group_bytes(net, first, last, sub_batch):
    """Bytes both memory ports move for the batch in group ``first..last``: its layers'
    weight blocks once per sub-batch, its loads and stores once per image."""
    runs = -(-net.images // sub_batch)
    weights = sum(net.layers[net.steps[k].name][1] for k in range(first, last + 1)
                  if isinstance(net.steps[k], ArrayLayer))
    moved = sum(map(net.words, [*net.inputs(first, last), *net.outputs(first, last)]))
    return runs * weights + net.images * moved * act_stride(net.engine)


def _plan(net, schedule, output_region):
    """The groups of ``schedule``."""
    count = len(net.steps)
    fits = {}

    def group(first, last):
        if (first, last) not in fits:
            fits[first, last] = _sub_batch(net, first, last, output_region)
        return fits[first, last]

    if schedule == "layer":
        groups, first = [], 0
        while first < count:
            last = first
            while last < count - 1 and not group(first, last):
                last += 1
            groups.append(Group(first, last, group(first, last)))
            first = last + 1
    else:
        best = [(0, ())] + [None] * count
        for last in range(count):
            for first in range(last + 1):
                if best[first] is None or not group(first, last):
                    continue
                cost = best[first][0] + _group_bytes(net, first, last, group(first, last))
                if best[last + 1] is None or cost < best[last + 1][0]:
                    best[last + 1] = (cost, best[first][1] + (
                        Group(first, last, group(first, last)),))
        groups = list(best[count][1]) if best[count] else []
    if not groups or not all(g.sub_batch for g in groups):
        bad = next((g for g in groups if not g.sub_batch), None)
        where = net.steps[bad.first].name if bad else net.steps[0].name
        raise CompileError(f"{where}: one image of its tensors does not fit the engine's "
                           f"buffers beside the batch's outputs ({net.images} images of "
                           f"{net.words(net.output)} words)")
    return groups


def compile_batch(network, engine, images, schedule="mbs"):
    """Compile ``network`` for ``engine`` (an ``EngineConfig`` with external activation
    memory) as one program over a batch of ``images``, split by ``schedule`` (one of
    ``SCHEDULES``); return a ``BatchPlan``. Its ``compiled.traffic()`` is the bytes the
    run moves, ``compiled.cycles`` its cycles.

    Raises
    ------
    CompileError
        If the engine has no external activation memory, the batch is not 1..256 images,
        the schedule is unknown, or one image of a step's tensors (beside the batch's
        outputs) does not fit.
    """
    if schedule not in SCHEDULES:
        raise CompileError(f"schedule must be one of {', '.join(SCHEDULES)}, not "
                           f"{schedule!r}")
    if isinstance(images, bool) or not isinstance(images, int) \
            or not 1 <= images <= MAX_PROGRAM_IMAGES:
        raise CompileError(f"a batch is 1..{MAX_PROGRAM_IMAGES} images, not {images!r}")
    if not engine.spill_words:
        raise CompileError("a batch program needs an engine with external activation "
                           "memory (its input waits there)")
    net = _Network(fuse_steps(network), engine, images)
    R = engine.rows
    out_words = net.words(net.output)
    if net.output in net.raw:
        output_region = Region("acc", 0, tuple(net.shapes[net.output]))
        room = engine.acc_words
    else:
        room = engine.act_words
        output_region = Region("act", room - images * out_words,
                               tuple(net.shapes[net.output]))
    if images * out_words > room:
        raise CompileError(f"the outputs of {images} images ({images * out_words} words) do "
                           f"not fit the engine's {output_region.memory} buffer of {room} "
                           f"words")
    groups = _plan(net, schedule, output_region)
    # External memory: the batch's input, then each stored tensor's batch.
    external = {net.root(network.input): 0}
    top = images * net.words(net.root(network.input))
    for g in groups:
        for tensor in net.outputs(g.first, g.last):
            external[tensor] = top
            top += images * net.words(tensor)
    if top > engine.spill_words:
        raise CompileError(f"the batch's tensors ({top} words) do not fit the external "
                           f"activation memory of {engine.spill_words} words")
    steps, moved = [], []
    for g in groups:
        regions = _allocate(net, g.first, g.last, g.sub_batch, output_region)
        for start in range(0, images, g.sub_batch):
            n = min(g.sub_batch, images - start)
            head = net.steps[g.first].name
            for tensor in net.inputs(g.first, g.last):
                words = n * net.words(tensor)
                steps.append(LoadStep(f"{head}/load {tensor}",
                                      _batch_region(regions[tensor], n, R),
                                      external[tensor] + start * net.words(tensor)))
                moved.append(Moves(act_writes=words, external_reads=words))
            for k in range(g.first, g.last + 1):
                step = net.steps[k]
                dst = regions[net.makes[k]]
                if net.makes[k] == net.output:
                    dst = image_region(output_region, start, R)
                sources = [regions[net.root(name)] for name in step_reads(step)]
                if isinstance(step, ArrayLayer):
                    layer, block_bytes, moves = net.layers[step.name]
                    fused = {} if layer.add_b is None else {"add_b": sources[1]}
                    steps.append(dataclasses.replace(layer, src=sources[0], dst=dst,
                                                     images=n, **fused))
                    moved.append(dataclasses.replace(moves.for_images(n),
                                                     weight_bytes=block_bytes))
                    continue
                for m in range(n):
                    for post, moves in post_steps(
                            step, [image_region(s, m, R) for s in sources],
                            image_region(dst, m, R), R):
                        steps.append(dataclasses.replace(post, name=f"{post.name}[{start + m}]"))
                        moved.append(moves)
            for tensor in net.outputs(g.first, g.last):
                words = n * net.words(tensor)
                steps.append(StoreStep(f"{net.steps[g.last].name}/store {tensor}",
                                       _batch_region(regions[tensor], n, R),
                                       external[tensor] + start * net.words(tensor)))
                moved.append(Moves(act_reads=words, external_writes=words))
    program = Program(engine, tuple(steps),
                      Region("ext", 0, tuple(net.shapes[net.root(network.input)])),
                      output_region, len(net.image), images)
    costs = step_costs(program, moved)
    names = tuple(tuple(net.steps[k].name for k in range(g.first, g.last + 1))
                  for g in groups)
    return BatchPlan(CompiledNetwork(program, net.image, costs), tuple(groups), names)
