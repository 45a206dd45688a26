"""The network engine's gather: the activation buffer, a memory per lane, and the address
generator that builds the array's data beats from the stored map (im2col by addresses,
docs/semantics.md section 9)."""

import dataclasses
from dataclasses import dataclass

from amaranth.hdl import C, Array, Cat, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import NO_LANE, EngineConfig, image_word, table_words
from codnn.hw.common.counters import counter
from codnn.hw.common.delays import delay, delay_line, stage
from codnn.hw.common.params import positive_int

__all__ = ["GatherEntry", "Geometry", "Gather"]

#: A gather table entry (semantics section 9): entry ``(a, i)`` holds lane bank ``i``'s read
#: in stream slot ``a`` (``offset``, ``ky``, ``kx``) and the ``lane`` array column ``i``'s
#: stream ``a`` carries.
GatherEntry = data.StructLayout({"offset": unsigned(16), "lane": unsigned(8),
                                 "kx": unsigned(4), "ky": unsigned(4)})

#: Values an entry's ``ky`` and ``kx`` take, and its ``offset``: the window's bounds
#: (``_Bounds``) are clamped to them.
_KERNEL_SPAN = 1 << GatherEntry.members["ky"].width
_OFFSET_SPAN = 1 << GatherEntry.members["offset"].width

#: Vectors the output FIFO holds (those in the read pipeline count against it): enough
#: for a beat a cycle, since a position's credit comes back 7 cycles after it is taken.
_FIFO_DEPTH = 8


@dataclass(frozen=True)
class _Pass:
    """What a pass's stages share: the geometry it samples (``geo``) and the half of the
    table memories it reads (``buffer``), where the window is (``_Distances``), the
    output position and image, the round, ``stride * width`` (``row_step``), whether
    positions are still issued and how many beats are in flight or queued
    (``pending``), whether a pass was busy a cycle ago (``passing``: the banks' ports are
    then the gather's), the beat being built, the set-up cycle after ``start``
    (``first``), a round's reads (``go``, ``last_round``), the output FIFO, the bounds
    and the table's entries as the round reads them (``entries``)."""

    geo: Signal
    buffer: Signal
    row_step: Signal
    at: "_Distances"
    oy: Signal
    ox: Signal
    image: Signal
    rnd: Signal
    issuing: Signal
    pending: Signal
    passing: Signal
    beat: Signal
    first: Signal
    go: Signal
    last_round: Signal
    fifo_out: fifo.SyncFIFO
    bounds: "_Bounds"
    entries: list


@dataclass(frozen=True)
class _Distances:
    """Where the window is, as the distances its bounds test (its top-left ``(wy, wx)``,
    its word ``base``): ``above = -wy``, ``below = height - wy``, ``left = -wx``,
    ``right = width - wx``, ``under = -base``, ``over = limit - base``; ``under`` and
    ``over`` of the row's and the image's first windows; and ``below`` (``right``) at an
    image's (a row's) first window. Registers kept by adding the steps, so that the
    bounds are a register and a clamp away (no subtraction from a position)."""

    above: Signal
    below: Signal
    left: Signal
    right: Signal
    under: Signal
    over: Signal
    row_under: Signal
    row_over: Signal
    image_under: Signal
    image_over: Signal
    below_start: Signal
    right_start: Signal


@dataclass(frozen=True)
class _Bounds:
    """What every bank port tests its entry against, from the window's position alone:
    entry ``(offset, ky, kx)`` lies inside the map when ``ky_low <= ky < ky_end`` and
    ``kx_low <= kx < kx_end``, and names a word inside the buffer when ``offset_low <=
    offset < offset_end`` (each bound clamped to the field's range, so that a port
    compares a few bits instead of adding and comparing the window's full width).
    Registers, set with the distances they clamp (``_moved``)."""

    ky_low: Signal
    ky_end: Signal
    kx_low: Signal
    kx_end: Signal
    offset_low: Signal
    offset_end: Signal


#: Each distance with a bound (``_Bounds``), the bound and the span it is clamped to.
_BOUND_OF = {"above": ("ky_low", _KERNEL_SPAN), "below": ("ky_end", _KERNEL_SPAN),
             "left": ("kx_low", _KERNEL_SPAN), "right": ("kx_end", _KERNEL_SPAN),
             "under": ("offset_low", _OFFSET_SPAN), "over": ("offset_end", _OFFSET_SPAN)}


def _moved(k, **values):
    """Statements that set distances of the window (``_Distances``: ``above``, ``below``,
    ``left``, ``right``, ``under``, ``over``) and, from the same values, the bounds they
    clamp to (``_Bounds``; ``y = wy + ky`` lies in ``[0, height)`` when ``-wy <= ky <
    height - wy``, and ``base + offset`` in ``[0, limit)`` when ``-base <= offset < limit
    - base``), so that a port compares registers: each distance clamped to ``0 ..
    _KERNEL_SPAN`` (``0 .. _OFFSET_SPAN``), the field's values and one past them, by bit
    tests (the spans are powers of two) of the value as its register holds it."""
    statements = []
    for name, value in values.items():
        register = getattr(k.at, name)
        value = Value.cast(value)
        if len(value) < len(register):
            fill = value[-1] if value.shape().signed else C(0, 1)
            value = Cat(value, fill.replicate(len(register) - len(value)))
        held = value[:len(register)]
        bound, span = _BOUND_OF[name]
        bits = span.bit_length() - 1
        statements += [register.eq(held), getattr(k.bounds, bound).eq(
            Mux(held[-1], 0, Mux(held[bits:-1].any(), span, held[:bits])))]
    return statements


def Geometry(depth, data_bits=8, rounds=8):
    """A layer's geometry as the gather takes it: the source's first word and map size
    (``height x width``), the output map (``out_height x out_width``; 1 x 1 for a dense
    layer), stride and the padding above and left of the map (``padding_top``,
    ``padding_left``; 1 and 0 for a dense layer), ``pad``, the value a padded
    position carries, and ``rounds``, the cycles of reads per position (1 up to the
    ``rounds`` this layout is made for: the gather's ``ceil(alpha / ports)``), and the
    ``images`` of the pass (at least 1), image ``m``'s map ``m * image_words`` past
    ``src``."""
    return data.StructLayout({
        "src": range(depth), "height": unsigned(16), "width": unsigned(16),
        "out_height": unsigned(16), "out_width": unsigned(16), "stride": unsigned(4),
        "padding_top": unsigned(4), "padding_left": unsigned(4), "pad": unsigned(data_bits),
        "rounds": range(rounds + 1),
        "images": unsigned(16), "image_words": unsigned(16)})


class Gather(wiring.Component):
    """The activation buffer (``depth`` words of ``lanes`` ``data_bits``-bit lanes, a memory
    per lane, each with ``ports`` read ports: its block RAMs do not grow with the array's
    columns) and the address generator that reads a layer's data beats from it.

    A pulse on ``start`` (while not ``busy``) starts a pass over ``geometry`` (sampled on
    the edge after the one that takes ``start``: hold it for that cycle) and the gather
    table written before it (``alpha`` stream slots of ``max(cols, lanes)`` gather
    entries), and sends one beat
    on ``o`` per output position, row-major, image after image. In slot ``a`` lane bank
    ``i`` reads lane ``i`` of word ``src + m * image_words + (oy * stride - top) *
    width + (ox * stride - left) + offset`` in image ``m`` (entry ``(a, i)``'s offset;
    ``top``, ``left`` the geometry's paddings) when the window position ``(oy * stride -
    top + ky, ox * stride - left + kx)``
    lies inside the map, else carries ``pad``; stream ``a`` of column ``g`` carries the
    read of bank ``lane`` (entry ``(a, g)``'s), or 0 where that is ``0xFF``; the slots
    past the geometry's ``rounds * ports`` are not read and carry 0.
    ``table_write`` writes word ``addr`` of a table as the weight image holds it
    (semantics section 9: entry ``(a, i)`` in bytes ``4 * (a * max(cols, lanes) + i)``
    on, words of ``2 * cols`` bytes), the words in order; they go to the half of the
    table memories that the next pass reads (up to the edge that takes its ``start``),
    while a pass reads the other. ``bad_table`` is high from the edge that takes a
    ``start`` to the next when that pass's table names a lane at ``lanes`` or past it
    (but ``0xFF``) for a column's stream.
    ``write`` writes a word, a lane into each bank (not while a pass reads what it
    writes). ``fault`` is high for a cycle after a bank's read inside the map named a
    word below 0 or at ``limit`` or past it (the program's buffer; the word read is
    then not the one named).

    Latency: ``rounds + 6`` cycles from the edge that takes ``start`` to the first beat
    valid on ``o`` (a cycle to set up, the reads' rounds, the address, memory, memory
    output register and lane steps, a cycle to the FIFO and its write). Throughput: a beat every ``rounds`` cycles
    (the geometry's: 1 to ``ceil(alpha / ports)``) while ``o`` is ready.

    Parameters
    ----------
    cols, alpha, lanes : int
        Array columns, streams per column, lanes per word (the array's rows).
    depth : int
        Words of the activation buffer (at most 65536).
    data_bits : int
        Lane width.
    ports : int
        Read ports of each lane's bank.

    Attributes
    ----------
    write : In(StructLayout({"addr", "data", "en"}))
    geometry : In(Geometry(depth, data_bits))
    table_write : In(StructLayout({"addr", "data", "en"}))
        A table word (``16 * cols`` bits) and its index.
    bad_table : Out(1)
    start : In(1)
    busy : Out(1)
    limit : In(range(depth + 1))
        The program's activation buffer words (reads at it or past it are faults),
        sampled with the geometry.
    fault : Out(1)
    o : Out(stream.Signature(ArrayLayout(ArrayLayout(unsigned(data_bits), alpha), cols)))
    aux, aux_data : In(ArrayLayout(range(depth), ports)), Out(ArrayLayout(word, ports))
        The banks' read ports for others (the post-processing unit, the host), a word each,
        from the cycle after ``busy`` falls until the cycle after a ``start``: data a cycle
        after the address.
    side, side_data : In(range(depth)), Out(word)
        A read port of every bank of its own (the result writer's fused add), at any
        time: data a cycle after the address.

    Raises
    ------
    TypeError
        If a size is not a positive integer.
    ValueError
        If ``depth`` is above 65536 or ``lanes`` is 255 or more.
    """

    def __init__(self, *, cols, alpha, lanes, depth, data_bits=8, ports=2):
        for value, what in ((cols, "Column count"), (alpha, "Alpha"), (lanes, "Lane count"),
                            (depth, "Buffer depth"), (data_bits, "Data width"),
                            (ports, "Port count")):
            positive_int(value, what)
        if depth > 1 << 16:
            raise ValueError(f"Buffer depth must be at most 65536 words, not {depth}")
        if lanes >= NO_LANE:
            raise ValueError(f"Lane count must be below {NO_LANE}, not {lanes}")
        self._cols, self._alpha, self._lanes, self._depth = cols, alpha, lanes, depth
        self._data_bits, self._ports = data_bits, ports
        table = EngineConfig(rows=lanes, cols=cols, alpha=alpha)
        super().__init__({
            "write": In(data.StructLayout({"addr": range(depth),
                                           "data": unsigned(lanes * data_bits), "en": 1})),
            "geometry": In(Geometry(depth, data_bits, -(-alpha // ports))),
            "table_write": In(data.StructLayout({
                "addr": range(table_words(table)), "data": unsigned(8 * image_word(table)),
                "en": 1})),
            "bad_table": Out(1),
            "start": In(1),
            "busy": Out(1),
            "limit": In(range(depth + 1)),
            "fault": Out(1),
            "aux": In(data.ArrayLayout(range(depth), ports)),
            "aux_data": Out(data.ArrayLayout(unsigned(lanes * data_bits), ports)),
            "side": In(range(depth)), "side_data": Out(unsigned(lanes * data_bits)),
            "o": Out(stream.Signature(data.ArrayLayout(
                data.ArrayLayout(unsigned(data_bits), alpha), cols))),
        })

    cols = property(lambda self: self._cols, doc="Array columns.")
    alpha = property(lambda self: self._alpha, doc="Streams per column.")
    lanes = property(lambda self: self._lanes, doc="Lanes per word.")
    depth = property(lambda self: self._depth, doc="Words of the activation buffer.")
    ports = property(lambda self: self._ports, doc="Read ports per column copy.")

    @property
    def rounds(self):
        """The most cycles of reads per beat: ``ceil(alpha / ports)``."""
        return -(-self._alpha // self._ports)

    def elaborate(self, platform):
        m = Module()
        distance = signed(26)       # window positions and the buffer's limit, and one more bit
        rnd, buffer = counter(self.rounds, name="round"), Signal(name="table_buffer")
        k = _Pass(
            geo=Signal.like(self.geometry, name="geo"), buffer=buffer,
            row_step=Signal(24, name="row_step"),
            at=_Distances(**{f.name: Signal(distance, name=f"window_{f.name}")
                             for f in dataclasses.fields(_Distances)}),
            oy=Signal(16, name="oy"), ox=Signal(16, name="ox"), image=Signal(16, name="image"),
            rnd=rnd, issuing=Signal(name="issuing"),
            pending=Signal(range(_FIFO_DEPTH + 1), name="pending"),
            passing=Signal(name="passing"), beat=Signal.like(self.o.payload, name="beat"),
            first=Signal(name="first"), go=Signal(name="go"),
            last_round=Signal(name="last_round"),
            # A position starts only with room for its vector in the FIFO.
            fifo_out=fifo.SyncFIFO(width=len(self.o.payload.as_value()), depth=_FIFO_DEPTH),
            bounds=_Bounds(**{n: Signal(range(_KERNEL_SPAN + 1), name=n)
                              for n in ("ky_low", "ky_end", "kx_low", "kx_end")},
                           **{n: Signal(range(_OFFSET_SPAN + 1), name=n)
                              for n in ("offset_low", "offset_end")}),
            entries=self._table(m, rnd, buffer))
        m.submodules.fifo = k.fifo_out
        self._positions(m, k)
        self._rounds(m, k)
        self._reads(m, k)
        # The beat is whole a cycle after its last round's lanes land.
        done_d = delay_line(m, k.go & k.last_round, 4, "beat_done", reset_less=False)
        fifo_out = k.fifo_out
        m.d.comb += [fifo_out.w_en.eq(done_d[-1]), fifo_out.w_data.eq(k.beat.as_value())]
        m.d.comb += [self.o.valid.eq(fifo_out.r_rdy), self.o.payload.eq(fifo_out.r_data),
                     fifo_out.r_en.eq(self.o.ready)]
        return m

    def _table(self, m, rnd, buffer):
        """The gather table's memories, one per read port ``p`` and entry index ``i``,
        each two halves of a row per round (row ``r`` holds entry ``(min(r * ports + p,
        alpha - 1), i)``): ``table_write``'s words are written into the half a pass does
        not read, an entry once its last byte comes (one that spans two words from the
        word before and this one), and ``start`` swaps the halves (``buffer``: the half
        the pass reads); ``bad_table``. Returns ``entries[p][i]``, the entry port ``p`` of
        bank ``i`` (or column ``i``) reads in round ``rnd``, read without a clock (the
        memories are a few words deep: distributed RAM, not flip-flops)."""
        A, P, rounds = self._alpha, self._ports, self.rounds
        E = max(self._cols, self._lanes)
        tw = self.table_write
        bits = len(tw.data)
        last = Signal(bits, name="table_last_word")
        with m.If(tw.en):
            m.d.sync += last.eq(tw.data)
        pair = Cat(last, tw.data)
        half = Signal(name="table_write_half")
        bad, word_bad = Signal(name="table_bad"), Signal(name="table_word_bad")
        entries, lane_checks = [], []
        for p in range(P):
            entries.append([])
            for i in range(E):
                table = memory.Memory(shape=GatherEntry, depth=2 << len(rnd), init=[])
                m.submodules[f"table_p{p}_e{i}"] = table
                read, write = table.read_port(domain="comb"), table.write_port()
                m.d.comb += read.addr.eq(Cat(rnd, buffer))
                entries[-1].append(read.data)
                for r in range(rounds):
                    e = min(r * P + p, A - 1) * E + i
                    word = (32 * e + 31) // bits            # the word its last byte is in
                    low = 32 * e - (word - 1) * bits        # where it starts in ``pair``
                    entry = GatherEntry(pair[low:low + 32])
                    written = tw.en & (tw.addr == word)
                    with m.If(written):
                        m.d.comb += [write.en.eq(1), write.addr.eq(Cat(C(r, len(rnd)), half)),
                                     write.data.eq(entry)]
                    if i < self._cols:
                        lane = entry.lane
                        lane_checks.append(written & (lane >= self._lanes) & (lane != NO_LANE))
        m.d.comb += word_bad.eq(Cat(lane_checks).any())
        with m.If(word_bad):
            m.d.sync += bad.eq(1)
        with m.If(self.start & ~self.busy):
            m.d.sync += [buffer.eq(half), half.eq(~half), self.bad_table.eq(bad | word_bad),
                         bad.eq(0)]
        return entries

    def _positions(self, m, k):
        """A pass's start: the geometry and ``limit`` (sampled a cycle after ``start``,
        from ``first``), the products it needs, the first window's distances (its top-left
        ``(-top, -left)``, its word ``src - top * width - left``), the round; ``busy`` and
        who reads the banks' ports."""
        # The products the pass needs, registered as it starts: no multiplier is in front
        # of the position registers.
        corner = Signal(24, name="corner")                  # top * width + left
        # ``start`` loads a few registers; the geometry is sampled from a register a cycle
        # later (``first``), so that the start decision does not drive the enable of every
        # geometry bit.
        g = self.geometry
        with m.If(self.start & ~self.busy):
            m.d.sync += [k.row_step.eq(g.stride * g.width),
                         corner.eq(g.padding_top * g.width + g.padding_left)]
        m.d.comb += self.busy.eq(k.issuing | (k.pending != 0))
        # The banks' read ports serve ``aux`` unless a pass was busy a cycle ago (its first
        # read address comes two cycles after ``start``, its last while still busy).
        m.d.sync += k.passing.eq(self.busy)
        with m.If(self.start & ~self.busy):
            m.d.sync += [k.first.eq(1), k.issuing.eq(1)]
        m.d.sync += self.fault.eq(0)                    # a read below may set it
        with m.If(k.first):
            at, under = k.at, corner - g.src
            over = self.limit + under
            below, right = g.height + g.padding_top, g.width + g.padding_left
            m.d.sync += [k.first.eq(0), k.geo.eq(g), k.beat.eq(0), k.oy.eq(0), k.ox.eq(0),
                         k.rnd.eq(0), k.image.eq(0),
                         at.below_start.eq(below), at.right_start.eq(right),
                         at.row_under.eq(under), at.image_under.eq(under),
                         at.row_over.eq(over), at.image_over.eq(over),
                         *_moved(k, above=g.padding_top, below=below, left=g.padding_left,
                                 right=right, under=under, over=over)]

    def _rounds(self, m, k):
        """A position's rounds of reads (``go``), begun with room in the FIFO; after its
        last round the next position, row or image, or the pass's end."""
        geo, at = k.geo, k.at
        begin = k.issuing & ~k.first & (k.rnd == 0) & (k.pending < _FIFO_DEPTH)
        m.d.comb += [k.go.eq(k.issuing & ~k.first & ((k.rnd != 0) | begin)),
                     k.last_round.eq(k.rnd == geo.rounds - 1)]
        with m.If(k.go):
            m.d.sync += k.rnd.eq(Mux(k.last_round, 0, k.rnd + 1))
            with m.If(k.last_round):
                with m.If(k.ox == geo.out_width - 1):
                    under, over = at.row_under - k.row_step, at.row_over - k.row_step
                    m.d.sync += [k.ox.eq(0), k.oy.eq(k.oy + 1), at.row_under.eq(under),
                                 at.row_over.eq(over),
                                 *_moved(k, left=geo.padding_left, right=at.right_start,
                                         above=at.above - geo.stride,
                                         below=at.below - geo.stride, under=under,
                                         over=over)]
                    with m.If(k.oy == geo.out_height - 1):
                        under = at.image_under - geo.image_words
                        over = at.image_over - geo.image_words
                        m.d.sync += [k.oy.eq(0), k.image.eq(k.image + 1),
                                     at.row_under.eq(under), at.image_under.eq(under),
                                     at.row_over.eq(over), at.image_over.eq(over),
                                     *_moved(k, above=geo.padding_top, below=at.below_start,
                                             under=under, over=over)]
                        with m.If(k.image == geo.images - 1):
                            m.d.sync += k.issuing.eq(0)
                with m.Else():
                    m.d.sync += [k.ox.eq(k.ox + 1),
                                 *_moved(k, left=at.left - geo.stride,
                                         right=at.right - geo.stride,
                                         under=at.under - geo.stride,
                                         over=at.over - geo.stride)]
        fifo_out = k.fifo_out
        m.d.sync += k.pending.eq(k.pending + begin - (fifo_out.r_en & fifo_out.r_rdy))

    def _reads(self, m, k):
        """The banks, one per lane, each written by ``write`` and read through ``ports``
        ports (which also serve ``aux``) and ``side``; each bank port's reads
        (``_bank_port``), and each column's streams from them (``_column_port``)."""
        D, P = self._data_bits, self._ports
        reads = [[None] * P for _ in range(self._lanes)]
        for i in range(self._lanes):
            bank = memory.Memory(shape=unsigned(D), depth=self._depth, init=[])
            m.submodules[f"act_lane{i}"] = bank
            write = bank.write_port()
            m.d.comb += [write.addr.eq(self.write.addr),
                         write.data.eq(self.write.data.word_select(i, D)),
                         write.en.eq(self.write.en)]
            for p in range(P):
                reads[i][p] = self._bank_port(m, k, i, p, bank.read_port())
            side = bank.read_port(transparent_for=())
            m.d.comb += [side.addr.eq(self.side), self.side_data.word_select(i, D).eq(side.data)]
        for p in range(P):
            m.d.comb += self.aux_data[p].eq(Cat(reads[i][p][0] for i in range(self._lanes)))
        for g in range(self._cols):
            for p in range(P):
                self._column_port(m, k, g, p, [reads[i][p][1:] for i in range(self._lanes)])

    def _bank_port(self, m, k, i, p, read):
        """Read port ``p`` of lane ``i``'s bank: step 1, its address from its entry and
        whether it lies inside the map; step 2, the memory's read; step 3, its data
        registered (nothing stands between the memory and a register). Returns the
        read's data (for ``aux``, in step 3), and the registered data and whether it was
        inside, in step 4."""
        slot, bounds = k.entries[p][i], k.bounds
        inside = ((slot.ky >= bounds.ky_low) & (slot.ky < bounds.ky_end)
                  & (slot.kx >= bounds.kx_low) & (slot.kx < bounds.kx_end))
        address = Signal(range(self._depth), name=f"read_l{i}_p{p}_addr")
        m.d.comb += read.addr.eq(Mux(k.passing, address, self.aux[p]))
        outside = (slot.offset < bounds.offset_low) | (slot.offset >= bounds.offset_end)
        with m.If(k.go & inside & outside):
            m.d.sync += self.fault.eq(1)
        named = (slot.offset - k.at.under)[:len(address)]
        m.d.sync += address.eq(Mux(inside, named, 0))
        valid = delay(m, inside, 3, f"read_l{i}_p{p}_inside")
        return read.data, stage(m, read.data, f"read_l{i}_p{p}_data"), valid

    def _column_port(self, m, k, g, p, reads):
        """Column ``g``'s streams through port ``p``: step 1, the lane its entry names
        (stream ``r * ports + p`` in round ``r``); step 4, that bank's read (``pad`` where
        it lay outside the map, 0 for no lane) into the beat being built."""
        A, P, rounds = self._alpha, self._ports, self.rounds
        lane = Signal(8, name=f"stream_c{g}_p{p}_lane")
        stream_index = Signal(range(max(2, rounds * P)), name=f"stream_c{g}_p{p}_slot")
        wanted = Signal(name=f"stream_c{g}_p{p}_wanted")
        m.d.sync += [lane.eq(k.entries[p][g].lane), stream_index.eq(k.rnd * P + p),
                     wanted.eq(k.go)]
        lane_q, index_q = (delay(m, s, 2, s.name) for s in (lane, stream_index))
        wanted_q = delay_line(m, wanted, 2, wanted.name, reset_less=False)[-1]
        lane_bits = max(1, (self._lanes - 1).bit_length())
        data = Array(d for d, _ in reads)[lane_q[:lane_bits]]
        inside = Array(v for _, v in reads)[lane_q[:lane_bits]]
        value = Mux(lane_q == NO_LANE, 0, Mux(inside, data, k.geo.pad))
        with m.If(wanted_q):
            for a in range(A):
                if a % P == p:
                    with m.If(index_q == a):
                        m.d.sync += k.beat[g][a].eq(value)
