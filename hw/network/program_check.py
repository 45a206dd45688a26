"""The network engine's program checks: whether a program's header and each step's
descriptor are ones the engine runs (docs/semantics.md section 9, "What the engine
refuses"; ``codnn.golden.network_program.decode_program`` with an engine decides the
same).

The header and the descriptor are registers that the sequencer fills word by word, in
order, each word at its place (``codnn.hw.network.NetworkEngine``). The checks' products
(a region's words, ``ceil(C / rows) * H * W``; images times them; the window's and the
weights' extents) are registered stages that run every cycle on what the registers hold:
each stage's inputs arrive early enough that it holds the current step's value when the
verdict is read (``header_bad`` the cycle after the header's last word lands,
``step_bad`` the cycle after the descriptor's last word lands), so the checks cost no
cycle. The latest operands: a layer's images (word 14), one stage before the verdict;
its window (word 13), two; the weights' counts (words 8, 9), two; an add's result
region (words 8, 9), three.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import (GATHER_PORTS, HEADER_WORDS, MAGIC, MAX_KERNEL,
                                          MAX_SIDE, MAX_STEP_IMAGES, MAX_STRIDE,
                                          MULTIPLIER_BITS, STEP_WORDS, VERSION, EngineConfig,
                                          bias_bytes, image_word, tile_bytes)
from codnn.golden.systolic import MAC_KINDS

__all__ = ["ProgramCheck", "ceil_div_constant"]

#: Operations (the descriptor's first byte) and the flag bits each has.
_LAYER, _POOL, _ADD, _LOAD, _STORE = range(5)
_FLAGS = {_LAYER: 0b1, _POOL: 0b11, _ADD: 0b111, _LOAD: 0, _STORE: 0}
#: Descriptor words each operation uses (the rest must be 0).
_USED = {_LAYER: 16, _POOL: 9, _ADD: 13, _LOAD: 6, _STORE: 6}
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


def _word(bits, k):
    return bits.word_select(k, 32)


class _Region:
    """A region's three words from word ``at``: its fields, whether they make a region
    (``ok``: one memory, a vector of 1 x 1, 1..65535 channels, a map of at least 1 x 1),
    and its words (``ceil(C / rows) * H * W``, saturated at ``2**_WORDS_BITS - 1``) from
    three registered stages."""

    def __init__(self, m, bits, at, rows, name):
        first, c, hw = _word(bits, at), _word(bits, at + 1), _word(bits, at + 2)
        self.addr, self.ext, self.vector, self.acc = first[:29], first[29], first[30], first[31]
        self.channels, self.hw = c, hw
        self.height, self.width = hw[:16], hw[16:]
        self.ok = (~(self.acc & self.ext) & ~(self.vector & (hw != (1 | 1 << 16)))
                   & (c != 0) & (c <= MAX_SIDE) & (self.height != 0) & (self.width != 0))
        multiplier, shift = ceil_div_constant(17, rows)       # C + rows - 1 < 2**17
        blocks = Signal(17, name=f"{name}_blocks")
        partial = Signal(34, name=f"{name}_blocks_h")
        full = Signal(50, name=f"{name}_words_full")
        m.d.sync += [blocks.eq(((c[:16] + rows - 1) * multiplier) >> shift),
                     partial.eq(blocks * self.height), full.eq(partial * self.width)]
        self.blocks = blocks
        self.words = Signal(_WORDS_BITS, name=f"{name}_words")
        m.d.comb += self.words.eq(Mux(full >= (1 << _WORDS_BITS) - 1,
                                      (1 << _WORDS_BITS) - 1, full))


class ProgramCheck(wiring.Component):
    """Decides whether the engine runs a program: ``header_bad`` from ``header`` (valid
    the cycle after its last word lands), ``step_bad`` from ``desc`` (likewise), with
    the header's buffer sizes and weight image words (``act_size``, ``acc_size``,
    ``psum_size``, ``image_words``) for the steps.

    Latency: none beyond the program's words (the products are ready when the verdicts
    are read). Refuses what ``codnn.golden.network_program.decode_program`` with the
    engine refuses, and nothing else.

    Parameters
    ----------
    rows, cols, alpha, mac, act_words, acc_words, psum_words : the engine's
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
                 weight_limit, ext_limit, program_words):
        self._p = dict(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=act_words,
                       acc_words=acc_words, psum_words=psum_words,
                       weight_limit=weight_limit, ext_limit=ext_limit,
                       program_words=program_words)
        super().__init__({
            "header": In(32 * HEADER_WORDS), "desc": In(32 * STEP_WORDS),
            "header_bad": Out(1), "step_bad": Out(1),
            "act_size": Out(32), "acc_size": Out(32), "psum_size": Out(32),
            "image_words": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        self._header(m)
        self._step(m)
        return m

    def _header(self, m):
        """The header: magic, version, the engine's array, widths and MAC kind, buffers of
        1 up to the engine's, a weight image the engine reaches, the input (activations
        or external memory) and output (activations or accumulators) inside them for the
        program's images."""
        p, h = self._p, self.header
        R = p["rows"]
        w = [_word(h, j) for j in range(HEADER_WORDS)]
        images = Signal(9, name="program_images")
        m.d.comb += images.eq(w[2][24:] + 1)
        m.d.comb += [self.act_size.eq(w[14]), self.acc_size.eq(w[15]),
                     self.psum_size.eq(w[16]), self.image_words.eq(w[17])]
        fixed = [(0, MAGIC), (1, VERSION), (9, R), (10, p["cols"]), (11, p["alpha"]),
                 (12, 8 | 8 << 8 | 32 << 16), (13, MAC_KINDS.index(p["mac"]))]
        steps_room = max(0, p["program_words"] - HEADER_WORDS) // STEP_WORDS
        sizes_ok = ((w[2][:24] <= steps_room) & (w[14] != 0) & (w[14] <= p["act_words"])
                    & (w[15] != 0) & (w[15] <= p["acc_words"]) & (w[16] != 0)
                    & (w[16] <= p["psum_words"]) & (w[17] <= p["weight_limit"]))
        ends = []
        for at, name, memories in ((3, "input", ("act", "ext")),
                                   (6, "output", ("act", "acc"))):
            region = _Region(m, h, at, R, f"header_{name}")
            span = Signal(_WORDS_BITS + 9, name=f"header_{name}_span")
            m.d.sync += span.eq(region.words * images)
            size = Mux(region.acc, w[15], Mux(region.ext, p["ext_limit"], w[14]))
            allowed = ((~region.acc | ("acc" in memories))
                       & (~region.ext | ("ext" in memories)))
            ends.append(region.ok & allowed & (region.addr + span <= size))
        m.d.comb += self.header_bad.eq(~(Cat(w[j] == v for j, v in fixed).all() & sizes_ok
                                         & Cat(*ends).all()))

    def _step(self, m):
        p, d = self._p, self.desc
        R, A = p["rows"], p["alpha"]
        w = [_word(d, j) for j in range(STEP_WORDS)]
        op, flags = w[0][:8], w[0][8:]
        regions = [_Region(m, d, at, R, f"step_region{i}") for i, at in
                   enumerate((1, 4, 7))]
        first, second, third = regions
        act, acc = self.act_size, self.acc_size

        def size_of(region):
            return Mux(region.acc, acc, act)

        is_layer = op == _LAYER
        # A layer's images (1 for other steps) times its regions' words.
        images = Mux(is_layer, w[14], 1)
        spans = []
        for i, region in enumerate((first, second)):
            span = Signal(_WORDS_BITS + 16, name=f"step_span{i}")
            m.d.sync += span.eq(region.words * images[:16])
            spans.append(span)

        # The window (a layer's word 13, a pooling's word 7) against the source's map and
        # the result's: out = (H + 2p - k) // s + 1, as (out - 1) * s <= H + 2p - k < out * s.
        window = Mux(op == _POOL, w[7], w[13])
        k, s, pad = window[:8], window[8:16], window[16:24]
        window_ok = Signal(name="window_ok")
        checks = []
        for axis, (side, out) in enumerate(((first.height, second.height),
                                            (first.width, second.width))):
            out_s = Signal(24, name=f"window_out_times_stride{axis}")
            m.d.sync += out_s.eq(out * s)
            room = side + 2 * pad
            checks += [room >= k, out_s - s <= room - k, room - k < out_s]
        pool_pad_ok = Mux(op == _POOL, pad < k, pad <= MAX_STRIDE)
        m.d.comb += window_ok.eq(Mux(
            k == 0, (s == 1) & (pad == 0) & (second.height == 1) & (second.width == 1),
            (k <= MAX_KERNEL) & (s >= 1) & (s <= MAX_STRIDE) & pool_pad_ok
            & Cat(*checks).all()))

        # Positions: the result's map.
        positions = Signal(32, name="dst_positions")
        m.d.sync += positions.eq(second.height * second.width)
        # The layer's weights: words 8 (row blocks), 9 (column blocks), 11 (offset).
        config = EngineConfig(rows=R, cols=p["cols"], alpha=A)
        bias_words = bias_bytes(config) // image_word(config)
        tile_words = tile_bytes(config) // image_word(config)
        per_row_block = Signal(34, name="weights_per_row_block")
        weight_span = Signal(50, name="weights_span")
        m.d.sync += [per_row_block.eq(w[9][:16] * tile_words + bias_words),
                     weight_span.eq(w[8][:16] * per_row_block)]
        # Partial sums: positions times images.
        psum_span = Signal(48, name="psum_span")
        m.d.sync += psum_span.eq(w[10] * w[14][:16])

        rounds = w[13][24:]
        gather_rounds = -(-A // GATHER_PORTS)
        layer_ok = (
            first.ok & ~first.acc & ~first.ext & second.ok & ~second.ext
            & (first.addr + spans[0] <= act) & (second.addr + spans[1] <= size_of(second))
            & (flags[0] == ~second.acc) & window_ok
            & (w[10] == positions) & (w[7] == second.channels) & (w[8] == second.blocks)
            & (w[9] != 0) & (w[9] <= 0xFFFF) & (w[12] < 256)
            & (rounds != 0) & (rounds <= gather_rounds)
            & (w[14] != 0) & (w[14] <= MAX_STEP_IMAGES)
            & (w[11] + weight_span <= self.image_words)
            & Mux(w[14] == 1, w[15] == 0,
                  (first.words < 1 << 16) & (second.words < 1 << 16)
                  & (w[15] == Cat(first.words[:16], second.words[:16])))
            & ((w[9] == 1) | (psum_span <= self.psum_size)))
        pool_ok = (
            first.ok & ~first.acc & ~first.ext & second.ok & ~second.acc & ~second.ext
            & (first.addr + spans[0] <= act) & (second.addr + spans[1] <= act)
            & (second.channels == first.channels) & (w[7][24:] == 0) & window_ok
            & (w[8] == first.blocks))
        same_map = ((first.channels == second.channels) & (second.channels == third.channels)
                    & (first.hw == second.hw) & (second.hw == third.hw))
        add_ok = (
            first.ok & ~first.ext & second.ok & ~second.ext & third.ok & ~third.acc
            & ~third.ext & ~(flags[0] & first.acc) & ~(flags[1] & second.acc) & same_map
            & (w[10] < 1 << MULTIPLIER_BITS) & (w[11] < 1 << MULTIPLIER_BITS)
            & (w[12] == third.words)
            & (first.addr + third.words <= size_of(first))
            & (second.addr + third.words <= size_of(second))
            & (third.addr + third.words <= act))
        transfer_ok = (
            Const(p["ext_limit"] != 0) & first.ok & ~first.acc & ~first.ext
            & (w[5] == first.words) & (first.addr + first.words <= act)
            & (w[4] + first.words <= p["ext_limit"]))
        known = Mux(is_layer, layer_ok, Mux(op == _POOL, pool_ok, Mux(
            op == _ADD, add_ok, Mux((op == _LOAD) | (op == _STORE), transfer_ok, 0))))
        flags_ok = Cat(Mux(op == o, (flags & ~bits) == 0, 0) for o, bits in _FLAGS.items())
        unused_ok = Cat(Mux(op == o, Cat(*w[used:]) == 0 if used < STEP_WORDS else 1, 0)
                        for o, used in _USED.items())
        m.d.comb += self.step_bad.eq(~(known & flags_ok.any() & unused_ok.any()))
