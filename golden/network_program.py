"""The network engine's program, its weight image and its reference interpreter
(docs/semantics.md section 9): a whole integer network (``codnn.golden.network``) run from a
program and a weight image alone, in the order and with the memory layout of the engine.

Memories hold words of ``lanes = rows`` lanes, one per array row, so that one result of
the array (a value of each of its rows) is one word. The activation buffer's lanes are
``out_bits``-bit activations: a tensor of shape ``C x H x W`` at word ``a`` has value
``(c, y, x)`` in lane ``c mod lanes`` of word ``a + ((c // lanes) * H + y) * W + x`` (and,
with fewer channels than lanes, in every lane ``l`` with ``l mod C == c``); a
vector of ``F`` values is the shape ``F x 1 x 1``, and a flatten leaves the map where it is
(the layer that reads it names each value's word and lane). The accumulator buffer's
lanes are ``acc_bits``-bit words, laid out the same (the logits, and the maps of layers
without an output stage that an add reads); the partial-sum buffer holds a word per
output position.

The weight image is words of ``2 * cols`` bytes (an array row of cells), read in order.
It holds, per array layer from its ``weights`` offset (a whole word), for each row block
its bias (``rows`` little-endian int32, zeros past the layer's filters) and the output
stage's shift of each row (``rows`` bytes; zeros past the filters, and for a layer without
an output stage), on an engine that requantizes by a multiplier (``EngineConfig.requant``)
each row's multiplier (``rows`` u16 LE; likewise zeros), padded with zeros to whole
words, then its tiles, column blocks in
order, each its gather table (``alpha x max(cols, rows)`` entries of 4 bytes, stream slot
by slot: entry ``(a, i)`` holds lane bank ``i``'s read in slot ``a``, the word offset from
the output position's window, u16 LE, and ``ky << 4 | kx`` in its fourth byte, and in its
third byte the lane column ``i``'s stream ``a`` carries, ``0xFF`` for none; padded to
whole words), then its cells (``rows x cols`` byte pairs: the weight, two's complement,
and the stream select).

The binary program (``encode_program``) is little-endian u32 words: a header (magic,
version, step count, the engine's parameters, the input and output regions) and a
descriptor of ``STEP_WORDS`` per step, their fields those of
``codnn.golden.program_format``.

Steps, in program order:

- ``LayerStep``: the array runs the layer's tiles; at output position ``(oy, ox)`` lane
  bank ``i`` reads, in stream slot ``a``, lane ``i`` of word ``src + (oy * s - p) * W +
  (ox * s - p) + offset`` when ``0 <= oy * s - p + ky < H`` and ``0 <= ox * s - p + kx <
  W`` (``H``, ``W`` the source's; its entry's ``offset``, ``ky``, ``kx``), else carries
  the layer's ``pad`` code (padding); stream ``a`` of array column ``g`` carries the
  read of the bank its entry names, or 0 (no input; ``gather_values``); tile ``(i, j)``
  adds to
  the partial sums of tile ``(i, j - 1)`` (the bias for ``j = 0``) as ``codnn.golden.systolic``
  defines; the last column block's sums of row block ``i`` go through the output stage
  (each row with its shift, and multiplier, from the image) into word block ``i`` of
  ``dst``, or stay accumulators; with fused pooling they are max-pooled 2 x 2 as they
  are written, with a fused add (``add_b``) the accumulators go through the residual
  add with the operand at ``add_b`` (activations or accumulators) into ``dst``.
- ``PoolStep``: max or average pooling (``codnn.golden.network.pool``, integer), every lane at
  once.
- ``AddStep``: the residual add of two activation operands with its requantization
  (``codnn.golden.network.Add``), every lane at once; an add of a residual branch's
  accumulators (a branch that ends without an output stage) is fused into the layer
  that makes them.
- ``StoreStep`` and ``LoadStep``: words of the activation buffer to the engine's external
  activation memory and back (a tensor that does not fit beside the others waits there),
  word for word; external word ``k`` lies at byte ``base + k * word_stride(rows)``.

A layer step may run several images through each tile (``images``, each image's regions
one after another), and a program several images per start (its input and output
regions likewise; a batch's input may lie in external activation memory).

Throughput: NumPy, vectorized over each layer's positions; LeNet-5 runs hundreds of images
per second.
"""

import dataclasses
from dataclasses import asdict, dataclass, field

import numpy as np

from .column_combining import output_shape, padding_sides, padding_value
from .network import pool, residual_add
from .program_format import (HEADER, HEADER_WORDS, MAGIC, STEP_WORDS, STEPS, VERSION, Op,
                             pack, unpack, unused_bits)
from .systolic import (MAC_KINDS, REQUANT_BITS, REQUANT_KINDS, REQUANT_PRODUCT_STEPS,
                       Tile, latency, mac_timing, output_stage, pipeline_depth, run_tile,
                       select_bits)

__all__ = ["WEIGHT_PORTS", "ACT_PORTS", "NO_LANE", "MAX_KERNEL", "MULTIPLIER_BITS",
           "MAX_GATHER_PORTS", "POOL_LINE_WORDS", "POOL_WRITE_STEPS", "layer_map",
           "MAX_STEP_IMAGES", "MAX_PROGRAM_IMAGES", "image_region", "external_reach",
           "EngineConfig", "Region", "LayerStep", "PoolStep", "AddStep", "LoadStep",
           "StoreStep", "Program", "ProgramError", "words", "gather_entries",
           "gather_values", "image_word", "word_stride", "external_weight_bytes",
           "act_stride", "bursts", "spill_reach", "bias_bytes", "tile_bytes", "layer_block",
           "read_tile", "read_region", "write_region", "check_program", "run_program",
           "encode_program", "decode_program", "gather_rounds", "layer_rounds",
           "GatherTable", "lane_choices", "table_bytes", "table_entries", "table_words",
           "step_cycles", "layer_cycles", "max_shift", "result_write_steps",
           "pool_unit_cycles",
           "weight_words_read", "host_words", "output_values"]

#: Where an engine's weight image is: on-chip memory, or external memory on an AXI4 read
#: port (``codnn.hw.network.weights``).
WEIGHT_PORTS = ("onchip", "axi")
#: Whether an engine has an external activation memory: none, or an AXI4 read and write
#: port (``codnn.hw.network.activations``).
ACT_PORTS = ("none", "axi")
#: A gather table entry's lane for a stream that carries no input.
NO_LANE = 0xFF
#: The largest kernel a gather entry can name (``ky`` and ``kx`` are 4 bits each).
MAX_KERNEL = 15
#: Bits of an add's multipliers ``ma`` and ``mb`` (unsigned).
MULTIPLIER_BITS = 24
#: The most images a layer step runs through its tiles, and a program per start.
MAX_STEP_IMAGES, MAX_PROGRAM_IMAGES = 0xFFFF, 256
#: The most read ports a lane bank of the activation buffer may have.
MAX_GATHER_PORTS = 8


class ProgramError(ValueError):
    """A program or weight image that does not match its engine, or an input of the wrong
    shape."""


@dataclass(frozen=True)
class EngineConfig:
    """A network engine: its array and the sizes of its buffers, in words of ``rows``
    lanes.

    ``act_words``: the activation buffer; ``acc_words``: the accumulator buffer (logits);
    ``psum_words``: the partial sums a layer of several column blocks keeps between them
    (a word per output position); ``weight_bytes``: on-chip weight memory (a larger weight
    image is read through the external memory port); ``spill_words``: the external
    activation memory a program may use (0: the engine has no activation port);
    ``gather_ports``: the read ports of each of the activation buffer's lane banks (the
    gather reads that many stream slots a cycle); ``requant``: the output stage's
    requantization, ``"shift"`` (``clamp(acc >> shift, ...)``) or ``"multiplier"``
    (``clamp((acc * m) >> shift, ...)``, a 16-bit ``m`` per row in the weight image);
    ``weight_ports``: the on-chip weight memory's read ports, 2 (a tile's gather table
    read beside its cells; yosys builds the memory twice for it on ECP5) or 1 (the table
    and then the cells). It sets cycles only: a program runs on either."""

    rows: int
    cols: int
    alpha: int
    mac: str = "parallel"
    weight_bits: int = 8
    out_bits: int = 8
    acc_bits: int = 32
    act_words: int = 2048
    acc_words: int = 16
    psum_words: int = 1024
    weight_bytes: int = 131072
    spill_words: int = 0
    gather_ports: int = 2
    requant: str = "shift"
    weight_ports: int = 2

    def check(self):
        """Raise ``ProgramError`` for a configuration the engine cannot be."""
        for name in ("rows", "cols", "alpha", "act_words", "acc_words", "psum_words",
                     "weight_bytes", "gather_ports"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ProgramError(f"engine {name} must be a positive integer, not {value!r}")
        if not 2 <= self.weight_bits <= 8 or not 1 <= self.out_bits <= 8:
            raise ProgramError(f"the engine holds weights of 2..8 bits and activations of "
                               f"1..8 bits, not {self.weight_bits} and {self.out_bits}")
        if select_bits(self.alpha) > 8 or self.rows >= NO_LANE:
            raise ProgramError(f"an engine has fewer than {NO_LANE} rows and an alpha whose "
                               f"selects fit a byte, not {self.rows} and {self.alpha}")
        if isinstance(self.spill_words, bool) or not isinstance(self.spill_words, int) \
                or self.spill_words < 0:
            raise ProgramError(f"engine spill_words must be a non-negative integer, not "
                               f"{self.spill_words!r}")
        if self.gather_ports > MAX_GATHER_PORTS:
            raise ProgramError(f"an engine's lane banks have 1..{MAX_GATHER_PORTS} read "
                               f"ports, not {self.gather_ports}")
        if isinstance(self.weight_ports, bool) or self.weight_ports not in (1, 2):
            raise ProgramError(f"an engine's on-chip weight memory has 1 or 2 read ports, "
                               f"not {self.weight_ports!r}")
        if self.requant not in REQUANT_KINDS:
            raise ProgramError(f"an engine's output stage requantizes by "
                               f"{' or '.join(REQUANT_KINDS)}, not {self.requant!r}")
        if self.act_words > 1 << 16:
            raise ProgramError(f"the activation buffer holds at most 65536 words (gather "
                               f"offsets are 16 bits), not {self.act_words}")


def words(shape, lanes):
    """Words a tensor of ``shape`` (``(C, H, W)``, or ``(F,)`` as ``F x 1 x 1``) takes."""
    c, h, w = (*shape, 1, 1)[:3] if len(shape) == 1 else shape
    return -(-c // lanes) * h * w


@dataclass(frozen=True)
class Region:
    """A tensor in a buffer: ``memory`` ``"act"`` or ``"acc"`` (or ``"ext"``, the external
    activation memory, for a program's input), its first word and the shape it is stored
    as (``(C, H, W)``, or ``(F,)``)."""

    memory: str
    addr: int
    shape: tuple

    def words(self, lanes):
        return words(self.shape, lanes)

    @property
    def map_shape(self):
        """``(C, H, W)``; a vector is ``F x 1 x 1``."""
        return tuple(self.shape) if len(self.shape) == 3 else (self.shape[0], 1, 1)


@dataclass(frozen=True)
class LayerStep:
    """An array layer: a convolution (``kernel >= 1``) or dense layer (``kernel == 0``) from
    ``src`` to ``dst``, its biases, shifts and tiles in the weight image at ``weights``;
    ``padding`` one integer, ``(before, after)``, or ``(top, left, bottom, right)``
    (``padding_sides``); ``output_stage``: its results go through the output stage (else
    accumulators); ``pad`` the code a padded position carries; ``rounds``: the gather's
    rounds of reads per position, which read stream slots ``0 .. gather_ports * rounds -
    1`` (the others carry 0; ``None``: all of the engine's, ``gather_rounds``);
    ``images``: the images it runs through each tile, image ``m`` of ``src`` and ``dst``
    ``m`` times their words past them; ``pool``: its results (through the output stage)
    max-pooled 2 x 2, stride 2, as they are written, ``dst`` the pooled map (the
    window's map ``H x W`` gives ``H // 2 x W // 2``; ``positions`` stays the window's);
    ``add_b``: its accumulators (no output stage) added, as they are written, to the
    region ``add_b`` of the shape of ``dst`` (activations, or another layer's
    accumulators), the residual add with ``ma``, ``mb``, ``signed_b``, ``signed_out``
    (``AddStep``, the accumulators its ``a``), ``dst`` activations (``None``: no add)."""

    name: str
    src: Region
    dst: Region
    filters: int
    row_blocks: int
    col_blocks: int
    positions: int
    weights: int
    output_stage: bool
    kernel: int = 0
    stride: int = 1
    padding: int | tuple = 0
    pad: int = 0
    rounds: int | None = None
    images: int = 1
    pool: bool = False
    add_b: Region | None = None
    ma: int = 0
    mb: int = 0
    signed_b: bool = False
    signed_out: bool = False
    op: str = field(default="layer", init=False)

    def fused_add(self, image=0, lanes=1):
        """The residual add fused into the layer (``add_b``) as the ``AddStep`` it
        equals for image ``image`` (``lanes``: the engine's rows), or ``None``."""
        if self.add_b is None:
            return None
        dst = image_region(self.dst, image, lanes)
        b = image_region(self.add_b, image, lanes)
        return AddStep(self.name, dst, b, dst, self.ma, self.mb, False, self.signed_b,
                       self.signed_out)


@dataclass(frozen=True)
class PoolStep:
    """Max or average pooling (``kernel == 0``: global average) from ``src`` to ``dst``;
    ``padding`` as a ``LayerStep``'s."""

    name: str
    src: Region
    dst: Region
    kind: str
    kernel: int
    stride: int = 1
    padding: int | tuple = 0
    count_pad: bool = False
    op: str = field(default="pool", init=False)


@dataclass(frozen=True)
class AddStep:
    """``dst = clamp((a * ma + b * mb + 2**(FRACTION-1)) >> FRACTION, 0, 2**out_bits - 1)``,
    signed operands and output in offset binary (``codnn.golden.network.residual_add``)."""

    name: str
    a: Region
    b: Region
    dst: Region
    ma: int
    mb: int
    signed_a: bool = False
    signed_b: bool = False
    signed_out: bool = False
    op: str = field(default="add", init=False)


@dataclass(frozen=True)
class StoreStep:
    """The words of ``src`` (activations) to external activation memory from word
    ``addr``."""

    name: str
    src: Region
    addr: int
    op: str = field(default="store", init=False)


@dataclass(frozen=True)
class LoadStep:
    """Words of external activation memory from word ``addr`` into ``dst``
    (activations)."""

    name: str
    dst: Region
    addr: int
    op: str = field(default="load", init=False)


_STEPS = {"layer": LayerStep, "pool": PoolStep, "add": AddStep, "load": LoadStep,
          "store": StoreStep}


@dataclass(frozen=True)
class Program:
    """What the engine runs for each start: ``steps`` from the image at ``input`` to the
    result at ``output``, or for ``images`` of them, image ``m``'s ``m`` times the
    region's words past it; ``weight_image_bytes`` the size of the weight image it
    reads."""

    engine: EngineConfig
    steps: tuple
    input: Region
    output: Region
    weight_image_bytes: int
    images: int = 1

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
                       region(d["output"]), int(d["weight_image_bytes"]),
                       int(d.get("images", 1)))
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ProgramError(f"not a network engine program: {error!r}") from None


def gather_entries(columns, src_shape, kernel, lanes):
    """The read (word offset, channel, ``ky << 4 | kx``) of each of a layer's ``columns``
    input columns: im2col rows ``(c, ky, kx)`` of a ``kernel x kernel`` convolution, or
    the input index of a dense layer, over a source stored as ``src_shape``; the channel
    lies in the lanes ``lane_choices`` names."""
    c_in, h, w = src_shape if len(src_shape) == 3 else (src_shape[0], 1, 1)
    j = np.arange(columns)
    if kernel:
        c, ky, kx = j // (kernel * kernel), j // kernel % kernel, j % kernel
        offset = (c // lanes) * h * w + ky * w + kx
    else:
        c, y, x = np.unravel_index(j, (c_in, h, w))
        ky = kx = np.zeros_like(j)
        offset = ((c // lanes) * h + y) * w + x
    return np.stack([offset, c, ky << 4 | kx], axis=1)


def lane_choices(channel, channels, lanes):
    """The lanes that hold ``channel`` of a map of ``channels`` channels: lane ``channel %
    lanes`` of its lane block, or, in a map of fewer channels than lanes, every lane
    ``l`` with ``l % channels == channel`` (``write_region``)."""
    if channels >= lanes:
        return [channel % lanes]
    return list(range(channel, lanes, channels))


def image_word(engine):
    """Bytes of a word of the weight memory: an array row of cells (2 bytes each). A
    tile's gather table is ``table_words`` words, its cells ``rows`` words."""
    return 2 * engine.cols


def table_entries(engine):
    """Gather entries per stream slot of a tile's table: ``max(cols, rows)``."""
    return max(engine.cols, engine.rows)


def table_words(engine):
    """Weight words of a tile's gather table: ``alpha * table_entries`` entries of 4
    bytes, padded with zeros to whole words."""
    return -(-4 * engine.alpha * table_entries(engine) // image_word(engine))


def word_stride(word_bytes):
    """Bytes between two weight words in external memory: ``word_bytes`` rounded up to a
    power of two (the AXI data bus is that wide)."""
    return 1 << (word_bytes - 1).bit_length()


def external_weight_bytes(engine):
    """The largest weight image the engine's external memory port reaches: 32-bit byte
    addresses, a word every ``word_stride`` bytes."""
    word = image_word(engine)
    return (1 << 32) // word_stride(word) * word


def act_stride(engine):
    """Bytes between two activation words in external memory: an activation word's
    ``rows * out_bits / 8`` bytes (whole bytes) rounded up to a power of two."""
    return word_stride(-(-engine.rows * engine.out_bits // 8))


def bursts(addr, count, stride, most=256, base=0):
    """The AXI4 bursts (first word, words) that move ``count`` words from word ``addr`` of
    a memory of ``stride``-byte words from byte ``base`` (a multiple of ``stride``): at
    most ``most`` beats, none across a 4 KB page."""
    out = []
    while count:
        in_page = max(1, (4096 - (base + addr * stride) % 4096) // stride)
        n = min(count, most, in_page)
        out.append((addr, n))
        addr, count = addr + n, count - n
    return out


def bias_bytes(engine):
    """Bytes of a row block's bias, shifts and (requantizing by a multiplier) multipliers
    in the weight image: ``rows`` int32, ``rows`` bytes (and ``rows`` u16), padded with
    zeros to whole words."""
    row_bytes = 5 + 2 * (engine.requant == "multiplier")
    return -(-row_bytes * engine.rows // image_word(engine)) * image_word(engine)


def max_shift(engine):
    """The output stage's largest shift: below the accumulator's bits, or below those of
    its product with a multiplier (``REQUANT_BITS`` more)."""
    return engine.acc_bits + REQUANT_BITS * (engine.requant == "multiplier") - 1


def result_write_steps(engine, step=None):
    """Cycles from a result taken by the engine's result writer to its write:
    ``RESULT_WRITE_STEPS``, and the multiplier's product steps
    (``REQUANT_PRODUCT_STEPS``) on an engine that requantizes by one; for a layer step
    with a fused add, ``ADD_WRITE_STEPS``."""
    if step is not None and step.add_b is not None:
        return ADD_WRITE_STEPS
    return RESULT_WRITE_STEPS + REQUANT_PRODUCT_STEPS * (engine.requant == "multiplier")


def tile_bytes(engine):
    """Bytes of one tile in the weight image: its gather table and its cells."""
    return (table_words(engine) + engine.rows) * image_word(engine)


@dataclass(frozen=True)
class GatherTable:
    """A tile's gather table (docs/semantics.md section 9): per stream slot ``a`` and lane
    bank ``i``, the read of bank ``i`` (word ``offset``, window position ``ky``, ``kx``),
    ``alpha x rows`` each; per slot and array column ``g``, the ``lane`` whose read the
    column's stream ``a`` carries (``NO_LANE``: none), ``alpha x cols``."""

    offset: np.ndarray
    ky: np.ndarray
    kx: np.ndarray
    lane: np.ndarray


def layer_block(tiles, tables, bias, shift, engine, multiplier=None):
    """A layer's block of the weight image: per row block its ``bias``, ``shift`` (one,
    one per filter, or None: no output stage) and, on an engine that requantizes by a
    multiplier, ``multiplier`` (likewise; None: 1, or 0 without an output stage) then its
    ``tiles`` (``codnn.golden.systolic.make_tiles``, in order), each with its
    ``GatherTable`` from ``tables``."""
    R = engine.rows
    filters = len(bias)
    if multiplier is not None and engine.requant != "multiplier":
        raise ProgramError("an engine whose output stage only shifts takes no multipliers")
    if multiplier is None:
        multiplier = 0 if shift is None else 1
    shift = np.broadcast_to(np.asarray(0 if shift is None else shift, np.int64), filters)
    multiplier = np.broadcast_to(np.asarray(multiplier, np.int64), filters)
    if np.any((shift < 0) | (shift > max_shift(engine))) \
            or np.any((multiplier < 0) | (multiplier >= 1 << REQUANT_BITS)):
        raise ProgramError(f"the output stage takes shifts 0..{max_shift(engine)} and "
                           f"multipliers 0..{(1 << REQUANT_BITS) - 1}")
    pad = np.zeros(-filters % R, np.int64)
    bias, shift, multiplier = (np.concatenate([np.asarray(v), pad])
                               for v in (bias, shift, multiplier))
    parts = []
    mask = (1 << engine.weight_bits) - 1
    for tile, table in zip(tiles, tables, strict=True):
        if tile.col_block == 0:
            rows = slice(tile.row_block * R, (tile.row_block + 1) * R)
            block = bias[rows].astype("<i4").tobytes() + shift[rows].astype("u1").tobytes()
            if engine.requant == "multiplier":
                block += multiplier[rows].astype("<u2").tobytes()
            parts.append(block + bytes(bias_bytes(engine) - len(block)))
        cells = np.stack([tile.weights & mask, tile.selects], axis=-1)
        parts += [table_bytes(table, engine), cells.astype(np.uint8).tobytes()]
    return b"".join(parts)


def table_bytes(table, engine):
    """A tile's ``GatherTable`` as the weight image holds it: ``table_words`` words, entry
    ``(a, i)`` in bytes ``4 * (a * table_entries + i)`` on (offset, lane, ``ky << 4 |
    kx``), the lane ``NO_LANE`` past the columns."""
    entries = np.zeros((engine.alpha, table_entries(engine)),
                       np.dtype([("offset", "<u2"), ("lane", "u1"), ("kyx", "u1")]))
    entries["lane"] = NO_LANE
    entries["offset"][:, :engine.rows] = table.offset
    entries["kyx"][:, :engine.rows] = table.ky << 4 | table.kx
    entries["lane"][:, :engine.cols] = table.lane
    gather = entries.tobytes()
    return gather + bytes(table_words(engine) * image_word(engine) - len(gather))


def read_tile(image, offset, engine):
    """The tile whose bytes start at ``offset`` of ``image``: ``(tile, table)``, ``tile`` a
    ``codnn.golden.systolic.Tile`` (its ``channels`` the stream's slot, -1 where the
    column's stream has no lane) and ``table`` its ``GatherTable``."""
    R, W, A, T = engine.rows, engine.cols, engine.alpha, table_entries(engine)
    raw = np.frombuffer(image, np.uint8, 4 * A * T, offset).reshape(A, T, 4).astype(np.int64)
    cells = np.frombuffer(image, np.uint8, 2 * R * W,
                          offset + table_words(engine) * image_word(engine)).reshape(R, W, 2)
    weights = cells[..., 0].astype(np.int64)
    top = 1 << (engine.weight_bits - 1)
    weights = np.where(weights >= top, weights - 2 * top, weights)
    lane = raw[:, :W, 2]
    streams = np.where(lane.T == NO_LANE, -1, np.arange(A)[None, :].repeat(W, 0))
    table = GatherTable(raw[:, :R, 0] | raw[:, :R, 1] << 8, raw[:, :R, 3] >> 4,
                        raw[:, :R, 3] & 15, lane)
    return Tile(0, 0, weights, cells[..., 1].astype(np.int64), streams), table


def read_region(words, region, lanes):
    """A region's values as its shape, from ``words`` (a buffer, ``depth x lanes``; a map's
    lanes past ``C`` left out)."""
    c, h, w = region.map_shape
    blocks = -(-c // lanes)
    stored = words[region.addr:region.addr + blocks * h * w]
    values = stored.reshape(blocks, h, w, lanes).transpose(0, 3, 1, 2)
    return values.reshape(blocks * lanes, h, w)[:c].reshape(region.shape)


def write_region(words, region, values, lanes):
    """Store ``values`` (the region's shape) into ``words``: a map of fewer channels
    than lanes holds channel ``l % C`` in every lane ``l``, a larger one 0 in the lanes
    past ``C`` of its last block."""
    c, h, w = region.map_shape
    blocks = -(-c // lanes)
    values = np.asarray(values).reshape(c, h, w)
    padded = np.zeros((blocks * lanes, h, w), np.int64)
    padded[:c] = values
    if c < lanes:
        padded = values[np.arange(lanes) % c]
    words[region.addr:region.addr + blocks * h * w] = \
        padded.reshape(blocks, lanes, h, w).transpose(0, 2, 3, 1).reshape(-1, lanes)


def gather_values(act, src, map_shape, kernel, stride, padding, table, pad=0, slots=None):
    """The values the streams carry at every output position of a layer, ``(T, cols,
    alpha)``: ``act`` the activation buffer (``words x lanes``), ``src`` the source's first
    word, ``map_shape`` its ``(C, H, W)``, ``padding`` as ``padding_sides`` reads it
    (``p`` below: the top's, and the left's for ``ox``), ``table`` a tile's
    ``GatherTable``; ``kernel ==
    0``: a dense layer (one position); ``slots``: the stream slots read (default all),
    the others carry 0. Lane bank ``i`` reads, in slot ``a``, lane ``i`` of word ``src +
    (oy * s - p) * W + (ox * s - p) + offset[a, i]`` when the window position ``(oy * s
    - p + ky[a, i], ox * s - p + kx[a, i])`` lies inside the map, else carries ``pad``;
    column ``g``'s stream ``a`` carries bank ``lane[a, g]``'s value, or 0 for
    ``NO_LANE``. None when a bank's read inside the map falls outside ``act``."""
    _, h, w = map_shape
    h_out, w_out = output_shape(h, w, kernel, stride, padding) if kernel else (1, 1)
    (top, _), (left, _) = padding_sides(padding) if kernel else ((0, 0), (0, 0))
    stride = stride if kernel else 1
    A, W = table.lane.shape
    slots = A if slots is None else slots
    oy, ox = np.meshgrid(np.arange(h_out) * stride - top,
                         np.arange(w_out) * stride - left, indexing="ij")
    oy, ox = oy.reshape(-1, 1, 1), ox.reshape(-1, 1, 1)
    y, x = oy + table.ky[:slots], ox + table.kx[:slots]           # positions x slots x banks
    inside = (y >= 0) & (y < h) & (x >= 0) & (x < w)
    address = src + oy * w + ox + table.offset[:slots]
    if np.any(inside & ((address < 0) | (address >= len(act)))):
        return None
    banks = np.arange(table.offset.shape[1])
    read = np.where(inside, act[np.where(inside, address, 0), banks], pad)
    lane = table.lane[:slots]                                       # slots x cols
    carried = np.take_along_axis(read, np.where(lane == NO_LANE, 0, lane)[None], axis=2)
    beats = np.zeros((len(read), W, A), np.int64)
    beats[:, :, :slots] = np.where(lane == NO_LANE, 0, carried).transpose(0, 2, 1)
    return beats


def image_region(region, m, lanes):
    """Image ``m``'s region of a step or program over several images: ``m`` times the
    region's words past it."""
    return dataclasses.replace(region, addr=region.addr + m * region.words(lanes))


def _run_layer(step, image, memories, engine):
    for m in range(step.images):
        _run_image(step, image_region(step.src, m, engine.rows),
                   image_region(step.dst, m, engine.rows), image, memories, engine,
                   step.fused_add(m, engine.rows))


def _run_image(step, src, dst, image, memories, engine, add):
    R = engine.rows
    at = step.weights
    blocks, shifts, multipliers = [], [], []
    for _ in range(step.row_blocks):
        bias = np.frombuffer(image, "<i4", R, at).astype(np.int64)
        shifts.append(np.frombuffer(image, np.uint8, R, at + 4 * R).astype(np.int64))
        multipliers.append(np.frombuffer(image, "<u2", R, at + 5 * R).astype(np.int64)
                           if engine.requant == "multiplier" else np.ones(R, np.int64))
        at += bias_bytes(engine)
        psum = np.broadcast_to(bias, (step.positions, R))
        for j in range(step.col_blocks):
            tile, table = read_tile(image, at, engine)
            where = f"{step.name}: tile {len(blocks)}, {j} of its weight image"
            if np.any((table.lane >= R) & (table.lane != NO_LANE)):
                raise ProgramError(f"{where} has a gather lane past the engine's {R}")
            if np.any(tile.selects >= engine.alpha):
                raise ProgramError(f"{where} has a stream select past its {engine.alpha} "
                                   f"streams")
            at += tile_bytes(engine)
            slots = min(engine.alpha, engine.gather_ports * layer_rounds(step, engine))
            beats = gather_values(memories["act"], src.addr, src.map_shape, step.kernel,
                                  step.stride, step.padding, table, step.pad, slots)
            if beats is None:
                raise ProgramError(f"{where} reads a word outside the activation buffer's "
                                   f"{len(memories['act'])}")
            psum = run_tile(tile, beats, psum, engine.acc_bits)
        blocks.append(psum.T)
    acc = np.concatenate(blocks)[:step.filters]                     # N x T
    shift, multiplier = np.concatenate(shifts), np.concatenate(multipliers)
    if step.output_stage and shift.max(initial=0) >= max_shift(engine) + 1:
        raise ProgramError(f"{step.name}: a shift of {shift.max()} in the weight image; the "
                           f"output stage shifts by at most {max_shift(engine)}")
    y = output_stage(acc, shift[:step.filters], engine.out_bits,
                     multiplier[:step.filters]) if step.output_stage else acc
    if step.pool:
        h, w = layer_map(step)
        y = pool(y.reshape(1, -1, h, w), "max", 2, 2, 0, False, integer=True)[0]
    if add is not None:
        b = read_region(memories[add.b.memory], add.b, R).reshape(y.shape)
        y = residual_add(y, b, add, engine.out_bits)
    write_region(memories[dst.memory], dst, y, R)


def spill_reach(steps, lanes):
    """The external activation words a program's loads and stores reach."""
    return max((s.addr + (s.dst if s.op == "load" else s.src).words(lanes)
                for s in steps if s.op in ("load", "store")), default=0)


def external_reach(program):
    """The external activation words a program reaches: its loads and stores, and its
    images' input when that lies there."""
    R, region = program.engine.rows, program.input
    inputs = region.addr + program.images * region.words(R) if region.memory == "ext" else 0
    return max(spill_reach(program.steps, R), inputs)


#: The largest channel count, map side and layer or pooling stride and padding a program
#: may name (the engine's registers: 16-bit sizes, 4-bit strides and paddings).
MAX_SIDE, MAX_STRIDE = 0xFFFF, 15
#: The widest result a layer with fused pooling may have: the result writer's line of a
#: row's partial maxima (``codnn.hw.network.ResultWriter``), a word per pooled position.
POOL_LINE_WORDS = 512


def layer_map(step):
    """A layer step's window map ``(H, W)``: its result's, or with ``pool`` the map its
    window gives (which the pooling halves); a dense layer's is 1 x 1."""
    if not step.kernel:
        return 1, 1
    _, h, w = step.src.map_shape
    return output_shape(h, w, step.kernel, step.stride, step.padding)
#: Region addresses are 29 bits (bits 29-31 of the binary word are flags).
MAX_ADDR = (1 << 29) - 1


def _fail(where, text):
    raise ProgramError(f"{where}: {text}")


def _check_region(where, name, region, sizes, lanes, images=1, memories=("act",)):
    """A region's memory, shape and bounds: ``images`` of it from its address inside
    ``sizes[memory]`` words."""
    if region.memory not in memories:
        _fail(where, f"its {name} must be in the " + " or ".join(
            {"act": "activation buffer", "acc": "accumulator buffer",
             "ext": "external activation memory"}[m] for m in memories))
    if len(region.shape) not in (1, 3) or not all(
            isinstance(n, int) and 1 <= n <= MAX_SIDE for n in region.shape):
        _fail(where, f"its {name}'s shape {region.shape} is not C x H x W or F, each "
                     f"1..{MAX_SIDE}")
    end = region.addr + images * region.words(lanes)
    if not 0 <= region.addr <= MAX_ADDR or end > sizes[region.memory]:
        _fail(where, f"its {name} (words {region.addr}..{end - 1}) lies past the "
                     f"{region.memory} memory's {sizes[region.memory]} words")


def _check_window(where, kernel, stride, padding, src, dst, *, pool):
    """A window's kernel, stride and padding (each side), and the output map it gives
    ``dst``."""
    c, h, w = src.map_shape
    try:
        rows, cols = padding_sides(padding)
    except ValueError as error:
        _fail(where, str(error))
    if kernel == 0:
        if stride != 1 or (rows, cols) != ((0, 0), (0, 0)) or dst.map_shape[1:] != (1, 1):
            _fail(where, "kernel 0 (dense, or a global average) takes stride 1, padding 0 "
                         "and gives one position")
        return
    most = kernel - 1 if pool else MAX_STRIDE
    if not 1 <= kernel <= MAX_KERNEL or not 1 <= stride <= MAX_STRIDE \
            or max(*rows, *cols) > most:
        _fail(where, f"kernel {kernel}, stride {stride}, padding {padding}: the engine takes "
                     f"kernels 1..{MAX_KERNEL}, strides 1..{MAX_STRIDE}, paddings 0.."
                     f"{'kernel - 1' if pool else MAX_STRIDE} on each side")
    if h + sum(rows) < kernel or w + sum(cols) < kernel:
        _fail(where, f"a {kernel} x {kernel} window does not fit its {h} x {w} source "
                     f"with padding {padding}")
    out = output_shape(h, w, kernel, stride, padding)
    if dst.map_shape[1:] != out:
        _fail(where, f"its dst map is {dst.map_shape[1]} x {dst.map_shape[2]}; the window "
                     f"gives {out[0]} x {out[1]}")


def _check_layer(where, step, engine, sizes, image_bytes):
    R = engine.rows
    n = step.images
    if not 1 <= n <= MAX_STEP_IMAGES:
        _fail(where, f"{n} images; a layer step runs 1..{MAX_STEP_IMAGES}")
    _check_region(where, "src", step.src, sizes, R, n)
    _check_region(where, "dst", step.dst, sizes, R, n, ("act", "acc"))
    if (step.output_stage or step.add_b is not None) != (step.dst.memory == "act"):
        _fail(where, "a layer with an output stage or a fused add writes the activation "
                     "buffer, one without writes the accumulator buffer")
    if step.add_b is not None:
        _check_fused_add(where, step, sizes, R)
    elif step.ma or step.mb or step.signed_b or step.signed_out:
        _fail(where, "add multipliers or flags on a layer without a fused add")
    if step.pool:
        _check_pooled(where, step)
    else:
        _check_window(where, step.kernel, step.stride, step.padding, step.src, step.dst,
                      pool=False)
    c, h, w = step.dst.map_shape
    h, w = layer_map(step) if step.pool else (h, w)
    if step.positions != h * w:
        _fail(where, f"positions {step.positions}; its {'window' if step.pool else 'dst'} "
                     f"map has {h * w}")
    if step.filters != c or step.row_blocks != -(-c // R):
        _fail(where, f"filters {step.filters} and row blocks {step.row_blocks}; its dst "
                     f"has {c} channels, {-(-c // R)} blocks of {R}")
    if not 1 <= step.col_blocks <= 0xFFFF:
        _fail(where, f"column blocks {step.col_blocks}, not 1..65535")
    if not 0 <= step.pad < 1 << engine.out_bits:
        _fail(where, f"pad code {step.pad} is not an activation "
                     f"(0..{(1 << engine.out_bits) - 1})")
    if not 1 <= layer_rounds(step, engine) <= gather_rounds(engine):
        _fail(where, f"{step.rounds} rounds of gather reads; the engine reads "
                     f"1..{gather_rounds(engine)} per position")
    end = step.weights + step.row_blocks * (bias_bytes(engine)
                                            + step.col_blocks * tile_bytes(engine))
    if step.weights < 0 or step.weights % image_word(engine) or end > image_bytes:
        _fail(where, f"its weights (bytes {step.weights}..{end - 1}) are not whole words "
                     f"inside the weight image's {image_bytes} bytes")
    if n > 1 and max(step.src.words(R), step.dst.words(R)) >= 1 << 16:
        _fail(where, "an image of its source or result takes 65536 words or more; a step "
                     "of several images strides by less")
    if step.col_blocks > 1 and step.positions * n > engine.psum_words:
        _fail(where, f"its partial sums ({step.positions * n} words) do not fit the "
                     f"partial-sum buffer's {engine.psum_words} words")


def _check_fused_add(where, step, sizes, lanes):
    """A layer with a fused add: no output stage, no pooling, its operand ``b`` (the
    shape of ``dst``, every image's) inside the activation or accumulator buffer (offset
    binary only as activations) and either ``dst`` itself or apart from it, multipliers
    of ``MULTIPLIER_BITS``."""
    if step.output_stage or step.pool:
        _fail(where, "a layer with a fused add has no output stage and no fused pooling")
    b = step.add_b
    _check_region(where, "add operand", b, sizes, lanes, step.images, ("act", "acc"))
    if b.map_shape != step.dst.map_shape:
        _fail(where, f"its add operand's shape {b.shape} is not its dst's {step.dst.shape}")
    if step.signed_b and b.memory == "acc":
        _fail(where, "an add operand in the accumulator buffer is not an offset-binary "
                     "activation (no signed flag)")
    span = step.images * step.dst.words(lanes)
    if b.memory == "act" and b.addr != step.dst.addr and abs(b.addr - step.dst.addr) < span:
        _fail(where, f"its add operand (word {b.addr}) overlaps its dst (word "
                     f"{step.dst.addr}, {span} words) without being it")
    _check_multipliers(where, step)


def _check_multipliers(where, step):
    """An add's multipliers ``ma`` and ``mb``: ``MULTIPLIER_BITS`` unsigned bits each."""
    if not (0 <= step.ma < 1 << MULTIPLIER_BITS and 0 <= step.mb < 1 << MULTIPLIER_BITS):
        _fail(where, f"multipliers {step.ma} and {step.mb} outside {MULTIPLIER_BITS} "
                     f"unsigned bits")


def _check_pooled(where, step):
    """A layer with fused pooling: a convolution with an output stage whose window's map
    pooled 2 x 2 is its result's, at most ``POOL_LINE_WORDS`` wide. (The window's map is
    under 65536 a side: one past it would need a source and a result larger than the
    activation buffer.)"""
    if not step.kernel or not step.output_stage:
        _fail(where, "a layer with fused pooling is a convolution with an output stage")
    c, h, w = step.dst.map_shape
    window = dataclasses.replace(step.dst, shape=(c, *layer_map(step))) \
        if step.stride >= 1 else step.dst
    _check_window(where, step.kernel, step.stride, step.padding, step.src, window,
                  pool=False)
    if (h, w) != tuple(n // 2 for n in window.map_shape[1:]):
        _fail(where, f"its pooled map is {h} x {w}; its window's "
                     f"{window.map_shape[1]} x {window.map_shape[2]} map pools to its "
                     f"halves")
    if w > POOL_LINE_WORDS:
        _fail(where, f"its pooled map is {w} wide; fused pooling keeps a row of at most "
                     f"{POOL_LINE_WORDS}")


def _check_step(where, step, engine, sizes, image_bytes):
    R = engine.rows
    if isinstance(step, LayerStep):
        _check_layer(where, step, engine, sizes, image_bytes)
    elif isinstance(step, PoolStep):
        _check_region(where, "src", step.src, sizes, R)
        _check_region(where, "dst", step.dst, sizes, R)
        if step.kind not in ("max", "avg") or step.dst.map_shape[0] != step.src.map_shape[0]:
            _fail(where, f"{step.kind} pooling from {step.src.map_shape[0]} channels to "
                         f"{step.dst.map_shape[0]}; max or avg, channels kept")
        _check_window(where, step.kernel, step.stride, step.padding, step.src, step.dst,
                      pool=True)
    elif isinstance(step, AddStep):
        for name in ("a", "b"):
            _check_region(where, name, getattr(step, name), sizes, R)
        _check_region(where, "dst", step.dst, sizes, R)
        if not step.a.map_shape == step.b.map_shape == step.dst.map_shape:
            _fail(where, f"operands {step.a.map_shape} and {step.b.map_shape} and result "
                         f"{step.dst.map_shape} differ")
        _check_multipliers(where, step)
    else:
        store = isinstance(step, StoreStep)
        region = step.src if store else step.dst
        _check_region(where, "src" if store else "dst", region, sizes, R)
        if step.addr < 0 or step.addr + region.words(R) > engine.spill_words:
            _fail(where, f"external words {step.addr}..{step.addr + region.words(R) - 1} "
                         f"lie past the engine's external activation memory of "
                         f"{engine.spill_words} words")


def check_program(program):
    """Raise ``ProgramError``, naming the step and the field, for a program its engine
    does not run (docs/semantics.md section 9, "What the engine refuses"): an engine it
    cannot be, images outside 1..256, a weight image that is not whole words or exceeds
    the weight memory, an input or output region outside its memory, and per step a
    region outside its memory or of another shape than the step gives it, a window that
    gives another output map, counts that do not match (positions, filters, row
    blocks), column blocks 0, weights past the image, a pad code or rounds the engine
    does not have, images outside 1..65535, partial sums past their buffer,
    multipliers past 24 bits, a transfer past the external memory."""
    engine = program.engine
    try:
        engine.check()
    except ProgramError as error:
        _fail("the header", str(error))
    B, R = program.images, engine.rows
    if not 1 <= B <= MAX_PROGRAM_IMAGES:
        _fail("the header", f"a program runs 1..{MAX_PROGRAM_IMAGES} images, not {B}")
    image_bytes = program.weight_image_bytes
    if image_bytes < 0 or image_bytes % image_word(engine) or image_bytes > engine.weight_bytes:
        _fail("the header", f"a weight image of {image_bytes} bytes; the engine reads whole "
                            f"words of {image_word(engine)} bytes, at most "
                            f"{engine.weight_bytes}")
    sizes = {"act": engine.act_words, "acc": engine.acc_words, "ext": engine.spill_words}
    _check_region("the header", "input", program.input, sizes, R, B, ("act", "ext"))
    _check_region("the header", "output", program.output, sizes, R, B, ("act", "acc"))
    for k, step in enumerate(program.steps):
        _check_step(f"step {k} ({step.name})", step, engine, sizes, image_bytes)


def run_program(program, image, x):
    """Run one image ``x`` (integers of the input's shape) through ``program`` with weight
    image ``image`` (bytes); return the output region's values. For a program of several
    ``images``, ``x`` and the result have one more axis, the image, first.

    Raises
    ------
    ProgramError
        If ``image`` is not ``program.weight_image_bytes`` long, ``x`` has the wrong shape
        or values outside ``0..2**out_bits - 1``, a step does not match its tiles or uses
        the accumulator buffer where it cannot (``check_step``), the input or output
        regions of the program's images do not fit their memories.
    """
    engine = program.engine
    check_program(program)
    if len(image) != program.weight_image_bytes:
        raise ProgramError(f"the weight image has {len(image)} bytes, the program reads "
                           f"{program.weight_image_bytes}")
    x = np.asarray(x)
    batch = program.images > 1
    shape = (program.images, *program.input.shape) if batch else program.input.shape
    if x.shape != shape:
        raise ProgramError(f"the image has shape {x.shape}, the program takes {shape}")
    if x.size and (x.min() < 0 or x.max() >= 1 << engine.out_bits):
        raise ProgramError(f"image values must lie in 0..{(1 << engine.out_bits) - 1}")
    R = engine.rows
    memories = {"act": np.zeros((engine.act_words, R), np.int64),
                "acc": np.zeros((engine.acc_words, R), np.int64),
                "ext": np.zeros((external_reach(program), R), np.int64)}
    for m, values in enumerate(x if batch else [x]):
        write_region(memories[program.input.memory], image_region(program.input, m, R),
                     values, R)
    for step in program.steps:
        if isinstance(step, LayerStep):
            _run_layer(step, image, memories, engine)
        elif isinstance(step, LoadStep):
            n = step.dst.words(R)
            memories["act"][step.dst.addr:step.dst.addr + n] = \
                memories["ext"][step.addr:step.addr + n]
        elif isinstance(step, StoreStep):
            n = step.src.words(R)
            memories["ext"][step.addr:step.addr + n] = \
                memories["act"][step.src.addr:step.src.addr + n]
        elif isinstance(step, PoolStep):
            x = read_region(memories[step.src.memory], step.src, R)
            y = pool(x[None], step.kind, step.kernel, step.stride, step.padding,
                     step.count_pad, integer=True)
            write_region(memories[step.dst.memory], step.dst, y, R)
        else:
            a = read_region(memories[step.a.memory], step.a, R)
            b = read_region(memories[step.b.memory], step.b, R)
            write_region(memories[step.dst.memory], step.dst,
                         residual_add(a, b, step, engine.out_bits), R)
    out = [read_region(memories[program.output.memory], image_region(program.output, m, R),
                       R) for m in range(program.images)]
    return np.stack(out) if batch else out[0]


#: The binary program (``codnn.golden.program_format``): a header of ``HEADER_WORDS``
#: little-endian u32, then ``STEP_WORDS`` per step (docs/semantics.md section 9).
_OPS = {Op.LAYER: "layer", Op.POOL: "pool", Op.ADD: "add", Op.LOAD: "load",
        Op.STORE: "store"}


def _region_values(region):
    c, h, w = region.map_shape
    return {"addr": region.addr, "acc": int(region.memory == "acc"),
            "vector": int(len(region.shape) == 1), "ext": int(region.memory == "ext"),
            "channels": c, "height": h, "width": w}


def _region(v, where, name, ext=False):
    """The region of a format's region fields ``v``; ``ProgramError`` for one that is in
    two memories, outside the external memory where it cannot be (``ext``), a vector of
    more than one position, or of more than 65535 channels."""
    c, h, w = v["channels"], v["height"], v["width"]
    if (v["acc"] and v["ext"]) or (v["ext"] and not ext) or (v["vector"] and (h, w) != (1, 1)) \
            or not 1 <= c <= MAX_SIDE:
        raise ProgramError(f"{where}: its {name} region (address {v['addr']:#x}, flags acc "
                           f"{v['acc']} vector {v['vector']} ext {v['ext']}, {c} x {h} x "
                           f"{w}) is not one (one memory, a vector of 1 x 1, 1..{MAX_SIDE} "
                           f"channels)")
    shape = (c,) if v["vector"] else (c, h, w)
    memory = "acc" if v["acc"] else "ext" if v["ext"] else "act"
    return Region(memory, v["addr"], shape)


def _strides(step, lanes):
    """A layer step's image strides ``(words(src), words(dst))``, or 0s for one image."""
    if step.images == 1:
        return 0, 0
    return step.src.words(lanes), step.dst.words(lanes)


def _padding_values(padding):
    """A window's padding as the descriptor's four fields."""
    (top, bottom), (left, right) = padding_sides(padding)
    return {"padding_top": top, "padding_left": left, "padding_bottom": bottom,
            "padding_right": right}


def _padding(values):
    """A descriptor's padding as a step holds it (``padding_value``)."""
    return padding_value(values["padding_top"], values["padding_left"],
                         values["padding_bottom"], values["padding_right"])


def _pool_values(step):
    """A layer step's fused pooling fields: the flag, and whether its window's map is of
    odd height and width (the engine's map is then twice the result's plus those)."""
    if not step.pool:
        return {}
    h, w = layer_map(step)
    return {"pool": 1, "pool_odd_height": h % 2, "pool_odd_width": w % 2}


def _add_values(step):
    """A layer step's fused add fields (none without ``add_b``)."""
    if step.add_b is None:
        return {}
    return {"add": 1, "add_b": step.add_b.addr, "add_b_acc": int(step.add_b.memory == "acc"),
            "add_ma": step.ma, "add_mb": step.mb,
            "add_signed_b": int(step.signed_b), "add_signed_out": int(step.signed_out)}


def _step_values(step, e):
    """A step's descriptor fields (``STEPS``), the format's nested dict."""
    if isinstance(step, LayerStep):
        src_stride, dst_stride = _strides(step, e.rows)
        return Op.LAYER, {
            "output_stage": int(step.output_stage), **_pool_values(step),
            "src": _region_values(step.src),
            "dst": _region_values(step.dst), "filters": step.filters,
            "row_blocks": step.row_blocks, "col_blocks": step.col_blocks,
            "positions": step.positions, "weights": step.weights // image_word(e),
            "pad": step.pad, "kernel": step.kernel, "stride": step.stride,
            **_padding_values(step.padding), "rounds": layer_rounds(step, e),
            "images": step.images, "src_stride": src_stride, "dst_stride": dst_stride,
            **_add_values(step)}
    if isinstance(step, PoolStep):
        return Op.POOL, {
            "avg": int(step.kind == "avg"), "count_pad": int(step.count_pad),
            "src": _region_values(step.src), "dst": _region_values(step.dst),
            "kernel": step.kernel, "stride": step.stride, **_padding_values(step.padding),
            "blocks": -(-step.src.map_shape[0] // e.rows)}
    if isinstance(step, (LoadStep, StoreStep)):
        region = step.dst if isinstance(step, LoadStep) else step.src
        return Op.LOAD if isinstance(step, LoadStep) else Op.STORE, {
            "buffer": _region_values(region), "ext_addr": step.addr,
            "words": region.words(e.rows)}
    return Op.ADD, {
        "signed_a": int(step.signed_a), "signed_b": int(step.signed_b),
        "signed_out": int(step.signed_out), "a": _region_values(step.a),
        "b": _region_values(step.b), "dst": _region_values(step.dst), "ma": step.ma,
        "mb": step.mb, "words": step.dst.words(e.rows)}


def encode_program(program):
    """The program as the engine's sequencer reads it: a header (magic, version, step
    count and images, the input and output regions, the engine's parameters, the weight
    image's words) and a fixed-size descriptor per step (names are the JSON form's
    only); ``ProgramError`` for a program the format cannot hold."""
    e = program.engine
    if len(program.steps) >= 1 << 24 or not 1 <= program.images <= MAX_PROGRAM_IMAGES \
            or program.weight_image_bytes % image_word(e):
        raise ProgramError(f"a binary program has fewer than 2**24 steps, 1.."
                           f"{MAX_PROGRAM_IMAGES} images and a weight image of whole words, "
                           f"not {len(program.steps)}, {program.images} and "
                           f"{program.weight_image_bytes} bytes")
    header = {
        "magic": MAGIC, "version": VERSION, "steps": len(program.steps),
        "images_less_one": program.images - 1, "input": _region_values(program.input),
        "output": _region_values(program.output), "rows": e.rows, "cols": e.cols,
        "alpha": e.alpha, "weight_bits": e.weight_bits, "out_bits": e.out_bits,
        "acc_bits": e.acc_bits, "gather_ports": e.gather_ports,
        "mac": MAC_KINDS.index(e.mac), "requant": REQUANT_KINDS.index(e.requant),
        "act_words": e.act_words,
        "acc_words": e.acc_words, "psum_words": e.psum_words,
        "image_words": program.weight_image_bytes // image_word(e)}
    try:
        words = pack(HEADER, header, HEADER_WORDS)
        for k, step in enumerate(program.steps):
            op, values = _step_values(step, e)
            words += pack(STEPS[op], {"op": op, **values}, STEP_WORDS)
    except ValueError as error:
        raise ProgramError(f"the binary program cannot hold it: {error}") from None
    return np.array(words, "<u4").tobytes()


def _decode_step(s, k, engine):
    """Step ``k`` of a binary program (its descriptor words ``s``); ``ProgramError`` for an
    unknown operation, a bit set outside the operation's fields (its flags, its unused
    words), a used word out of its range, or a count that its regions do not give (a
    pooling's lane blocks, an add's words, a transfer's words, a layer's image
    strides)."""
    op, where = int(s[0] & 0xFF), f"step {k}"
    if op not in _OPS:
        raise ProgramError(f"{where}: unknown operation {op}")
    kind, layout = _OPS[op], STEPS[op]
    stray = [(j, int(s[j]) & mask) for j, mask in enumerate(unused_bits(layout, STEP_WORDS))
             if int(s[j]) & mask]
    if stray:
        j, bits = stray[0]
        raise ProgramError(f"{where}: a {kind} step with bits {bits:#x} of word {j} set, "
                           f"outside its fields")
    v = unpack(layout, s)
    name, R = f"step{k}", engine.rows

    def region(field):
        return _region(v[field], where, field)

    def count(value, region, what):
        if value != region.words(R):
            raise ProgramError(f"{where}: {what} {value}; its region takes "
                               f"{region.words(R)}")
    if op == Op.LAYER:
        layer = LayerStep(name, region("src"), region("dst"), v["filters"], v["row_blocks"],
                          v["col_blocks"], v["positions"], v["weights"] * image_word(engine),
                          bool(v["output_stage"]), v["kernel"], v["stride"], _padding(v),
                          v["pad"], v["rounds"], v["images"], bool(v["pool"]),
                          None, v["add_ma"], v["add_mb"], bool(v["add_signed_b"]),
                          bool(v["add_signed_out"]))
        if v["add"]:
            layer = dataclasses.replace(layer, add_b=Region(
                "acc" if v["add_b_acc"] else "act", v["add_b"], layer.dst.shape))
        elif v["add_b"] or v["add_b_acc"]:
            raise ProgramError(f"{where}: an add operand at word {v['add_b']} without "
                               f"the add flag")
        odd = (v["pool_odd_height"], v["pool_odd_width"])
        if (not layer.pool and any(odd)) or (
                layer.pool and layer.kernel and layer.stride
                and odd != tuple(n % 2 for n in layer_map(layer))):
            raise ProgramError(f"{where}: odd map flags {odd} with fused pooling "
                               f"{v['pool']}; its window gives "
                               f"{layer_map(layer) if layer.kernel and layer.stride else '-'}")
        wide = layer.images > 1 and max(layer.src.words(R), layer.dst.words(R)) >= 1 << 16
        strides = (v["src_stride"], v["dst_stride"])
        if strides != _strides(layer, R) and not wide:      # wide: check_program refuses
            raise ProgramError(f"{where}: image strides {strides}, its regions give "
                               f"{_strides(layer, R)}")
        return layer
    if op in (Op.LOAD, Op.STORE):
        buffer = region("buffer")
        count(v["words"], buffer, "words")
        return (LoadStep if op == Op.LOAD else StoreStep)(name, buffer, v["ext_addr"])
    if op == Op.POOL:
        src = region("src")
        if v["blocks"] != -(-src.map_shape[0] // R):
            raise ProgramError(f"{where}: lane blocks {v['blocks']}; its source has "
                               f"{-(-src.map_shape[0] // R)}")
        return PoolStep(name, src, region("dst"), "avg" if v["avg"] else "max", v["kernel"],
                        v["stride"], _padding(v), bool(v["count_pad"]))
    add = AddStep(name, region("a"), region("b"), region("dst"), v["ma"], v["mb"],
                  bool(v["signed_a"]), bool(v["signed_b"]), bool(v["signed_out"]))
    count(v["words"], add.dst, "words")
    return add


def decode_program(data, weight_bytes=EngineConfig.weight_bytes, engine=None):
    """The ``Program`` of ``encode_program``'s bytes (steps named ``step0``, ``step1``...;
    ``weight_bytes``, the on-chip weight memory, is not in the binary form, nor is the
    external activation memory: ``spill_words`` is what the loads, the stores and the
    input reach, ``external_reach``).

    With ``engine`` (an ``EngineConfig``), whether that engine runs it, as the engine
    decides (docs/semantics.md section 9, "What the engine refuses"): the header's array,
    widths and MAC kind are the engine's, its buffers at most the engine's (a program
    for a smaller engine runs on a larger one), and the program, on the engine's weight
    memory and external activation memory, passes ``check_program``.

    Raises
    ------
    ProgramError
        If ``data`` is not a whole program of this version, a step's binary words are
        not one (``_decode_step``), or (with ``engine``) that engine does not run it.
    """
    program = _decode(data, weight_bytes if engine is None else engine.weight_bytes)
    if engine is None:
        return program
    header = program.engine
    same = ("rows", "cols", "alpha", "mac", "weight_bits", "out_bits", "acc_bits",
            "gather_ports", "requant")
    wrong = [name for name in same if getattr(header, name) != getattr(engine, name)]
    wrong += [name for name in ("act_words", "acc_words", "psum_words")
              if not 1 <= getattr(header, name) <= getattr(engine, name)]
    if wrong:
        raise ProgramError(f"the header: {', '.join(wrong)} "
                           f"{', '.join(str(getattr(header, n)) for n in wrong)}; the engine "
                           f"has {', '.join(str(getattr(engine, n)) for n in wrong)}")
    program = dataclasses.replace(program, engine=dataclasses.replace(
        header, spill_words=engine.spill_words, weight_ports=engine.weight_ports))
    check_program(program)
    return program


def _decode(data, weight_bytes):
    """``decode_program`` without an engine."""
    if len(data) < 4 * HEADER_WORDS or len(data) % 4:
        raise ProgramError(f"a program has a {4 * HEADER_WORDS}-byte header and whole "
                           f"words, not {len(data)} bytes")
    w = np.frombuffer(data, "<u4").astype(np.int64)
    h = unpack(HEADER, w[:HEADER_WORDS])
    if h["magic"] != MAGIC or h["version"] != VERSION:
        raise ProgramError(f"not a network engine program of version {VERSION} (magic "
                           f"{h['magic']:#010x}, version {h['version']})")
    count, images = h["steps"], h["images_less_one"] + 1
    if len(w) != HEADER_WORDS + count * STEP_WORDS:
        raise ProgramError(f"a program of {count} steps has "
                           f"{4 * (HEADER_WORDS + count * STEP_WORDS)} bytes, not {len(data)}")
    if h["mac"] >= len(MAC_KINDS):
        raise ProgramError(f"the header: unknown MAC kind {h['mac']}")
    if h["requant"] >= len(REQUANT_KINDS):
        raise ProgramError(f"the header: unknown requantization {h['requant']}")
    engine = EngineConfig(rows=h["rows"], cols=h["cols"], alpha=h["alpha"],
                          mac=MAC_KINDS[h["mac"]], weight_bits=h["weight_bits"],
                          out_bits=h["out_bits"], acc_bits=h["acc_bits"],
                          gather_ports=h["gather_ports"],
                          requant=REQUANT_KINDS[h["requant"]], act_words=h["act_words"],
                          acc_words=h["acc_words"], psum_words=h["psum_words"],
                          weight_bytes=weight_bytes)
    try:
        engine.check()
    except ProgramError as error:
        raise ProgramError(f"the header: {error}") from None
    steps = tuple(_decode_step(w[HEADER_WORDS + k * STEP_WORDS:
                                 HEADER_WORDS + (k + 1) * STEP_WORDS], k, engine)
                  for k in range(count))
    # The external activation memory is not in the binary form: as large as the loads,
    # the stores and the input reach.
    program = Program(engine, steps, _region(h["input"], "the header", "input", ext=True),
                      _region(h["output"], "the header", "output"),
                      h["image_words"] * image_word(engine), images)
    return dataclasses.replace(program, engine=dataclasses.replace(
        engine, spill_words=external_reach(program)))


#: Cycles the engine takes to decide on a header or a descriptor once its words are read
#: (``codnn.hw.network.program_check``: the conditions, each operation's conjunction
#: and the verdict, each a registered stage).
DECIDE_CYCLES = 3
#: Cycles of the engine's sequencer: the header (read through the memory and its output
#: register, decided, then checked), a step's descriptor (read, decided, then
#: dispatched).
HEADER_CYCLES = HEADER_WORDS + 3 + DECIDE_CYCLES
FETCH_CYCLES = STEP_WORDS + 3 + DECIDE_CYCLES
#: Cycles from a pooling read's words landing to the lanes' accumulators taking them: the
#: words registered, each lane's pair of them (``codnn.hw.network.PostProcess``).
POOL_READ_STEPS = 2
#: Cycles from a gather pass's start to its first beat, beyond its rounds of reads.
GATHER_START = 6
#: Cycles of the post-processing unit's add from its operands' registers to their rounded
#: sum: the products of the operands' 17-bit pieces, their sum, the rounded sum.
ADD_PRODUCT_STEPS = 3
#: Cycles from a result taken by the engine's result writer to its write: the partial
#: sum's read, the add, the output stage's two steps.
RESULT_WRITE_STEPS = 4
#: Cycles from a result taken to its write with a fused add: the partial sum's read and
#: the add (the operand's read beside them), ``ADD_PRODUCT_STEPS``, the clamp.
ADD_WRITE_STEPS = 3 + ADD_PRODUCT_STEPS
#: Cycles a layer's result writer takes more with fused pooling: a pair's maximum with
#: the row above's, registered, then the write.
POOL_WRITE_STEPS = 2
#: Cycles of a load or store before its first burst's address: the start, the sizing.
TRANSFER_START = 2
#: Weight words an AXI4 burst of the engine's weight port asks for at most; the port holds
#: at most ``PREFETCH_BURSTS`` bursts (asked and not yet wholly taken by the sequencer) in
#: its prefetch FIFO of ``PREFETCH_BURST * PREFETCH_BURSTS`` words
#: (``codnn.hw.network.weights.AxiWeights``).
PREFETCH_BURST = 32
PREFETCH_BURSTS = 2
#: Cycles from a weight word's arrival on the AXI4 port to the cycle the sequencer may
#: take it from the prefetch FIFO.
PREFETCH_LAG = 2


def gather_rounds(engine):
    """The most cycles of reads per data beat: ``ceil(alpha / gather_ports)`` (a lane bank
    reads a word per stream slot, ``gather_ports`` slots a cycle)."""
    return -(-engine.alpha // engine.gather_ports)


def layer_rounds(step, engine):
    """A layer step's cycles of reads per data beat (``LayerStep.rounds``)."""
    return gather_rounds(engine) if step.rounds is None else step.rounds


def step_cycles(program, memory_latency=None, act_latency=0, write_latency=0,
                weight_base=0):
    """The engine's cycles for each step of ``program``, its descriptor's included
    (``codnn.hw.network.NetworkEngine``); a run takes ``HEADER_CYCLES`` more.
    ``memory_latency`` is None for a weight image on chip; with the weight image in
    external memory from byte ``weight_base``, the cycles from a burst's address taken
    to its first word (then a word a cycle): a layer's weight words are prefetched from
    its dispatch, in bursts of ``PREFETCH_BURST`` words at most (``layer_cycles``).
    Loads and stores of external activations take their bursts one after another
    (``codnn.hw.network.activations.AxiActivations``), each load burst waiting
    ``act_latency`` cycles from its address taken to its first word, each store burst
    ``write_latency`` from its last word taken to its response.

    A layer's tiles (row blocks in turn, column blocks within) each load (a row block's
    first tile its bias, then every tile its table and cells; the cells once the array
    has a free weight bank), then stream their positions into the array (``D`` cycles
    from the gather's start to the last one, a position every ``max(beat_cycles,
    rounds)``, ``rounds`` the layer's), each tile loading while the one before streams
    (``layer_cycles``)."""
    e = program.engine
    cycles = []
    for step in program.steps:
        if isinstance(step, LayerStep):
            work = layer_cycles(step, e, memory_latency, weight_base)
        elif isinstance(step, PoolStep):
            _, h, w = step.src.map_shape
            kernel_h, kernel_w = (step.kernel, step.kernel) if step.kernel else (h, w)
            work = pool_unit_cycles(step.kind, kernel_h, kernel_w, step.dst.words(e.rows),
                                    e.out_bits) + 2
        elif isinstance(step, (LoadStep, StoreStep)):
            store = isinstance(step, StoreStep)
            region = step.src if store else step.dst
            each = (1 + write_latency) if store else act_latency
            work = TRANSFER_START + sum(each + n for _, n in bursts(
                step.addr, region.words(e.rows), act_stride(e))) + 1
        else:
            work = step.dst.words(e.rows) + 3 + ADD_PRODUCT_STEPS + 2
        cycles.append(FETCH_CYCLES + work)
    return cycles


def pool_unit_cycles(kind, kernel_h, kernel_w, words, out_bits):
    """The post-processing unit's cycles for a pooling step of ``words`` output words and
    a ``kernel_h x kernel_w`` window (``codnn.hw.network.PostProcess``): a cycle to set
    up, then per window ``v = kernel_w * ceil(kernel_h / 2)`` cycles of reads (two window
    rows at a time); max windows follow one another and the last word is written
    ``POOL_READ_STEPS + 2`` cycles after its reads; an average takes, per window,
    ``POOL_READ_STEPS + 2`` more cycles for its sum, ``out_bits`` for the quotient's bits
    and one to write."""
    reads = kernel_w * -(-kernel_h // 2)
    if kind == "max":
        return 1 + words * reads + POOL_READ_STEPS + 2
    return 1 + words * (reads + out_bits + POOL_READ_STEPS + 3)


class _WeightWords:
    """When the sequencer may take each of a layer's weight words, in order (``take``).

    On chip (``latency`` None) a word is there when asked for. Behind the AXI4 port the
    layer's words are prefetched from the cycle its step is dispatched: bursts of at
    most ``PREFETCH_BURST`` words (none across a 4 KB page, from byte ``first_byte``), an
    address a cycle while fewer than ``PREFETCH_BURSTS`` bursts are held (asked, their
    last word not yet taken); a burst's first word arrives ``latency`` cycles after its
    address, or the cycle after the previous burst's last word if that is later, the
    rest a cycle apart; a word may be taken ``PREFETCH_LAG`` cycles after it arrives."""

    def __init__(self, latency, first_byte, count, stride):
        self._latency = latency
        self._bursts = ([] if latency is None else
                        [n for _, n in bursts(0, count, stride, PREFETCH_BURST, first_byte)])
        self._taken, self._arrive, self._asked, self._ends = [], [], [], []

    def take(self, after, n):
        """Takes the next ``n`` words, a cycle apart at the soonest, the first after cycle
        ``after``; returns the cycle the last is taken."""
        for _ in range(n):
            after = max(after + 1, self._ready(len(self._taken)))
            self._taken.append(after)
        return after

    def _ready(self, j):
        if self._latency is None:
            return 0
        while len(self._arrive) <= j:
            b = len(self._asked)
            asked = self._asked[-1] + 1 if b else 0
            if b >= PREFETCH_BURSTS:
                asked = max(asked, self._taken[self._ends[b - PREFETCH_BURSTS]] + 1)
            first = asked + self._latency
            if self._arrive:
                first = max(first, self._arrive[-1] + 1)
            self._asked.append(asked)
            self._arrive += range(first, first + self._bursts[b])
            self._ends.append(len(self._arrive) - 1)
        return self._arrive[j] + PREFETCH_LAG


def layer_cycles(step, engine, memory_latency=None, weight_base=0):
    """A layer step's cycles after its descriptor (``step_cycles``).

    A tile loads while the tile before it streams: tile ``k``'s loading starts the cycle
    after tile ``k - 1`` starts. A row block's first tile takes its bias words (from the
    cycle after the previous tile's last position went into the array, since that
    tile's data take the bias; a cycle to ask, then a word a cycle), then every tile its
    gather table and its cells (consecutive in the image). The array takes the cells
    once its weight bank is free: tile ``k - 2``'s (the same bank's) last position has left
    the cells, ``pipeline_depth + 1`` cycles after it went in. On chip (``memory_latency``
    None) with ``weight_ports`` 2 the table and the cells are two runs at once, through the
    weight memory's two read ports, each asked for in the cycle the tile's loading starts:
    the table's ``t`` words (``table_words``) a cycle apart, the cells a row a cycle from
    that cycle or from the bank's freeing if later; the tile is loaded at its last cell, or
    a cycle after its table's last word if that is later; with one port the table's words
    and then the cells are one run, each word there when asked for. In external memory the
    layer's words are prefetched (``_WeightWords``; word ``k`` at byte ``weight_base + k *
    word_stride``) and none is taken before it is there: the table's words, then the cells
    once the bank is free. A tile starts in the cycle it is loaded, or the cycle after the
    previous tile's last position went in if that is later; its first position goes in the
    gather's ``rounds + GATHER_START`` cycles later (at least ``beat_cycles`` after the
    previous tile's last), then a position every ``max(beat_cycles, rounds)``. The layer
    ends when its last result is written (the array's latency and the result writer's
    ``result_write_steps``; with fused pooling its last window's maximum, up to
    ``POOL_WRITE_STEPS`` later: ``_pooled_write_tail``) and the writer is idle a cycle
    later."""
    e = engine
    timing = mac_timing(e.mac, data_bits=e.out_bits, weight_bits=e.weight_bits, cols=e.cols,
                        acc_bits=e.acc_bits)
    depth = pipeline_depth(e.rows, e.cols, False, **timing)
    stride = word_stride(image_word(e))
    bias_words = bias_bytes(e) // image_word(e)
    count = step.row_blocks * (bias_words + step.col_blocks * (table_words(e) + e.rows))
    first_byte = weight_base + step.weights // image_word(e) * stride
    words = _WeightWords(memory_latency, first_byte, count, stride)
    rounds = layer_rounds(step, e)
    period = max(timing["beat_cycles"], rounds)
    first, rest = rounds + GATHER_START, (step.images * step.positions - 1) * period
    started = last_in = -1      # the previous tile's start, and its last position's cycle
    bank_free = []              # when each tile's weight bank may take the next cells
    for k in range(step.row_blocks * step.col_blocks):
        load = started + 1
        if k % step.col_blocks == 0:
            load = words.take(max(load, last_in + 1), bias_words) + 1
        free = bank_free[k - 2] if k >= 2 else load
        if memory_latency is None and e.weight_ports == 2:
            # Two runs at once: the table's words and the cells (as the bank takes them).
            table = load + table_words(e)
            loaded = max(table + 1, max(load + 1, free) + e.rows - 1)
        else:
            table = words.take(load, table_words(e))
            loaded = words.take(max(table + 1, free) - 1, e.rows)
        started = max(loaded, last_in + 1)
        last_in = max(started + first, last_in + timing["beat_cycles"]) + rest
        bank_free.append(last_in + depth + 1)
    return (last_in + 1 + latency(e.rows, e.cols, False, **timing)
            + result_write_steps(e, step) + _pooled_write_tail(step, period) + 1)


def _pooled_write_tail(step, period):
    """Cycles a layer with fused pooling ends after its last result's write: its last
    window's maximum is written ``POOL_WRITE_STEPS`` after that window's last result,
    which comes ``period`` cycles a result before the layer's last when the map's last
    row or column is dropped."""
    if not step.pool:
        return 0
    h, w = layer_map(step)
    after = h * w - ((h // 2 * 2 - 1) * w + w // 2 * 2)
    return max(0, POOL_WRITE_STEPS - after * period)


def weight_words_read(program):
    """Weight image words the engine reads per image: per layer and row block its bias
    words, and per tile its table and cells."""
    e = program.engine
    bias_words = bias_bytes(e) // image_word(e)
    return sum(step.row_blocks * (bias_words + step.col_blocks * (table_words(e) + e.rows))
               for step in program.steps if isinstance(step, LayerStep))


def host_words(program, image, x):
    """What a host writes into the engine to run image ``x`` (a program's ``images`` of
    them, the image first): ``(program, weights, activations)``, each a list of
    ``(address, word)`` (u32 program words; weight words of ``2 * cols`` bytes;
    activation words of ``rows`` lanes, the input regions', into the input's memory),
    words as little-endian integers."""
    engine = program.engine
    binary = np.frombuffer(encode_program(program), "<u4")
    word = image_word(engine)
    weights = [(k, int.from_bytes(image[k * word:(k + 1) * word], "little"))
               for k in range(len(image) // word)]
    n = program.input.words(engine.rows)
    act = np.zeros((program.images * n, engine.rows), np.int64)
    for m, values in enumerate(np.asarray(x).reshape(program.images,
                                                     *program.input.shape)):
        write_region(act, dataclasses.replace(program.input, addr=m * n), values,
                     engine.rows)
    lanes = [sum(int(v) << (engine.out_bits * k) for k, v in enumerate(row)) for row in act]
    return ([(k, int(w)) for k, w in enumerate(binary)], weights,
            [(program.input.addr + k, w) for k, w in enumerate(lanes)])


def output_values(program, words):
    """The output region's values from the words a host read back (``words[k]`` the
    integer of the region's word ``k``; a program's ``images`` regions one after another,
    the values then with the image first)."""
    engine = program.engine
    out = program.output
    bits = engine.acc_bits if out.memory == "acc" else engine.out_bits
    lanes = np.array([[(w >> (bits * k)) & ((1 << bits) - 1) for k in range(engine.rows)]
                      for w in words], np.int64)
    if out.memory == "acc":
        lanes = np.where(lanes >> (bits - 1), lanes - (1 << bits), lanes)
    n = out.words(engine.rows)
    values = [read_region(lanes, dataclasses.replace(out, addr=m * n), engine.rows)
              for m in range(program.images)]
    return np.stack(values) if program.images > 1 else values[0]

