"""The network engine's result writer: each result of the array plus its partial sum,
through the output stage, to where it goes (the partial-sum buffer between column blocks,
or a layer's destination, image by image; docs/semantics.md section 9)."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import (ADD_WRITE_STEPS, MULTIPLIER_BITS, POOL_LINE_WORDS,
                                          POOL_WRITE_STEPS, RESULT_WRITE_STEPS)
from codnn.golden.systolic import REQUANT_BITS, REQUANT_KINDS, REQUANT_PRODUCT_STEPS
from codnn.hw.common.delays import delay, stage
from codnn.hw.common.multiplier import SPLIT_PRODUCT_STEPS, split_product
from codnn.hw.common.output_stage import output_stage, over_mask
from codnn.hw.common.params import positive_int
from codnn.hw.network.residual import clamp_lane, rounded_sum, signed_lane

assert SPLIT_PRODUCT_STEPS == REQUANT_PRODUCT_STEPS

__all__ = ["ResultWriter", "QUEUED_TILES"]

#: Tiles launched and not yet begun that the writer keeps (a tile's cells wait for its
#: weight bank, free once the tile two before has left the cells, so no more than three
#: are ever between launch and last result).
QUEUED_TILES = 4


@dataclass(frozen=True)
class _PooledWrite:
    """Fused pooling's write of a window's maximum (``valid``, ``addr``, ``data``) and
    ``busy``: a window is in its steps."""

    valid: object
    addr: object
    data: object
    busy: object


@dataclass(frozen=True)
class _Cursor:
    """The tile in progress: whether one is (``pending``), its settings (``tile``), its
    results taken (``count``; ``taken``: one is this cycle), and its next result's word
    (``out_addr``), with fused pooling its window's word (``pool_addr``), its map column
    ``x``, whether its row is odd (``y_odd``) and its pooled row (``pooled_row``)."""

    pending: object
    tile: object
    count: object
    taken: object
    out_addr: object
    pool_addr: object
    x: object
    y_odd: object
    pooled_row: object


def _write_port(depth, bits):
    return Out(data.StructLayout({"addr": range(depth), "data": unsigned(bits), "en": 1}))


class ResultWriter(wiring.Component):
    """Takes the array's results tile after tile, adds each position's partial sum and
    writes the sum where it goes.

    A pulse on ``launch`` (while ``room``) queues a tile with its settings: its ``total``
    results (``total`` and the step's ``to_acc``, ``stride`` and ``positions`` are held
    while any tile is queued or in progress) plus, with ``add_psum``, partial sum ``k``
    of the buffer, go to the partial-sum buffer (``to_psums``; result ``k`` to word
    ``k``), or, from word ``base`` of the destination, in blocks of ``positions``, each
    ``stride`` words after the one before (an image's block): the accumulator buffer
    with ``to_acc``, else the activation buffer through the output stage, row ``r`` with
    ``shifts[r]`` (``clamp(sum >> shift, 0, 255)``; with ``requant="multiplier"``
    ``clamp((sum * multipliers[r]) >> shift, 0, 255)``, a 32 x 16-bit product). The
    tiles' results arrive in launch order. ``idle`` is high when no tile is queued, in
    progress or being written.

    With ``pool`` (held with the others) the activations are max-pooled 2 x 2, stride 2
    as they are written (semantics section 9, fused pooling): an image's ``positions``
    are a map ``map_width`` wide, row by row, and the pooled ``out_height x out_width``
    map goes from the image's block's first word; a pair of a row's results is kept in
    a register, the pairs of the row above in a line of ``POOL_LINE_WORDS`` words
    (``out_width`` at most that), and each window's maximum is written when its fourth
    result has its code (results past the pooled map are dropped).

    With ``add`` (held with the others; not with ``pool``) the sums are the accumulators of
    a residual add (semantics section 9, fused add): each goes to the activation buffer as
    ``clamp((sum * ma + b * mb + 2**15) >> 16)`` (``signed_b``, ``signed_out``: offset
    binary), ``b`` the operand at ``add_offset`` words past the result's word, read
    through ``side`` (data a cycle after the address) as the result is taken: an
    activation (``side_data``), or with ``b_acc`` an accumulator (``acc_side_data``);
    two 32 x 24-bit products per row.

    A result's partial sum is read as the result is taken, so a tile's result for a
    position must be taken more than the latency after the previous tile's (which the
    engine ensures: a tile's first position goes into the array at least the gather's
    start, 7 cycles, after the previous tile's last).

    Latency: a result is written ``result_write_steps`` cycles after ``result`` takes it
    (``RESULT_WRITE_STEPS``, 4; ``REQUANT_PRODUCT_STEPS`` more with the multiplier;
    ``POOL_WRITE_STEPS`` more for a pooled window's maximum; with ``add``
    ``ADD_WRITE_STEPS``, 6).
    Throughput: a result a cycle; ``result`` is ready while a tile's results are due.

    Parameters
    ----------
    rows, acc_bits, out_bits : int
        Rows of a result, accumulator and activation widths.
    act_depth, acc_depth, psum_depth : int
        Words of the activation, accumulator and partial-sum buffers.
    requant : str
        ``"shift"`` or ``"multiplier"``.

    Attributes
    ----------
    result : In(stream.Signature(StructLayout({"acc": ArrayLayout(signed(acc_bits), rows),
             "last": 1})))
    launch, to_psums, add_psum, to_acc : In(1)
    base : In(32)
    shifts : In(ArrayLayout(range(acc_bits), rows)), with the multiplier
             In(ArrayLayout(range(acc_bits + REQUANT_BITS), rows))
    multipliers : In(ArrayLayout(unsigned(REQUANT_BITS), rows)), with the multiplier only
    stride : In(16)
    positions : In(17)
    total : In(33)
    pool : In(1)
    map_width, out_height, out_width : In(16)
    add, b_acc, signed_b, signed_out : In(1)
    add_offset : In(32)
    ma, mb : In(MULTIPLIER_BITS)
    side : Out(range(max(act_depth, acc_depth)))
    side_data, acc_side_data : In(rows * out_bits), In(rows * acc_bits)
        The activation and accumulator buffers' read ports for the add's operand.
    room, idle : Out(1)
    psum_read : Out(range(psum_depth))
    psum_read_data : In(rows * acc_bits)
        The partial-sum buffer's read port (data a cycle after the address).
    act_write, acc_write, psum_write : Out(StructLayout({"addr", "data", "en"}))
    """

    def __init__(self, *, rows, acc_bits, out_bits, act_depth, acc_depth, psum_depth,
                 requant="shift"):
        for value, what in ((rows, "Row count"), (acc_bits, "Accumulator width"),
                            (out_bits, "Output width"), (act_depth, "Activation words"),
                            (acc_depth, "Accumulator words"),
                            (psum_depth, "Partial-sum words")):
            positive_int(value, what)
        if requant not in REQUANT_KINDS:
            raise ValueError(f"Requantization must be one of {', '.join(REQUANT_KINDS)}, "
                             f"not {requant!r}")
        self._rows, self._acc_bits, self._out_bits = rows, acc_bits, out_bits
        self._multiply = requant == "multiplier"
        # The output stage's input: the sum, or its product with the row's multiplier.
        self._stage_bits = acc_bits + REQUANT_BITS * self._multiply
        requant_ports = {"multipliers": In(data.ArrayLayout(unsigned(REQUANT_BITS), rows))} \
            if self._multiply else {}
        super().__init__({
            "result": In(stream.Signature(data.StructLayout({
                "acc": data.ArrayLayout(signed(acc_bits), rows), "last": 1}))),
            "launch": In(1), "to_psums": In(1), "add_psum": In(1), "to_acc": In(1),
            "base": In(32), "shifts": In(data.ArrayLayout(range(self._stage_bits), rows)),
            **requant_ports,
            "stride": In(16), "positions": In(17), "total": In(33),
            "pool": In(1), "map_width": In(16), "out_height": In(16), "out_width": In(16),
            "add": In(1), "b_acc": In(1), "signed_b": In(1), "signed_out": In(1),
            "add_offset": In(32), "ma": In(MULTIPLIER_BITS), "mb": In(MULTIPLIER_BITS),
            "side": Out(range(max(act_depth, acc_depth))),
            "side_data": In(rows * out_bits), "acc_side_data": In(rows * acc_bits),
            "room": Out(1), "idle": Out(1),
            "psum_read": Out(range(psum_depth)),
            "psum_read_data": In(rows * acc_bits),
            "act_write": _write_port(act_depth, rows * out_bits),
            "acc_write": _write_port(acc_depth, rows * acc_bits),
            "psum_write": _write_port(psum_depth, rows * acc_bits),
        })

    def elaborate(self, platform):
        m = Module()
        R, AB = self._rows, self._acc_bits
        queue, t = self._tiles(m)
        tile = t.tile

        # RESULT_WRITE_STEPS (4) steps: the result and where it goes, the partial sum
        # read; the sum; (with the multiplier, its product with the row's multiplier, in
        # REQUANT_PRODUCT_STEPS;) the output stage's two steps; then the write (the
        # partial-sum and accumulator writes go with the activations').
        steps = RESULT_WRITE_STEPS + REQUANT_PRODUCT_STEPS * self._multiply
        where = Signal(range(3))            # 0 activations, 1 accumulators, 2 partial sums
        m.d.comb += where.eq(Mux(tile.to_psums, 2, Mux(self.to_acc, 1, 0)))
        valid1 = stage(m, t.taken, "result_valid1", reset_less=False)
        acc1 = stage(m, self.result.payload.acc, "result_acc1")
        add1 = stage(m, tile.add_psum, "result_add1")
        where1 = stage(m, where, "result_where1")
        pooling = self.pool & (where == 0)
        addr1 = stage(m, Mux(tile.to_psums, t.count, Mux(pooling, t.pool_addr, t.out_addr)),
                      "result_addr1")
        # A pooled result: whether it begins its pair (an even column), its window (an
        # even row), whether its window is inside the pooled map, its window's column.
        pool_line = data.StructLayout({"on": 1, "first_x": 1, "first_y": 1, "inside": 1,
                                       "column": range(POOL_LINE_WORDS)})
        pool1 = Signal(pool_line, name="result_pool1")
        m.d.sync += [pool1.on.eq(pooling), pool1.first_x.eq(~t.x[0]),
                     pool1.first_y.eq(~t.y_odd),
                     pool1.inside.eq((t.x[1:] < self.out_width)
                                     & (t.pooled_row < self.out_height)),
                     pool1.column.eq(t.x[1:])]
        psum = data.View(data.ArrayLayout(unsigned(AB), R), self.psum_read_data)
        sums = [stage(m, (acc1[r].as_unsigned() + Mux(add1, psum[r], 0))[:AB],
                      f"result_sum_r{r}")
                for r in range(R)]
        ys = self._output_stage(m, tile, sums)
        valid = [valid1]
        for i in range(max(steps, ADD_WRITE_STEPS) - 1):
            valid.append(stage(m, valid[-1], f"result_valid{i + 2}", reset_less=False))
        where_w = delay(m, where1, steps - 1, "result_where")
        addr_w = delay(m, addr1, steps - 1, "result_addr")
        sums_w = [delay(m, value, steps - 2, f"result_sum_w_r{r}")
                  for r, value in enumerate(sums)]
        write = valid[steps - 1]
        pool_w = data.View(pool_line, delay(m, pool1.as_value(), steps - 1, "result_pool"))
        pooled = self._pool(m, write & pool_w.on, pool_w, addr_w, Cat(*ys))
        for port, kind, value in ((self.act_write, 0, ys), (self.acc_write, 1, sums_w),
                                  (self.psum_write, 2, sums_w)):
            m.d.comb += [port.addr.eq(addr_w), port.en.eq(write & (where_w == kind))]
            for r, v in enumerate(value):
                m.d.comb += port.data.word_select(r, len(v)).eq(v)
        # A fused add's activations, written ADD_WRITE_STEPS after their results.
        codes = self._add(m, sums)
        add_write = valid[ADD_WRITE_STEPS - 1] & delay(m, where1 == 0, ADD_WRITE_STEPS - 1,
                                                       "result_add_act")
        add_addr = delay(m, addr1, ADD_WRITE_STEPS - 1, "result_add_addr")
        with m.If(self.add):
            m.d.comb += [self.act_write.en.eq(add_write), self.act_write.addr.eq(add_addr),
                         self.act_write.data.eq(codes)]
        # A pooled step's activations are written as windows only (a window's write may
        # come while the next tile's first results go to the partial sums).
        with m.If(pool_w.on):
            m.d.comb += self.act_write.en.eq(0)
        with m.If(pooled.valid):
            m.d.comb += [self.act_write.addr.eq(pooled.addr),
                         self.act_write.data.eq(pooled.data), self.act_write.en.eq(1)]
        writing = Mux(self.add, Cat(*valid).any(), Cat(*valid[:steps]).any())
        m.d.comb += self.idle.eq(~t.pending & ~queue.r_rdy & ~writing & ~pooled.busy)
        return m

    def _tiles(self, m):
        """The queue of launched tiles and the tile in progress, begun from the queue's
        head when the previous one's last result is taken (or none is in progress), with
        where its next result goes. Returns the queue and a ``_Cursor``."""
        R, SB = self._rows, self._stage_bits
        requant = {"multipliers": data.ArrayLayout(unsigned(REQUANT_BITS), R)} \
            if self._multiply else {}
        tile_layout = data.StructLayout({
            "to_psums": 1, "add_psum": 1, "base": 32,
            "shifts": data.ArrayLayout(range(SB), R), **requant})
        m.submodules.queue = queue = fifo.SyncFIFO(width=tile_layout.size, depth=QUEUED_TILES)
        m.d.comb += [queue.w_en.eq(self.launch), self.room.eq(queue.w_rdy)]
        launched = data.View(tile_layout, queue.w_data)
        m.d.comb += [launched.to_psums.eq(self.to_psums), launched.add_psum.eq(self.add_psum),
                     launched.base.eq(self.base), launched.shifts.eq(self.shifts)]
        if self._multiply:
            m.d.comb += launched.multipliers.eq(self.multipliers)
        head = data.View(tile_layout, queue.r_data)
        t = _Cursor(pending=Signal(name="tile_pending"), tile=Signal(tile_layout),
                    count=Signal(33, name="tile_count"),
                    taken=self.result.valid & self.result.ready,
                    out_addr=Signal(32, name="out_addr"), pool_addr=Signal(32, name="pool_addr"),
                    x=Signal(16, name="pool_x"), y_odd=Signal(name="pool_y_odd"),
                    pooled_row=Signal(16, name="pooled_row"))
        image_addr = Signal(32)             # the block of the next result's image,
        b_addr = Signal(32)                 # ... its add operand's word,
        b_image = Signal(32)                # ... in the operand's block from here,
        image_position = Signal(17)         # ... at this position of the image
        at_last = Signal()                  # the next result is the tile's last
        row_addr = Signal(32, name="pool_row_addr")     # its pooled row's first word
        last = t.taken & at_last
        m.d.comb += [self.result.ready.eq(t.pending), self.psum_read.eq(t.count),
                     self.side.eq(b_addr)]
        with m.If(t.taken):
            m.d.sync += [t.count.eq(t.count + 1), at_last.eq(t.count == self.total - 2),
                         image_position.eq(image_position + 1),
                         t.out_addr.eq(t.out_addr + 1), b_addr.eq(b_addr + 1),
                         t.x.eq(t.x + 1), t.pool_addr.eq(t.pool_addr + t.x[0])]
            with m.If(t.x == self.map_width - 1):
                m.d.sync += [t.x.eq(0), t.y_odd.eq(~t.y_odd), t.pool_addr.eq(row_addr)]
                with m.If(t.y_odd):
                    m.d.sync += [t.pooled_row.eq(t.pooled_row + 1),
                                 row_addr.eq(row_addr + self.out_width),
                                 t.pool_addr.eq(row_addr + self.out_width)]
            with m.If(image_position == self.positions - 1):
                # The image's block is whole: the next image's is a stride further.
                next_image = image_addr + self.stride
                m.d.sync += [image_position.eq(0), image_addr.eq(next_image),
                             t.out_addr.eq(next_image), b_image.eq(b_image + self.stride),
                             b_addr.eq(b_image + self.stride),
                             t.x.eq(0), t.y_odd.eq(0), t.pooled_row.eq(0),
                             row_addr.eq(next_image), t.pool_addr.eq(next_image)]
        with m.If(last):
            m.d.sync += t.pending.eq(0)
        m.d.comb += queue.r_en.eq(~t.pending | last)
        with m.If(queue.r_en & queue.r_rdy):
            m.d.sync += [t.pending.eq(1), t.tile.eq(head), t.count.eq(0),
                         at_last.eq(self.total == 1), image_position.eq(0),
                         t.out_addr.eq(head.base), image_addr.eq(head.base),
                         b_addr.eq(head.base + self.add_offset),
                         b_image.eq(head.base + self.add_offset),
                         t.x.eq(0), t.y_odd.eq(0), t.pooled_row.eq(0), row_addr.eq(head.base),
                         t.pool_addr.eq(head.base)]
        return queue, t

    def _output_stage(self, m, tile, sums):
        """Each row's sum (a register) through the output stage with its shift (and,
        requantizing by a multiplier, its product with the row's multiplier first):
        the rows' codes, ``RESULT_WRITE_STEPS - 2`` register steps later (and
        ``REQUANT_PRODUCT_STEPS`` more)."""
        R, SB = self._rows, self._stage_bits
        shifts1 = stage(m, tile.shifts, "result_shifts1")
        values = sums
        if self._multiply:
            multipliers1 = stage(m, tile.multipliers, "result_multipliers1")
            factors = [stage(m, multipliers1[r], f"result_multiplier_r{r}")
                       for r in range(R)]
            values = [split_product(m, sums[r].as_signed(), factors[r],
                                    f"result_requant_r{r}") for r in range(R)]
            shifts1 = [delay(m, shifts1[r], REQUANT_PRODUCT_STEPS,
                             f"result_product_shift_r{r}") for r in range(R)]
        shifts = [stage(m, shifts1[r], f"result_shift_r{r}") for r in range(R)]
        masks = [stage(m, over_mask(shifts1[r], self._out_bits, SB), f"result_mask_r{r}")
                 for r in range(R)]
        return [output_stage(m, values[r], shifts[r], masks[r], self._out_bits, f"result_r{r}")
                for r in range(R)]

    def _add(self, m, sums):
        """Fused add: each row's sum (a register, a cycle after its result's operand word
        landed) times ``ma`` plus the operand's value (its code's, or its accumulator)
        times ``mb``, rounded and clamped: ``ADD_WRITE_STEPS - 2`` register steps.
        Returns the word of codes."""
        R, B, AB = self._rows, self._out_bits, self._acc_bits
        b = stage(m, self.side_data, "add_operand")
        b_acc = stage(m, self.acc_side_data, "add_acc_operand")
        from_acc = stage(m, self.b_acc, "add_from_acc")
        ma, mb = stage(m, self.ma, "add_ma"), stage(m, self.mb, "add_mb")
        signed_b = stage(m, self.signed_b, "add_signed_b")
        signed_out = stage(m, self.signed_out, "add_signed_out")
        codes = []
        for r in range(R):
            pa = split_product(m, sums[r].as_signed(), ma, f"add_r{r}_pa")
            value = Mux(from_acc, b_acc.word_select(r, AB).as_signed(),
                        signed_lane(b.word_select(r, B), signed_b))
            pb = split_product(m, value, mb, f"add_r{r}_pb")
            total = rounded_sum(m, pa, pb, f"add_r{r}")
            codes.append(stage(m, clamp_lane(total, signed_out, B), f"add_r{r}_code"))
        return Cat(*codes)

    def _pool(self, m, write, where, addr, codes):
        """Fused pooling at the write: ``codes`` (a word of the rows' activations) taken
        when ``write``; ``where`` its pair, window and column (``pool_line``), ``addr``
        its window's word. A pair's first word waits in a register; the pair's maximum
        goes into the line at an even row's window, or, at an odd row's, out with the
        line's word of the row above (``POOL_WRITE_STEPS`` registered steps: the pair's
        maximum with the line's read, then the window's maximum). Returns a record of
        the window's write (``valid``, ``addr``, ``data``) and ``busy``."""
        R, B = self._rows, self._out_bits
        assert POOL_WRITE_STEPS == 2

        def maximum(a, b):
            return Cat(Mux(a[r * B:][:B] > b[r * B:][:B], a[r * B:][:B], b[r * B:][:B])
                       for r in range(R))
        first = Signal(R * B, name="pool_pair_first")
        with m.If(write & where.first_x):
            m.d.sync += first.eq(codes)
        line = memory.Memory(shape=unsigned(R * B), depth=POOL_LINE_WORDS, init=[])
        m.submodules.pool_line = line
        line_w, line_r = line.write_port(), line.read_port(transparent_for=())
        pair = stage(m, maximum(first, codes), "pool_pair")
        pair_valid = stage(m, write & ~where.first_x & where.inside, "pool_pair_valid",
                           reset_less=False)
        pair_first_y = stage(m, where.first_y, "pool_pair_first_y")
        pair_column = stage(m, where.column, "pool_pair_column")
        pair_addr = stage(m, addr, "pool_pair_addr")
        m.d.comb += [line_r.addr.eq(where.column),
                     line_w.addr.eq(pair_column), line_w.data.eq(pair),
                     line_w.en.eq(pair_valid & pair_first_y)]
        valid = stage(m, pair_valid & ~pair_first_y, "pool_out_valid", reset_less=False)
        return _PooledWrite(valid=valid, addr=stage(m, pair_addr, "pool_out_addr"),
                            data=stage(m, maximum(pair, line_r.data), "pool_out"),
                            busy=pair_valid | valid)
