"""The network engine's post-processing unit: pooling and the residual add on words of the
activation buffer, every lane at once; an add of a layer's raw accumulators a group of
lanes at a time (docs/semantics.md sections 7 and 9)."""

from dataclasses import dataclass

from amaranth.hdl import Array, C, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import (ADD_PRODUCT_STEPS, MULTIPLIER_BITS,
                                          POOL_READ_STEPS, acc_add_groups, acc_add_lanes,
                                          mixed_add_groups, mixed_add_lanes)
from codnn.hw.common.params import positive_int
from codnn.hw.common.delays import delay, delay_line, stage
from codnn.hw.common.multiplier import SPLIT_PRODUCT_STEPS, split_product
from codnn.hw.network.residual import clamp_lane, rounded_sum, signed_lane

__all__ = ["PostOp", "PostStep", "PostProcess"]

#: Steps of the add from a word's read to its write: the memory, the words, the products
#: (``ADD_PRODUCT_STEPS``: the pieces', their sum, the rounded sum), the clamp.
_ADD_STEPS = 3 + ADD_PRODUCT_STEPS
#: Bits of an accumulator-buffer lane.
_ACC_BITS = 32


class PostOp(enum.Enum, shape=2):
    MAX_POOL = 0
    AVG_POOL = 1
    ADD = 2


def PostStep(depth, acc_depth=1):
    """A step as the unit takes it. Pooling: ``blocks`` lane blocks of a ``height x width``
    map at ``src`` to ``out_height x out_width`` at ``dst``, a ``kernel_h x kernel_w``
    window, ``stride``, the padding above and left of the map (``padding_top``,
    ``padding_left``), ``count_pad`` (an average counts padded positions).
    Add: ``words`` words of ``src`` and ``src_b`` to ``dst``, multipliers ``ma``, ``mb``;
    ``a_acc`` (``b_acc``): ``src`` (``src_b``) is in the accumulator buffer; ``a_signed``,
    ``b_signed``, ``out_signed``: that operand (an activation) or the result is signed,
    in offset binary."""
    address = range(max(depth, acc_depth))
    return data.StructLayout({
        "op": PostOp, "count_pad": 1, "a_acc": 1, "b_acc": 1,
        "a_signed": 1, "b_signed": 1, "out_signed": 1,
        "src": address, "src_b": address, "dst": range(depth),
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
    WIDE = 8            # the add of accumulators (``_wide_add``)
    MIXED = 9           # the add of accumulators and activations (``_wide_add``)


@dataclass(frozen=True)
class _Words:
    """The add of two accumulator operands' current word: ``valid``, and its operands'
    lanes ``a`` and ``b`` (32 bits each), shifted a group at a time."""

    valid: Signal
    a: Signal
    b: Signal


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
    - an add with an operand in the accumulator buffer (``a_acc`` or ``b_acc``: 32-bit
      two's complement lanes, read through ``acc_read``): the same sum. With both
      operands accumulators, word ``k`` of each read one after the other (while the word
      before goes through the products), then ``acc_add_lanes(lanes)`` lanes a cycle
      through as many pairs of products; with the other operand activations, both read
      together, then ``mixed_add_lanes(lanes)`` lanes a cycle, each lane's accumulator
      through one of the same products and its activation through the lane-parallel
      add's.

    Cycles per step (``busy`` high from the edge that takes ``start``): pooling,
    ``codnn.golden.network_program.pool_unit_cycles``: with ``v = kernel_w *
    ceil(kernel_h / 2)`` cycles of reads a window, max takes ``1 + words * v + 4`` and
    average ``1 + words * (v + data_bits + 5)`` (a read's words reach the lanes'
    accumulators ``POOL_READ_STEPS``, 2, cycles after they land); add, ``words + 3 +
    ADD_PRODUCT_STEPS`` (``words + 6``); add of accumulators,
    ``codnn.golden.network_program.acc_add_cycles``.

    Parameters
    ----------
    lanes, depth, data_bits : int
    acc_depth : int
        Words of the accumulator buffer.

    Attributes
    ----------
    step : In(PostStep(depth, acc_depth))
    start : In(1)
    busy : Out(1)
    read : Out(ArrayLayout(range(depth), 2)); read_data : In(ArrayLayout(lanes * data_bits, 2))
    acc_read : Out(range(acc_depth)); acc_read_data : In(lanes * 32)
    write : Out(StructLayout({"addr", "data", "en"}))
    """

    def __init__(self, *, lanes, depth, data_bits=8, acc_depth=1):
        for value, what in ((lanes, "Lane count"), (depth, "Buffer depth"),
                            (data_bits, "Data width"), (acc_depth, "Accumulator depth")):
            positive_int(value, what)
        self._lanes, self._depth, self._data_bits = lanes, depth, data_bits
        super().__init__({
            "step": In(PostStep(depth, acc_depth)),
            "start": In(1),
            "busy": Out(1),
            "read": Out(data.ArrayLayout(range(depth), 2)),
            "read_data": In(data.ArrayLayout(unsigned(lanes * data_bits), 2)),
            "acc_read": Out(range(acc_depth)),
            "acc_read_data": In(lanes * _ACC_BITS),
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
                        # The add's kind is its state, so that no step flag stands
                        # between the state and the wide operands' enables.
                        a_acc, b_acc = self.step.a_acc, self.step.b_acc
                        m.d.sync += [index.eq(0), state.eq(Mux(
                            a_acc | b_acc, Mux(a_acc ^ b_acc, _State.MIXED, _State.WIDE),
                            _State.ADD))]
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
        act_products = self._add_pipeline(m, step, state, index)
        self._wide_add(m, step, state, act_products)
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
        sum, rounded; clamped; the write. Returns each lane's product of its second
        operand (``read[1]``'s word registered, two steps), which the add of
        accumulators and activations takes for its activation operand (its multiplier
        and offset then that operand's: ``ma`` and ``a_signed`` when ``b`` is the
        accumulators)."""
        R, D = self._lanes, self._data_bits
        add_valid = Signal(_ADD_STEPS, name="add_valid")
        sums = Signal(R * D, name="add_sums")
        add_dst = [Signal(range(self._depth), name=f"add_dst_{i}") for i in range(_ADD_STEPS)]
        reading = state == _State.ADD
        m.d.sync += add_valid.eq(Cat(reading, add_valid[:-1]))
        m.d.sync += add_dst[0].eq(step.dst + index)
        m.d.sync += [add_dst[i].eq(add_dst[i - 1]) for i in range(1, len(add_dst))]
        mb = Mux(step.b_acc, step.ma, step.mb)
        b_signed = Mux(step.b_acc, step.a_signed, step.b_signed)
        products = []
        for i in range(R):
            a = stage(m, self.read_data[0].word_select(i, D), f"add_a_l{i}")
            b = stage(m, self.read_data[1].word_select(i, D), f"add_b_l{i}")
            pa = split_product(m, signed_lane(a, step.a_signed), step.ma, f"add_l{i}_pa")
            pb = split_product(m, signed_lane(b, b_signed), mb, f"add_l{i}_pb")
            products.append(pb)
            total = rounded_sum(m, pa, pb, f"add_l{i}")
            m.d.sync += sums.word_select(i, D).eq(clamp_lane(total, step.out_signed, D))
        with m.If(add_valid[-1]):
            m.d.comb += [self.write.addr.eq(add_dst[-1]), self.write.data.eq(sums),
                         self.write.en.eq(1)]
        with m.If(add_valid.any()):
            m.d.comb += self.busy.eq(1)
        return products

    def _wide_add(self, m, step, state, act_products):
        """The add with an operand in the accumulator buffer.

        Both operands accumulators (state WIDE): ``acc_add_lanes(lanes)`` lanes a cycle
        through as many pairs of 32 x 24-bit products; a word's operands are read one
        after the other (through ``acc_read``) into the next word's registers while the
        current word's lanes go through the products, a group of lanes a cycle.

        One operand activations (``mixed``, state MIXED): twice as many lanes a cycle
        (``mixed_add_lanes``) through the same products, one for each lane's
        accumulator, beside the lane-parallel add's product of the lane's activation
        (``act_products``); a word's two operands are read together (``acc_read`` and
        ``read[1]``) and held for its ``mixed_add_groups`` cycles of groups, while the
        activation's products follow them.

        Each group's clamped sums shift into the result word, written
        ``ADD_PRODUCT_STEPS + 1`` cycles after its last group.
        """
        R, D = self._lanes, self._data_bits
        P, G = acc_add_lanes(R), acc_add_groups(R)      # lanes a group, groups a word
        Q, H = mixed_add_lanes(R), mixed_add_groups(R)  # the same with activations
        mixed = Signal(name="wide_mixed")
        m.d.comb += mixed.eq(state == _State.MIXED)
        wide = state == _State.WIDE
        write_word = Signal(17, name="wide_write_word")    # the next word to write
        full, issuing, last_group = self._both_accumulators(m, step, wide, P, G)
        mix_issue, mix_group, mix_load, mix_lanes = self._mixed_reads(m, step, mixed, Q, H)
        # The products: in pairs (a lane's two accumulators) or one a lane (its
        # accumulator; the activation's product is the lane-parallel add's). Their
        # operands are registers alone: the current word's first lanes, into which an add
        # with activations loads its group's accumulators (lane u into product u), and the
        # step's multipliers, registered every cycle (the step holds still from its start,
        # and its first products come cycles after).
        m_acc = Mux(step.a_acc, step.ma, step.mb)
        group_at_product = delay(m, mix_group, SPLIT_PRODUCT_STEPS, "mixed_product_group")
        products = []
        for u in range(2 * P):
            half = full.a if u % 2 == 0 else full.b
            with m.If(mix_load):
                m.d.sync += half.word_select(u // 2, _ACC_BITS).eq(mix_lanes[u])
            factor = Signal.like(step.ma, name=f"wide_{u}_factor")
            m.d.sync += factor.eq(Mux(mixed, m_acc, step.ma if u % 2 == 0 else step.mb))
            products.append(split_product(m, half.word_select(u // 2, _ACC_BITS).as_signed(),
                                          factor, f"wide_{u}_p"))
        clamped_pairs, clamped_lanes = [], []
        for u in range(Q):
            act = Array(act_products[g * Q + u] if g * Q + u < R else C(0, signed(2))
                        for g in range(H))[group_at_product]
            pair = products[u + 1] if u % 2 == 0 else C(0, signed(2))
            total = rounded_sum(m, products[u], Mux(mixed, act, pair), f"wide_{u}")
            clamped_lanes.append(clamp_lane(total, step.out_signed, D))
            if u % 2 == 0:
                clamped_pairs.append(clamped_lanes[-1])
        # Each group's sums, ``ADD_PRODUCT_STEPS`` cycles after it is taken, shift into
        # the result word a cycle later.
        results = []
        for lanes, groups, taken, clamped, name in (
                (P, G, issuing, clamped_pairs, "wide"),
                (Q, H, mix_issue, clamped_lanes, "mixed")):
            result = Signal(groups * lanes * D, name=f"{name}_result")
            with m.If(delay(m, taken, ADD_PRODUCT_STEPS, f"{name}_summed")):
                m.d.sync += result.eq(Cat(result[lanes * D:], *clamped))
            results.append(result[:R * D])
        mix_last = mix_issue & (mix_group == H - 1)
        # A word is whole a cycle after its last group's sums are clamped: written then.
        done = delay_line(m, Mux(mixed, mix_last, last_group), ADD_PRODUCT_STEPS + 1,
                          "wide_done", reset_less=False)[-1]
        # Which result a word's write takes, from a register (the state holds for the
        # add's whole step, and its first write comes cycles after its start).
        mixed_words = stage(m, mixed, "wide_mixed_words")
        with m.If(done):
            m.d.comb += [self.write.addr.eq(step.dst + write_word),
                         self.write.data.eq(Mux(mixed_words, results[1], results[0])),
                         self.write.en.eq(1)]
            m.d.sync += write_word.eq(write_word + 1)
            with m.If(write_word == step.words - 1):
                m.d.sync += state.eq(_State.IDLE)
        with m.If(state == _State.IDLE):
            m.d.sync += write_word.eq(0)

    def _both_accumulators(self, m, step, wide, P, G):
        """The add of two accumulator operands (``wide``: in WIDE): each word's operands
        read one after the other through ``acc_read`` into the next word's registers
        (``G * P`` 32-bit lanes, the last group's spare lanes 0), moved into the current
        word's (``full.a``, ``full.b``) once its last group goes, which shift ``P`` lanes
        a group. Returns ``full`` (with ``a`` and ``b``), ``issuing`` (a group's lanes go
        into the products) and ``last_group``."""
        R = self._lanes
        operand = Cat(self.acc_read_data, C(0, (G * P - R) * _ACC_BITS))

        width = G * P * _ACC_BITS
        full = _Words(Signal(name="wide_full"), Signal(width, name="wide_a"),
                      Signal(width, name="wide_b"))
        a_next, b_next = Signal(width, name="wide_a_next"), Signal(width, name="wide_b_next")
        next_full = Signal(name="wide_next_full")
        group = Signal(range(G), name="wide_group")
        phase = Signal(range(3), name="wide_read_phase")   # a's read, b's read, b lands
        read_word = Signal(17, name="wide_read_word")      # the next word to read
        # ``full.valid`` and ``next_full`` are set in WIDE only and cleared outside it (the
        # state leaves WIDE after its last word's write, when both are clear already), so
        # the wide registers' loads and shifts test those registers alone, not the state.
        issuing = full.valid
        last_group = issuing & (group == G - 1)
        with m.If(issuing):
            m.d.sync += [full.a.eq(full.a >> (P * _ACC_BITS)),
                         full.b.eq(full.b >> (P * _ACC_BITS)), group.eq(group + 1)]
            with m.If(group == G - 1):
                m.d.sync += [full.valid.eq(0), group.eq(0)]
        # The next word's operands, read once its registers are free.
        with m.If(wide):
            with m.Switch(phase):
                with m.Case(0):
                    with m.If(~next_full & (read_word != step.words)):
                        m.d.comb += self.acc_read.eq(step.src + read_word)
                        m.d.sync += phase.eq(1)
                with m.Case(1):
                    m.d.comb += self.acc_read.eq(step.src_b + read_word)
                    m.d.sync += [a_next.eq(operand), phase.eq(2)]
                with m.Case(2):
                    m.d.sync += [b_next.eq(operand),
                                 next_full.eq(1), read_word.eq(read_word + 1), phase.eq(0)]
        with m.If(next_full & (~full.valid | last_group)):
            m.d.sync += [full.a.eq(a_next), full.b.eq(b_next), full.valid.eq(1),
                         next_full.eq(0), group.eq(0)]
        with m.If(~wide):
            m.d.sync += [phase.eq(0), read_word.eq(0), full.valid.eq(0), next_full.eq(0),
                         group.eq(0)]
        return full, issuing, last_group

    def _mixed_reads(self, m, step, mixed, Q, H):
        """The add of accumulators and activations (``mixed``: in MIXED): word ``k``'s
        accumulators and activations read together (``acc_read``, ``read[1]``), the
        addresses held for the word's ``H`` groups; a cycle after each read (``load``)
        its group's ``Q`` accumulator lanes (``lanes``) go into the products' operand
        registers. Returns ``issue`` (those operands valid: ``SPLIT_PRODUCT_STEPS``
        cycles later their products, and the activations' of the same read, are ready),
        the group, ``load`` and ``lanes``."""
        R = self._lanes
        word = Signal(17, name="mixed_read_word")
        group = Signal(range(H), name="mixed_read_group")
        reading = Signal(name="mixed_reading")
        m.d.comb += reading.eq(mixed & (word != step.words))
        with m.If(reading):
            m.d.comb += [self.acc_read.eq(Mux(step.a_acc, step.src, step.src_b) + word),
                         self.read[1].eq(Mux(step.a_acc, step.src_b, step.src) + word)]
            m.d.sync += group.eq(Mux(group == H - 1, 0, group + 1))
            with m.If(group == H - 1):
                m.d.sync += word.eq(word + 1)
        with m.If(~mixed):
            m.d.sync += [word.eq(0), group.eq(0)]
        landed = stage(m, reading, "mixed_landed", reset_less=False)
        landed_group = stage(m, group, "mixed_landed_group")
        lanes = [self.acc_read_data.word_select(k, _ACC_BITS) if k < R
                 else C(0, _ACC_BITS) for k in range(H * Q)]
        group_lanes = [Array(lanes[g * Q + u] for g in range(H))[landed_group]
                       for u in range(Q)]
        issue = stage(m, landed, "mixed_issue", reset_less=False)
        return issue, stage(m, landed_group, "mixed_issue_group"), landed, group_lanes
