"""The network engine's post-processing unit: pooling and the residual add of two
activation operands on words of the activation buffer, every lane at once (an add of a
layer's accumulators is fused into the layer: ``codnn.hw.network.ResultWriter``;
docs/semantics.md sections 7 and 9)."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import ADD_PRODUCT_STEPS, MULTIPLIER_BITS, POOL_READ_STEPS
from codnn.hw.common.params import positive_int
from codnn.hw.common.delays import stage
from codnn.hw.common.multiplier import split_product
from codnn.hw.network.residual import clamp_lane, rounded_sum, signed_lane

__all__ = ["PostOp", "PostStep", "PostProcess"]

#: Steps of the add from a word's read to its write: the memory, the words, the products
#: (``ADD_PRODUCT_STEPS``: the pieces', their sum, the rounded sum), the clamp.
_ADD_STEPS = 3 + ADD_PRODUCT_STEPS


class PostOp(enum.Enum, shape=2):
    MAX_POOL = 0
    AVG_POOL = 1
    ADD = 2


def PostStep(depth):
    """A step as the unit takes it. Pooling: ``blocks`` lane blocks of a ``height x width``
    map at ``src`` to ``out_height x out_width`` at ``dst``, a ``kernel_h x kernel_w``
    window, ``stride``, the padding above and left of the map (``padding_top``,
    ``padding_left``), ``count_pad`` (an average counts padded positions).
    Add: ``words`` words of ``src`` and ``src_b`` to ``dst``, multipliers ``ma``, ``mb``;
    ``a_signed``, ``b_signed``, ``out_signed``: that operand or the result is signed, in
    offset binary."""
    address = range(depth)
    return data.StructLayout({
        "op": PostOp, "count_pad": 1, "a_signed": 1, "b_signed": 1, "out_signed": 1,
        "src": address, "src_b": address, "dst": address,
        "blocks": unsigned(16), "words": unsigned(17), "height": unsigned(16),
        "width": unsigned(16), "out_height": unsigned(16), "out_width": unsigned(16),
        "kernel_h": unsigned(16), "kernel_w": unsigned(16), "stride": unsigned(4),
        "padding_top": unsigned(4), "padding_left": unsigned(4),
        "ma": unsigned(MULTIPLIER_BITS),
        "mb": unsigned(MULTIPLIER_BITS)})


class _State(enum.Enum, shape=4):
    IDLE = 0
    WINDOW = 1          # reading a window's words
    SETTLE = 2          # the window's last words land and reach the accumulators
    ROUND = 3           # an average's sum plus half its divisor
    DIVIDE = 4          # an average's quotient, a bit a cycle
    WRITE = 5
    ADD = 6
    SETUP = 7           # a pooling step's first window, from the products of its sizes


class _PoolRegisters:
    """Pooling's registers in the post-processing unit: the lane ``block``, the output
    position (``oy``, ``ox``), the window position (``ky``, ``kx``) and the window's
    top-left in the map (``wy``, ``wx``); ``plane`` the block's first word, ``window``
    the window's top-left word, ``row_window`` the row's first window's; the products of
    the step's sizes, registered as it starts (``plane_step`` height x width,
    ``row_step`` stride x width, ``corner`` top x width + left, ``window_size``
    kernel_h x kernel_w, ``pair_jump`` 2 x width - kernel_w + 1: no multiplier is in
    front of the position registers); the words read (``cursor`` and ``cursor_b``, a
    row below it); ``out_addr``; ``inside_count`` (positions inside the map), ``settle``
    (cycles in SETTLE). A read's words land a cycle after it is issued (``issued``),
    taken where they lie inside the map; the window's first reads start its lanes
    afresh (``first``); its map position (``y``, ``x``) and whether its second row is
    in the window (``below``) are registered as it is issued. Each lane's accumulator
    (``acc``); ``ends``, a max window's write ``POOL_READ_STEPS + 2`` cycles after its
    last reads; an average's quotient, a bit a cycle (``divisor``, ``bit``,
    ``quotient``)."""

    def __init__(self, lanes, data_bits, depth):
        span = signed(24)
        self.block, self.oy, self.ox = (Signal(16, name=n) for n in ("block", "oy", "ox"))
        self.ky, self.kx = Signal(16, name="ky"), Signal(16, name="kx")
        self.wy, self.wx = Signal(span, name="window_y"), Signal(span, name="window_x")
        self.plane, self.window = Signal(span, name="plane"), Signal(span, name="window")
        self.row_window = Signal(span, name="row_window")
        self.plane_step, self.row_step = Signal(32, name="plane_step"), Signal(24, name="row_step")
        self.corner, self.window_size = Signal(24, name="corner"), Signal(32, name="window_size")
        self.pair_jump = Signal(24, name="pair_jump")
        self.cursor, self.cursor_b = Signal(span, name="cursor"), Signal(span, name="cursor_b")
        self.out_addr = Signal(range(depth), name="out_addr")
        self.inside_count = Signal(16, name="inside_count")
        self.settle = Signal(range(POOL_READ_STEPS + 1), name="settle")
        self.issued, self.first = Signal(name="issued"), Signal(name="first_reads")
        self.y, self.x = Signal(span, name="read_y"), Signal(span, name="read_x")
        self.below = Signal(name="read_below")
        self.acc = [Signal(data_bits + 16, name=f"acc_l{i}") for i in range(lanes)]
        self.ends = Signal(POOL_READ_STEPS + 2, name="max_ends")
        self.divisor = Signal(16, name="divisor")
        self.bit = Signal(range(data_bits), name="quotient_bit")
        self.quotient = [Signal(data_bits, name=f"quotient_l{i}") for i in range(lanes)]


class PostProcess(wiring.Component):
    """Pooling and the residual add over an activation buffer of ``depth`` words of
    ``lanes`` ``data_bits``-bit lanes, read through ``read`` (two ports, data a cycle after
    the address) and written through ``write``.

    A pulse on ``start`` (while not ``busy``) samples ``step`` and runs it:

    - max or average pooling: for each lane block, output row and column, the window's
      positions are visited two rows at a time (a position of each, one through each
      read port, a cycle), the words inside the map read, and each lane takes the max, or
      the sum ``s`` and then ``(s + n // 2) // n`` (``n`` the window's size with
      ``count_pad``, else its positions inside the map), a quotient bit a cycle; the
      result word is written at ``dst + (block * out_height + oy) * out_width + ox``.
      A max window's reads follow the previous window's without a gap (its word is
      written four cycles after its last reads). Global average pooling is the ``height x
      width`` window.
    - add: word ``k`` of ``src`` and of ``src_b`` (read together) give ``clamp((a * ma + b
      * mb + 2**15) >> 16, 0, 2**data_bits - 1)`` per lane, written six cycles later to
      ``dst + k`` (``dst`` may be ``src`` or ``src_b``); signed operands and a signed
      result are offset binary (``codnn.golden.network.residual_add``).

    Cycles per step (``busy`` high from the edge that takes ``start``): pooling,
    ``codnn.golden.network_program.pool_unit_cycles``: with ``v = kernel_w *
    ceil(kernel_h / 2)`` cycles of reads a window, max takes ``1 + words * v + 4`` and
    average ``1 + words * (v + data_bits + 5)`` (a read's words reach the lanes'
    accumulators ``POOL_READ_STEPS``, 2, cycles after they land); add, ``words + 3 +
    ADD_PRODUCT_STEPS`` (``words + 6``).

    Parameters
    ----------
    lanes, depth, data_bits : int

    Attributes
    ----------
    step : In(PostStep(depth))
    start : In(1)
    busy : Out(1)
    read : Out(ArrayLayout(range(depth), 2)); read_data : In(ArrayLayout(lanes * data_bits, 2))
    write : Out(StructLayout({"addr", "data", "en"}))
    """

    def __init__(self, *, lanes, depth, data_bits=8):
        for value, what in ((lanes, "Lane count"), (depth, "Buffer depth"),
                            (data_bits, "Data width")):
            positive_int(value, what)
        self._lanes, self._depth, self._data_bits = lanes, depth, data_bits
        super().__init__({
            "step": In(PostStep(depth)),
            "start": In(1),
            "busy": Out(1),
            "read": Out(data.ArrayLayout(range(depth), 2)),
            "read_data": In(data.ArrayLayout(unsigned(lanes * data_bits), 2)),
            "write": Out(data.StructLayout({"addr": range(depth),
                                            "data": unsigned(lanes * data_bits), "en": 1})),
        })

    lanes = property(lambda self: self._lanes, doc="Lanes per word.")
    depth = property(lambda self: self._depth, doc="Words of the buffer.")

    def elaborate(self, platform):
        m = Module()
        step = Signal.like(self.step, name="post_step")
        state = Signal(_State)
        m.d.comb += self.busy.eq(state != _State.IDLE)
        pool = self._pool_registers(m, step)
        index = Signal(17, name="add_index")        # the add's word
        with m.Switch(state):
            with m.Case(_State.IDLE):
                with m.If(self.start):
                    m.d.sync += step.eq(self.step)
                    with m.If(self.step.op == PostOp.ADD):
                        m.d.sync += [index.eq(0), state.eq(_State.ADD)]
                    with m.Else():
                        g = self.step
                        m.d.sync += [pool.plane_step.eq(g.height * g.width),
                                     pool.row_step.eq(g.stride * g.width),
                                     pool.pair_jump.eq((g.width << 1) - g.kernel_w + 1),
                                     pool.corner.eq(g.padding_top * g.width
                                                    + g.padding_left),
                                     pool.window_size.eq(g.kernel_h * g.kernel_w),
                                     state.eq(_State.SETUP)]
            self._pool_states(m, step, state, pool)
            with m.Case(_State.ADD):
                m.d.comb += [self.read[0].eq(step.src + index),
                             self.read[1].eq(step.src_b + index)]
                with m.If(index == step.words - 1):
                    m.d.sync += state.eq(_State.IDLE)
                m.d.sync += index.eq(index + 1)
        self._pool_write(m, step, state, pool)
        self._add_pipeline(m, step, state, index)
        return m

    def _pool_registers(self, m, step):
        """Pooling's registers (``_PoolRegisters``) and the reads' path: each read's
        words, registered as they land, reach each lane's accumulator
        ``POOL_READ_STEPS`` cycles later."""
        R, D = self._lanes, self._data_bits
        k = _PoolRegisters(R, D, self._depth)
        height_less_one = stage(m, step.height - 1, "height_less_one")
        in_row = (k.x >= 0) & (k.x < step.width)
        inside = (k.y >= 0) & (k.y < step.height) & in_row
        inside_b = (k.y >= -1) & (k.y < height_less_one) & in_row & k.below
        with m.If(k.issued):
            m.d.sync += k.inside_count.eq(k.inside_count + inside + inside_b)
        # The words are read whether or not they lie inside the map, so no comparison
        # stands in front of the read ports.
        m.d.comb += [self.read[0].eq(k.cursor), self.read[1].eq(k.cursor_b)]
        # POOL_READ_STEPS (2) steps: the words as they land, registered (nothing between
        # the memories and a register); each lane's pair of them (the larger, or the sum);
        # then the lane's accumulator takes the pair.
        words = [stage(m, self.read_data[p], f"pool_word{p}") for p in range(2)]
        arrived = [stage(m, inside, "arrived"), stage(m, inside_b, "arrived_b")]
        issued = [k.issued]
        first = [k.first]
        for j in range(POOL_READ_STEPS):
            issued.append(stage(m, issued[-1], f"issued_{j + 1}", reset_less=False))
            first.append(stage(m, first[-1], f"first_reads_{j + 1}"))
        is_max = step.op == PostOp.MAX_POOL
        for i, a in enumerate(k.acc):
            l0, l1 = (Mux(arrived[p], words[p].word_select(i, D), 0) for p in range(2))
            pair = stage(m, Mux(is_max, Mux(l0 > l1, l0, l1), l0 + l1), f"pool_pair_l{i}")
            start = Mux(first[-1], 0, a)
            # A max window's values and maxima are data_bits wide: compared at that width.
            larger = Mux(pair[:D] > start[:D], pair, start)
            with m.If(issued[-1]):
                m.d.sync += a.eq(Mux(is_max, larger, start + pair))
        m.d.sync += [k.issued.eq(0), k.ends.eq(k.ends << 1)]
        return k

    def _pool_states(self, m, step, state, k):
        """SETUP, then per output position WINDOW (two words a cycle: a window row and
        the row below), SETTLE, and for an average ROUND and DIVIDE (a quotient bit a
        cycle); a max window's last reads go straight on to the next window's (its word is
        written from ``ends``), the last one's to SETTLE. Cases of ``elaborate``'s
        switch."""
        D = self._data_bits
        with m.Case(_State.SETUP):
            top_left = step.src - k.corner
            m.d.sync += [k.block.eq(0), k.oy.eq(0), k.ox.eq(0), k.wy.eq(-step.padding_top),
                         k.wx.eq(-step.padding_left), k.plane.eq(step.src),
                         k.row_window.eq(top_left), k.out_addr.eq(step.dst)]
            self._start_window(m, step, state, k, top_left)
        with m.Case(_State.WINDOW):
            m.d.sync += [k.issued.eq(1), k.first.eq((k.ky == 0) & (k.kx == 0)),
                         k.y.eq(k.wy + k.ky), k.x.eq(k.wx + k.kx),
                         k.below.eq(k.ky + 1 < step.kernel_h)]
            with m.If(k.kx == step.kernel_w - 1):
                m.d.sync += [k.kx.eq(0), k.ky.eq(k.ky + 2),
                             k.cursor.eq(k.cursor + k.pair_jump),
                             k.cursor_b.eq(k.cursor_b + k.pair_jump)]
                with m.If(k.ky + 2 >= step.kernel_h):
                    m.d.sync += k.settle.eq(0)
                    with m.If(step.op == PostOp.MAX_POOL):
                        m.d.sync += k.ends[0].eq(1)
                        self._next_window(m, step, state, k, _State.SETTLE)
                    with m.Else():
                        m.d.sync += state.eq(_State.SETTLE)
            with m.Else():
                m.d.sync += [k.kx.eq(k.kx + 1), k.cursor.eq(k.cursor + 1),
                             k.cursor_b.eq(k.cursor_b + 1)]
        with m.Case(_State.SETTLE):
            m.d.sync += k.settle.eq(k.settle + 1)
            with m.If(k.settle == POOL_READ_STEPS):
                m.d.sync += state.eq(Mux(step.op == PostOp.MAX_POOL, _State.WRITE,
                                         _State.ROUND))
        with m.Case(_State.ROUND):
            n = Mux(step.count_pad, k.window_size, k.inside_count)
            m.d.sync += [k.divisor.eq(n), k.bit.eq(D - 1), state.eq(_State.DIVIDE)]
            m.d.sync += [a.eq(a + (n >> 1)) for a in k.acc]
        with m.Case(_State.DIVIDE):
            for a, q in zip(k.acc, k.quotient):
                # One subtraction: its sign says whether the divisor goes.
                rest = Signal(signed(len(a) + 1), name=f"{a.name}_rest")
                m.d.comb += rest.eq(a - (k.divisor << k.bit))
                take = ~rest[-1]
                m.d.sync += q.eq(Mux(take, q | (1 << k.bit), q))
                with m.If(take):
                    m.d.sync += a.eq(rest)
            with m.If(k.bit == 0):
                m.d.sync += state.eq(_State.WRITE)
            with m.Else():
                m.d.sync += k.bit.eq(k.bit - 1)

    def _start_window(self, m, step, state, k, window):
        """A window from word ``window`` (its top-left) starts reading."""
        m.d.sync += [k.window.eq(window), k.cursor.eq(window),
                     k.cursor_b.eq(window + step.width), k.ky.eq(0), k.kx.eq(0),
                     k.inside_count.eq(0), state.eq(_State.WINDOW)]

    def _next_window(self, m, step, state, k, end):
        """The next output position, row or block, its window started; after the last
        block, state ``end`` instead."""
        with m.If(k.ox == step.out_width - 1):
            row_start = k.row_window + k.row_step
            m.d.sync += [k.ox.eq(0), k.oy.eq(k.oy + 1), k.wx.eq(-step.padding_left),
                         k.wy.eq(k.wy + step.stride), k.row_window.eq(row_start)]
            with m.If(k.oy == step.out_height - 1):
                next_plane = k.plane + k.plane_step
                first = next_plane - k.corner
                m.d.sync += [k.oy.eq(0), k.wy.eq(-step.padding_top), k.block.eq(k.block + 1),
                             k.plane.eq(next_plane), k.row_window.eq(first)]
                self._start_window(m, step, state, k, first)
                with m.If(k.block == step.blocks - 1):
                    m.d.sync += state.eq(end)
            with m.Else():
                self._start_window(m, step, state, k, row_start)
        with m.Else():
            m.d.sync += [k.ox.eq(k.ox + 1), k.wx.eq(k.wx + step.stride)]
            self._start_window(m, step, state, k, k.window + step.stride)

    def _pool_write(self, m, step, state, k):
        """An output word: a max window's maxima four cycles after its last reads, an
        average's quotients in WRITE (then the next window, or the end); WRITE ends a max
        step (its last word is written then)."""
        R, D = self._lanes, self._data_bits
        average = step.op == PostOp.AVG_POOL
        result = Signal(R * D, name="result")
        for i in range(R):
            m.d.comb += result.word_select(i, D).eq(
                Mux(average, k.quotient[i], k.acc[i][:D]))
        in_write = state == _State.WRITE
        with m.If(k.ends[-1] | (in_write & average)):
            m.d.comb += [self.write.addr.eq(k.out_addr), self.write.data.eq(result),
                         self.write.en.eq(1)]
            m.d.sync += k.out_addr.eq(k.out_addr + 1)
        with m.If(in_write):
            m.d.sync += [q.eq(0) for q in k.quotient]
            with m.If(average):
                self._next_window(m, step, state, k, _State.IDLE)
            with m.Else():
                m.d.sync += state.eq(_State.IDLE)

    def _add_pipeline(self, m, step, state, index):
        """The add's pipeline runs on after its last read (the state is IDLE by then; a new
        step waits for busy, which covers it): the words read (a cycle after their
        address), registered; the two products (``split_product``, two steps); their
        sum, rounded; clamped; the write."""
        R, D = self._lanes, self._data_bits
        add_valid = Signal(_ADD_STEPS, name="add_valid")
        sums = Signal(R * D, name="add_sums")
        add_dst = [Signal(range(self._depth), name=f"add_dst_{i}") for i in range(_ADD_STEPS)]
        reading = state == _State.ADD
        m.d.sync += add_valid.eq(Cat(reading, add_valid[:-1]))
        m.d.sync += add_dst[0].eq(step.dst + index)
        m.d.sync += [add_dst[i].eq(add_dst[i - 1]) for i in range(1, len(add_dst))]
        for i in range(R):
            a = stage(m, self.read_data[0].word_select(i, D), f"add_a_l{i}")
            b = stage(m, self.read_data[1].word_select(i, D), f"add_b_l{i}")
            pa = split_product(m, signed_lane(a, step.a_signed), step.ma, f"add_l{i}_pa")
            pb = split_product(m, signed_lane(b, step.b_signed), step.mb, f"add_l{i}_pb")
            total = rounded_sum(m, pa, pb, f"add_l{i}")
            m.d.sync += sums.word_select(i, D).eq(clamp_lane(total, step.out_signed, D))
        with m.If(add_valid[-1]):
            m.d.comb += [self.write.addr.eq(add_dst[-1]), self.write.data.eq(sums),
                         self.write.en.eq(1)]
        with m.If(add_valid.any()):
            m.d.comb += self.busy.eq(1)
