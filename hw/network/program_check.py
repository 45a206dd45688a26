"""The network engine's program checks: whether a program's header and each step's
descriptor are ones the engine runs (docs/semantics.md section 9, "What the engine
refuses"; ``codnn.golden.network_program.decode_program`` with an engine decides the
same).

The header and the descriptor are registers that the sequencer fills word by word, in
order, each word at its place (``codnn.hw.network.NetworkEngine``), read here by field
name (``codnn.hw.network.descriptor``). The checks' products (a region's words,
``ceil(C / rows) * H * W``; images times them; the window's and the weights' extents)
are registered stages that run every cycle on what the registers hold, and so is the
verdict: each condition is registered (a wide test of unused bits a 32-bit word at a
time), then each operation's conjunction, then the verdict for the step's operation
(``codnn.golden.network_program.DECIDE_CYCLES`` stages), so that no path runs from a
field through the checks into the sequencer in one cycle. Each stage's inputs arrive
early enough that it holds the current step's value when the verdict is read
(``header_bad`` and ``step_bad`` ``1 + DECIDE_CYCLES`` cycles after the last word
lands). The latest operands: a layer's images (word 14), one stage before the
conditions; its window (word 13), two (its fields chosen by the operation, then its
extents); the weights' counts (words 8, 9), two; an add's result region (words 7 to
9), four; a layer's fused add operand (word 16), two.

Every operation's first region is at word 1 and its second at word 4
(``codnn.golden.program_format.STEPS``), so their products are shared: they are read
through the layer's view (``src``, ``dst``) whatever the operation.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import (MAX_KERNEL, MAX_SIDE, MAX_STEP_IMAGES,
                                          MAX_STRIDE, MULTIPLIER_BITS, POOL_LINE_WORDS,
                                          EngineConfig, bias_bytes, image_word, tile_bytes)
from codnn.golden.program_format import (HEADER_WORDS, MAGIC, STEP_WORDS, STEPS, VERSION,
                                         Op, unused_bits)
from codnn.golden.systolic import MAC_KINDS, REQUANT_KINDS
from codnn.hw.common.delays import stage
from codnn.hw.network.descriptor import HeaderLayout, StepLayout

__all__ = ["ProgramCheck", "ceil_div_constant"]

#: Region sizes past this many words are out of every buffer (at most 65536 words).
_WORDS_BITS = 18


def ceil_div_constant(n_bits, divisor):
    """``(multiplier, shift)`` such that ``ceil(n / divisor) == ((n + divisor - 1) *
    multiplier) >> shift`` whenever ``n + divisor - 1`` is below ``2**n_bits``: the
    rounded-up reciprocal's error ``multiplier * divisor - 2**shift`` is below
    ``2**(shift - n_bits)`` (Granlund and Montgomery's condition for an exact quotient)."""
    shift = n_bits + divisor.bit_length()
    multiplier = -(-(1 << shift) // divisor)
    assert multiplier * divisor - (1 << shift) < 1 << (shift - n_bits)
    return multiplier, shift


class _Region:
    """A region (a view of the format's region fields): its fields, whether they make a
    region (``ok``: one memory, a vector of 1 x 1, 1..65535 channels, a map of at least
    1 x 1), and its words (``ceil(C / rows) * H * W``, saturated at ``2**_WORDS_BITS -
    1``) from four registered stages."""

    def __init__(self, m, view, rows, name):
        self.addr, self.ext, self.vector, self.acc = view.addr, view.ext, view.vector, view.acc
        c = self.channels = view.channels
        self.height, self.width = view.height, view.width
        self.ok = (~(self.acc & self.ext)
                   & ~(self.vector & ((self.height != 1) | (self.width != 1)))
                   & (c != 0) & (c <= MAX_SIDE) & (self.height != 0) & (self.width != 0))
        multiplier, shift = ceil_div_constant(17, rows)       # C + rows - 1 < 2**17
        blocks = Signal(17, name=f"{name}_blocks")
        partial = Signal(34, name=f"{name}_blocks_h")
        full = Signal(50, name=f"{name}_words_full")
        m.d.sync += [blocks.eq(((c[:16] + rows - 1) * multiplier) >> shift),
                     partial.eq(blocks * self.height), full.eq(partial * self.width)]
        self.blocks = blocks
        self.words = Signal(_WORDS_BITS, name=f"{name}_words")
        m.d.sync += self.words.eq(Mux(full >= (1 << _WORDS_BITS) - 1,
                                      (1 << _WORDS_BITS) - 1, full))


class ProgramCheck(wiring.Component):
    """Decides whether the engine runs a program: ``header_bad`` from ``header`` (valid
    ``1 + DECIDE_CYCLES`` cycles after its last word lands), ``step_bad`` from ``desc``
    (likewise), with the header's buffer sizes and weight image words (``act_size``,
    ``acc_size``, ``psum_size``, ``image_words``) for the steps, and a layer step's
    weight image words (``layer_words``: its row blocks' biases and tiles) and its
    result's positions (``dst_plane``: ``H * W`` of ``dst``, pooled with fused pooling),
    both valid with ``step_bad``.

    Latency: ``DECIDE_CYCLES`` cycles beyond the program's words (the products are
    ready when the conditions are registered). Refuses what
    ``codnn.golden.network_program.decode_program`` with the engine refuses, and nothing
    else.

    Parameters
    ----------
    rows, cols, alpha, mac, act_words, acc_words, psum_words, gather_ports, requant :
        the engine's
    weight_limit : int
        The most weight image words the engine reaches (its on-chip memory's, or what its
        AXI4 port addresses).
    ext_limit : int
        The external activation memory's words (0: the engine has none; loads and stores
        are then unknown operations).
    program_words : int
        The program memory's words: a step count whose descriptors reach past it is
        refused.
    """

    def __init__(self, *, rows, cols, alpha, mac, act_words, acc_words, psum_words,
                 gather_ports, weight_limit, ext_limit, program_words, requant="shift"):
        self._p = dict(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=act_words,
                       acc_words=acc_words, psum_words=psum_words, gather_ports=gather_ports,
                       requant=requant,
                       weight_limit=weight_limit, ext_limit=ext_limit,
                       program_words=program_words)
        super().__init__({
            "header": In(HeaderLayout), "desc": In(StepLayout),
            "header_bad": Out(1), "step_bad": Out(1),
            "act_size": Out(32), "acc_size": Out(32), "psum_size": Out(32),
            "image_words": Out(32), "layer_words": Out(32), "dst_plane": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        self._header(m)
        self._step(m)
        return m

    def _header(self, m):
        """The header: magic, version, the engine's array, widths, MAC kind and
        requantization, buffers of
        1 up to the engine's, a weight image the engine reaches, the input (activations
        or external memory) and output (activations or accumulators) inside them for the
        program's images."""
        p, h = self._p, self.header
        R = p["rows"]
        images = Signal(9, name="program_images")
        m.d.comb += images.eq(h.images_less_one + 1)
        m.d.comb += [self.act_size.eq(h.act_words), self.acc_size.eq(h.acc_words),
                     self.psum_size.eq(h.psum_words), self.image_words.eq(h.image_words)]
        fixed = [(h.magic, MAGIC), (h.version, VERSION), (h.rows, R), (h.cols, p["cols"]),
                 (h.alpha, p["alpha"]), (h.weight_bits, 8), (h.out_bits, 8),
                 (h.acc_bits, 32), (h.gather_ports, p["gather_ports"]),
                 (h.mac, MAC_KINDS.index(p["mac"])),
                 (h.requant, REQUANT_KINDS.index(p["requant"]))]
        steps_room = max(0, p["program_words"] - HEADER_WORDS) // STEP_WORDS
        sizes_ok = ((h.steps <= steps_room) & (h.act_words != 0)
                    & (h.act_words <= p["act_words"]) & (h.acc_words != 0)
                    & (h.acc_words <= p["acc_words"]) & (h.psum_words != 0)
                    & (h.psum_words <= p["psum_words"]) & (h.image_words <= p["weight_limit"]))
        ends = []
        for name, memories in (("input", ("act", "ext")), ("output", ("act", "acc"))):
            region = _Region(m, getattr(h, name), R, f"header_{name}")
            span = Signal(_WORDS_BITS + 9, name=f"header_{name}_span")
            m.d.sync += span.eq(region.words * images)
            size = Mux(region.acc, h.acc_words, Mux(region.ext, p["ext_limit"], h.act_words))
            allowed = ((~region.acc | ("acc" in memories))
                       & (~region.ext | ("ext" in memories)))
            ends += [region.ok & allowed,
                     _fits(m, f"header_{name}", region.addr, span, size)]
        header_ok = _conjunction(m, "header", [field == v for field, v in fixed]
                                 + [sizes_ok] + ends)
        m.d.sync += self.header_bad.eq(~header_ok)

    def _window(self, m, is_pool, first, out_height, out_width):
        """The window (a layer's or a pooling's) against the source's map (``first``) and
        the map it gives (``out_height x out_width``: the result's, or a layer's before
        its fused pooling): along each axis out = (H + p + q - k) // s + 1 (p, q its
        padding before and after the map), as (out - 1) * s <= H + p + q - k < out * s.
        The operation's kernel, stride, paddings and largest padding are registered
        first. Returns the conditions (a dense layer's: stride 1, no padding, a 1 x 1
        result)."""
        layer, pool = self.desc.layer, self.desc.pool

        def chosen(pool_field, layer_field, name):
            return stage(m, Mux(is_pool, pool_field, layer_field), f"window_{name}")
        k = chosen(pool.kernel, layer.kernel, "kernel")
        s = chosen(pool.stride, layer.stride, "stride")
        sides = [chosen(getattr(pool, name), getattr(layer, name), name) for name in
                 ("padding_top", "padding_bottom", "padding_left", "padding_right")]
        most = chosen(pool.kernel - 1, MAX_STRIDE, "most_padding")
        dense = k == 0
        checks = []
        axes = ((first.height, out_height, sides[:2]), (first.width, out_width, sides[2:]))
        for axis, (side, out, (pad, after)) in enumerate(axes):
            # Registered a stage ahead: out * s, and H + p + q - k (alone and plus s).
            out_s = Signal(24, name=f"window_out_times_stride{axis}")
            room = Signal(signed(20), name=f"window_room{axis}")
            room_s = Signal(signed(21), name=f"window_room_plus_stride{axis}")
            m.d.sync += [out_s.eq(out * s), room.eq(side + pad + after - k),
                         room_s.eq(side + pad + after - k + s)]
            checks += [room >= 0, out_s <= room_s, room < out_s]
        return [
            Mux(dense, (s == 1) & ~Cat(*sides).any() & (out_height == 1)
                & (out_width == 1), 1),
            dense | ((k <= MAX_KERNEL) & (s >= 1) & (s <= MAX_STRIDE)),
            dense | Cat(v <= most for v in sides).all(),
            *(dense | check for check in checks)]

    def _step(self, m):
        p, d = self._p, self.desc
        R, A = p["rows"], p["alpha"]
        op, layer, pool, add, transfer = d.op, d.layer, d.pool, d.add, d.load
        first, second, third = (_Region(m, view, R, f"step_region{i}") for i, view in
                                enumerate((layer.src, layer.dst, add.dst)))
        act, acc = self.act_size, self.acc_size

        # A layer's images times its regions' words (other steps take one image: their
        # regions' words).
        spans = []
        for i, region in enumerate((first, second)):
            span = Signal(_WORDS_BITS + 16, name=f"step_span{i}")
            m.d.sync += span.eq(region.words * layer.images[:16])
            spans.append(span)

        # A layer's window map: its result's, or with fused pooling twice the result's
        # plus the odd flags (17 bits; a map past 65535 a side has no room in the
        # activation buffer).
        pooled = (op == Op.LAYER) & layer.pool
        map_height, map_width = (
            Mux(pooled, Cat(odd, side), side) for odd, side in
            ((layer.pool_odd_height, second.height), (layer.pool_odd_width, second.width)))
        window_ok = self._window(m, op == Op.POOL, first, map_height, map_width)
        # Positions: the window's map.
        positions = Signal(34, name="map_positions")
        plane = Signal(32, name="dst_plane")
        m.d.sync += [positions.eq(map_height * map_width),
                     plane.eq(second.height * second.width)]
        m.d.comb += self.dst_plane.eq(plane)
        # The layer's part of the weight image.
        config = EngineConfig(rows=R, cols=p["cols"], alpha=A, requant=p["requant"])
        bias_words = bias_bytes(config) // image_word(config)
        tile_words = tile_bytes(config) // image_word(config)
        per_row_block = Signal(34, name="weights_per_row_block")
        weight_span = Signal(50, name="weights_span")
        m.d.sync += [per_row_block.eq(layer.col_blocks[:16] * tile_words + bias_words),
                     weight_span.eq(layer.row_blocks[:16] * per_row_block)]
        m.d.comb += self.layer_words.eq(weight_span)
        # Partial sums: positions times images.
        psum_span = Signal(48, name="psum_span")
        m.d.sync += psum_span.eq(layer.positions * layer.images[:16])

        gather_rounds = -(-A // p["gather_ports"])
        region_ok = [first.ok, ~first.acc, ~first.ext, second.ok, ~second.ext]
        layer_ok = [
            *region_ok, _fits(m, "layer_src", first.addr, spans[0], act),
            _fits(m, "layer_dst", second.addr, spans[1], Mux(second.acc, acc, act)),
            (layer.output_stage | layer.add) == ~second.acc,
            _fused_add(m, layer, second.addr, spans[1], act, acc), *window_ok,
            Mux(layer.pool, layer.output_stage & (second.width <= POOL_LINE_WORDS),
                ~layer.pool_odd_height & ~layer.pool_odd_width),
            layer.positions == positions, layer.filters == second.channels,
            layer.row_blocks == second.blocks,
            (layer.col_blocks != 0) & (layer.col_blocks <= 0xFFFF),
            (layer.rounds != 0) & (layer.rounds <= gather_rounds),
            (layer.images != 0) & (layer.images <= MAX_STEP_IMAGES),
            _fits(m, "layer_weights", layer.weights, weight_span, self.image_words),
            Mux(layer.images == 1, (layer.src_stride == 0) & (layer.dst_stride == 0),
                (first.words < 1 << 16) & (second.words < 1 << 16)),
            (layer.images == 1) | ((layer.src_stride == first.words[:16])
                                   & (layer.dst_stride == second.words[:16])),
            (layer.col_blocks == 1) | (psum_span <= self.psum_size)]
        pool_ok = [
            *region_ok, ~second.acc,
            _fits(m, "pool_src", first.addr, first.words, act),
            _fits(m, "pool_dst", second.addr, second.words, act),
            second.channels == first.channels, *window_ok, pool.blocks == first.blocks]
        same_map = [first.channels == second.channels, second.channels == third.channels,
                    first.height == second.height, second.height == third.height,
                    first.width == second.width, second.width == third.width]
        add_ok = [
            first.ok, ~first.ext, ~first.acc, second.ok, ~second.ext, ~second.acc, third.ok,
            ~third.acc, ~third.ext, *same_map,
            (add.ma < 1 << MULTIPLIER_BITS) & (add.mb < 1 << MULTIPLIER_BITS),
            add.words == third.words,
            _fits(m, "add_a", first.addr, third.words, act),
            _fits(m, "add_b", second.addr, third.words, act),
            _fits(m, "add_dst", third.addr, third.words, act)]
        transfer_ok = [
            Const(p["ext_limit"] != 0), first.ok, ~first.acc, ~first.ext,
            transfer.words == first.words,
            _fits(m, "transfer", first.addr, first.words, act),
            _fits(m, "transfer_ext", transfer.ext_addr, first.words, p["ext_limit"])]
        conditions = {Op.LAYER: layer_ok, Op.POOL: pool_ok, Op.ADD: add_ok,
                      Op.LOAD: transfer_ok, Op.STORE: transfer_ok}
        # Every bit outside the operation's fields (its flags, its unused words) is 0,
        # tested a word at a time.
        bits = d.as_value()
        verdicts = []
        for o, fields in STEPS.items():
            unused = unused_bits(fields, STEP_WORDS)
            clean = [(bits.word_select(j, 32) & mask) == 0
                     for j, mask in enumerate(unused) if mask]
            ok = _conjunction(m, f"step_{o.name.lower()}", conditions[o] + clean)
            verdicts.append((op == o) & ok)
        m.d.sync += self.step_bad.eq(~Cat(*verdicts).any())


def _fused_add(m, layer, dst, span, act, acc):
    """A layer's fused add: without an output stage and pooling, its operand inside the
    activation or accumulator buffer (``act``, ``acc`` words; offset binary only as
    activations) for every image (``span`` words from it, as the result at ``dst``), and
    as activations the result's own words or apart from them, each end registered a
    stage ahead; without the add, its fields 0."""
    b_end, dst_end = Signal(34, name="fused_add_b_end"), Signal(34, name="layer_dst_end")
    m.d.sync += [b_end.eq(layer.add_b + span), dst_end.eq(dst + span)]
    in_acc = layer.add_b_acc
    return Mux(
        layer.add,
        ~layer.output_stage & ~layer.pool & ~(in_acc & layer.add_signed_b)
        & _fits(m, "fused_add", layer.add_b, span, Mux(in_acc, acc, act))
        & (in_acc | (layer.add_b == dst) | (layer.add_b >= dst_end) | (dst >= b_end)),
        (layer.add_b == 0) & ~in_acc & (layer.add_ma == 0) & (layer.add_mb == 0)
        & ~layer.add_signed_b & ~layer.add_signed_out)


def _fits(m, name, addr, words, size):
    """Whether ``addr + words <= size``, as a comparison of registers: ``size - addr``
    is registered a stage ahead (the address's word lands before the extent)."""
    room = Signal(signed(max(len(Value.cast(size)), len(addr)) + 2), name=f"{name}_room")
    m.d.sync += room.eq(size - addr)
    return words <= room


def _conjunction(m, name, conditions):
    """Whether every one of ``conditions`` holds, two registered stages later: each
    condition registered, then their conjunction."""
    held = Signal(len(conditions), name=f"{name}_conditions")
    m.d.sync += [held[j].eq(c) for j, c in enumerate(conditions)]
    every = Signal(name=f"{name}_ok")
    m.d.sync += every.eq(held.all())
    return every


def _mask(words):
    """The integer of ``words`` (32-bit masks, the first lowest)."""
    return sum(w << 32 * j for j, w in enumerate(words))
