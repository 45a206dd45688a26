"""The network engine's program, its weight image and its reference interpreter
(docs/semantics.md section 9): a whole integer network (``golden.network``) run from a
program and a weight image alone, in the order and with the memory layout of the engine.

Memories. The activation buffer ``act`` holds bytes: a tensor of unsigned ``out_bits``-bit
values (at most 8) lies at a byte address, ``C x H x W`` in channel-major order (value
``(c, y, x)`` at ``addr + (c * H + y) * W + x``; a vector of ``F`` values at ``addr + f``),
so flattening a map moves nothing. The accumulator buffer ``acc`` holds ``acc_bits``-bit
two's complement words: a layer without an output stage (the logits) writes there. The
weight image holds, per array layer at its ``weights`` offset, the bias (``filters``
little-endian int32), then every tile, row blocks outer and column blocks inner: its
gather table (``cols x alpha`` little-endian u16, the input column, ``(c, ky, kx)`` of the
layer's im2col, that each stream of each array column carries; ``0xFFFF`` for none), then
its cells (``rows x cols`` pairs of bytes: the weight, two's complement, and the stream
select).

Steps, in program order:

- ``LayerStep``: the array runs the layer's tiles; tile ``(i, j)`` takes, for every output
  position, the input values its gather table names (0 for none and for padding) and the
  partial sums of tile ``(i, j - 1)`` (the bias for ``j = 0``), as ``golden.systolic``
  defines; the last column block's sums go through the output stage (``shift``) into
  ``act``, or stay accumulators in ``acc``.
- ``PoolStep``: max or average pooling (``golden.network.pool``, integer).
- ``AddStep``: the residual add with its requantization (``golden.network.Add``).

Throughput: NumPy, vectorized over each layer's positions; LeNet-5 runs hundreds of images
per second.
"""

from dataclasses import asdict, dataclass, field

import numpy as np

from .network import FRACTION, conv_columns, pool
from .systolic import Tile, output_stage, run_tile, select_bits

__all__ = ["NO_CHANNEL", "EngineConfig", "Region", "LayerStep", "PoolStep", "AddStep",
           "Program", "ProgramError", "tile_bytes", "layer_block", "read_tile",
           "run_program"]

#: A gather table entry for a stream that carries no input column.
NO_CHANNEL = 0xFFFF


class ProgramError(ValueError):
    """A program or weight image that does not match its engine, or an input of the wrong
    shape."""


@dataclass(frozen=True)
class EngineConfig:
    """A network engine: its array and the sizes of its buffers.

    ``act_bytes``: the activation buffer; ``acc_words``: the accumulator buffer (logits);
    ``psum_words``: the partial sums a layer of several column blocks keeps between
    them (``rows`` per output position); ``weight_bytes``: on-chip weight memory (a larger
    weight image is read through the external memory port)."""

    rows: int
    cols: int
    alpha: int
    mac: str = "parallel"
    weight_bits: int = 8
    out_bits: int = 8
    acc_bits: int = 32
    act_bytes: int = 32768
    acc_words: int = 256
    psum_words: int = 16384
    weight_bytes: int = 65536

    def check(self):
        """Raise ``ProgramError`` for a configuration the engine cannot be."""
        for name in ("rows", "cols", "alpha", "act_bytes", "acc_words", "psum_words"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ProgramError(f"engine {name} must be a positive integer, not {value!r}")
        if not 2 <= self.weight_bits <= 8 or not 1 <= self.out_bits <= 8:
            raise ProgramError(f"the engine holds weights of 2..8 bits and activations of "
                               f"1..8 bits, not {self.weight_bits} and {self.out_bits}")
        if select_bits(self.alpha) > 8:
            raise ProgramError(f"alpha {self.alpha} needs selects wider than a byte")


@dataclass(frozen=True)
class Region:
    """A tensor in a buffer: ``memory`` ``"act"`` (bytes) or ``"acc"`` (words), its first
    address and its shape (``(C, H, W)`` or ``(F,)``)."""

    memory: str
    addr: int
    shape: tuple

    @property
    def size(self):
        return int(np.prod(self.shape))

    @property
    def end(self):
        return self.addr + self.size


@dataclass(frozen=True)
class LayerStep:
    """An array layer: a convolution (``kernel >= 1``) or dense layer (``kernel == 0``) from
    ``src`` to ``dst``, its tiles in the weight image at ``weights``."""

    name: str
    src: Region
    dst: Region
    filters: int
    columns: int
    row_blocks: int
    col_blocks: int
    weights: int
    shift: int | None
    kernel: int = 0
    stride: int = 1
    padding: int = 0
    op: str = field(default="layer", init=False)


@dataclass(frozen=True)
class PoolStep:
    """Max or average pooling (``kernel == 0``: global average) from ``src`` to ``dst``."""

    name: str
    src: Region
    dst: Region
    kind: str
    kernel: int
    stride: int = 1
    padding: int = 0
    count_pad: bool = False
    op: str = field(default="pool", init=False)


@dataclass(frozen=True)
class AddStep:
    """``dst = clamp((a * ma + b * mb + 2**(FRACTION-1)) >> FRACTION, 0, 2**out_bits - 1)``."""

    name: str
    a: Region
    b: Region
    dst: Region
    ma: int
    mb: int
    op: str = field(default="add", init=False)


_STEPS = {"layer": LayerStep, "pool": PoolStep, "add": AddStep}


@dataclass(frozen=True)
class Program:
    """What the engine runs for one image: ``steps`` from the image at ``input`` to the
    result at ``output``; ``weight_image_bytes`` the size of the weight image it reads."""

    engine: EngineConfig
    steps: tuple
    input: Region
    output: Region
    weight_image_bytes: int

    def to_dict(self):
        """A JSON-ready dict (``from_dict`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d):
        """The program of ``to_dict``'s dict; ``ProgramError`` if it is not one."""
        try:
            def region(r):
                return Region(r["memory"], int(r["addr"]), tuple(int(n) for n in r["shape"]))
            steps = []
            for s in d["steps"]:
                kind = _STEPS[s["op"]]
                fields = {k: (region(v) if isinstance(v, dict) else v)
                          for k, v in s.items() if k != "op"}
                steps.append(kind(**fields))
            return cls(EngineConfig(**d["engine"]), tuple(steps), region(d["input"]),
                       region(d["output"]), int(d["weight_image_bytes"]))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ProgramError(f"not a network engine program: {error!r}") from None


def tile_bytes(engine):
    """Bytes of one tile in the weight image: its gather table and its cells."""
    return 2 * engine.cols * engine.alpha + 2 * engine.rows * engine.cols


def layer_block(tiles, bias, engine):
    """A layer's block of the weight image: ``bias`` then ``tiles``
    (``golden.systolic.make_tiles``, in order)."""
    parts = [np.asarray(bias, dtype="<i4").tobytes()]
    mask = (1 << engine.weight_bits) - 1
    for tile in tiles:
        gather = np.where(tile.channels >= 0, tile.channels, NO_CHANNEL)
        cells = np.stack([tile.weights & mask, tile.selects], axis=-1)
        parts += [gather.astype("<u2").tobytes(), cells.astype(np.uint8).tobytes()]
    return b"".join(parts)


def read_tile(image, offset, engine):
    """The ``Tile`` (its block indices 0) whose bytes start at ``offset`` of ``image``."""
    R, W, A = engine.rows, engine.cols, engine.alpha
    gather = np.frombuffer(image, "<u2", W * A, offset).reshape(W, A).astype(np.int64)
    cells = np.frombuffer(image, np.uint8, 2 * R * W, offset + 2 * W * A).reshape(R, W, 2)
    weights = cells[..., 0].astype(np.int64)
    top = 1 << (engine.weight_bits - 1)
    weights = np.where(weights >= top, weights - 2 * top, weights)
    channels = np.where(gather == NO_CHANNEL, -1, gather)
    return Tile(0, 0, weights, cells[..., 1].astype(np.int64), channels)


def _read(memories, region):
    return memories[region.memory][region.addr:region.end].astype(np.int64).reshape(
        region.shape)


def _write(memories, region, values):
    memories[region.memory][region.addr:region.end] = np.asarray(values).reshape(-1)


def _run_layer(step, image, memories, engine):
    x = _read(memories, step.src)
    if step.kernel:
        X, _ = conv_columns(x[None], step.kernel, step.stride, step.padding)
    else:
        X = x.reshape(-1, 1)
    if X.shape[0] != step.columns:
        raise ProgramError(f"{step.name}: its input gives {X.shape[0]} columns, its tiles "
                           f"take {step.columns}")
    R = engine.rows
    bias = np.frombuffer(image, "<i4", step.filters, step.weights).astype(np.int64)
    bias = np.concatenate([bias, np.zeros(-step.filters % R, np.int64)])
    X = np.concatenate([X, np.zeros((1, X.shape[1]), np.int64)])   # column -1: zeros
    at = step.weights + 4 * step.filters
    sums = []
    for i in range(step.row_blocks):
        psum = np.broadcast_to(bias[i * R:(i + 1) * R], (X.shape[1], R))
        for _ in range(step.col_blocks):
            tile = read_tile(image, at, engine)
            at += tile_bytes(engine)
            beats = np.moveaxis(X[tile.channels], 2, 0)             # T x cols x alpha
            psum = run_tile(tile, beats, psum, engine.acc_bits)
        sums.append(psum.T)
    acc = np.concatenate(sums)[:step.filters]                       # N x T
    y = acc if step.shift is None else output_stage(acc, step.shift, engine.out_bits)
    _write(memories, step.dst, y)


def run_program(program, image, x):
    """Run one image ``x`` (integers of the input's shape) through ``program`` with weight
    image ``image`` (bytes); return the output region's values.

    Raises
    ------
    ProgramError
        If ``image`` is not ``program.weight_image_bytes`` long, ``x`` has the wrong shape
        or values outside ``0..2**out_bits - 1``, or a step does not match its tiles.
    """
    engine = program.engine
    if len(image) != program.weight_image_bytes:
        raise ProgramError(f"the weight image has {len(image)} bytes, the program reads "
                           f"{program.weight_image_bytes}")
    x = np.asarray(x)
    if x.shape != program.input.shape:
        raise ProgramError(f"the image has shape {x.shape}, the program takes "
                           f"{program.input.shape}")
    if x.size and (x.min() < 0 or x.max() >= 1 << engine.out_bits):
        raise ProgramError(f"image values must lie in 0..{(1 << engine.out_bits) - 1}")
    memories = {"act": np.zeros(engine.act_bytes, np.int64),
                "acc": np.zeros(engine.acc_words, np.int64)}
    _write(memories, program.input, x)
    top = (1 << engine.out_bits) - 1
    for step in program.steps:
        if isinstance(step, LayerStep):
            _run_layer(step, image, memories, engine)
        elif isinstance(step, PoolStep):
            y = pool(_read(memories, step.src)[None], step.kind, step.kernel, step.stride,
                     step.padding, step.count_pad, integer=True)
            _write(memories, step.dst, y)
        else:
            total = (_read(memories, step.a) * step.ma + _read(memories, step.b) * step.mb
                     + (1 << (FRACTION - 1)))
            _write(memories, step.dst, np.clip(total >> FRACTION, 0, top))
    return _read(memories, program.output)
