"""The network engine's gather: the activation buffer, a copy per array column, and the
address generator that builds the array's data beats from the stored map (im2col by
addresses, docs/semantics.md section 9)."""

from types import SimpleNamespace

from amaranth.hdl import Array, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import NO_LANE
from codnn.hw.common.counters import counter
from codnn.hw.common.params import positive_int

__all__ = ["GatherEntry", "Geometry", "Gather"]

#: One stream's gather entry (semantics section 9).
GatherEntry = data.StructLayout({"offset": unsigned(16), "lane": unsigned(8),
                                 "kx": unsigned(4), "ky": unsigned(4)})

#: Vectors the output FIFO holds (those in the read pipeline count against it): enough
#: for a beat a cycle, since a position's credit comes back 6 cycles after it is taken.
_FIFO_DEPTH = 8


def Geometry(depth, data_bits=8, rounds=8):
    """A layer's geometry as the gather takes it: the source's first word and map size
    (``height x width``), the output map (``out_height x out_width``; 1 x 1 for a dense
    layer), stride and padding (1 and 0 for a dense layer), ``pad``, the value a padded
    position carries, and ``rounds``, the cycles of reads per position (1 up to the
    ``rounds`` this layout is made for: the gather's ``ceil(alpha / ports)``), and the
    ``images`` of the pass (at least 1), image ``m``'s map ``m * image_words`` past
    ``src``."""
    return data.StructLayout({
        "src": range(depth), "height": unsigned(16), "width": unsigned(16),
        "out_height": unsigned(16), "out_width": unsigned(16), "stride": unsigned(4),
        "padding": unsigned(4), "pad": unsigned(data_bits), "rounds": range(rounds + 1),
        "images": unsigned(16), "image_words": unsigned(16)})


class Gather(wiring.Component):
    """The activation buffer (``depth`` words of ``lanes`` ``data_bits``-bit lanes, one copy
    per array column, each with ``ports`` read ports) and the address generator that reads
    a layer's data beats from it.

    A pulse on ``start`` (while not ``busy``) starts a pass over ``geometry`` and ``table``
    (each array column's ``alpha`` gather entries), both sampled on the edge after the one
    that takes ``start`` (hold them for that cycle), and sends one beat on ``o`` per output
    position, row-major, image after image: stream ``a`` of column ``g`` carries lane
    ``lane`` of word ``src + m * image_words + (oy * stride - padding) * width + (ox *
    stride - padding) + offset`` in image ``m`` when the window position ``(oy * stride -
    padding + ky, ox * stride - padding + kx)`` lies inside the map and
    ``lane`` is not ``0xFF``, else ``pad`` (outside the map) or 0 (no input); the streams
    past the geometry's ``rounds * ports`` are not read and carry 0. ``write`` writes a
    word into every copy (not while a pass reads what it writes). ``fault`` is high for
    a cycle after a read inside the map named a word below 0 or at ``limit`` or past it
    (the program's buffer; the word read is then not the one named).

    Latency: ``rounds + 5`` cycles from the edge that takes ``start`` to the first beat
    valid on ``o`` (a cycle to set up, the reads' rounds, the address, memory and lane
    steps, a cycle to the FIFO and its write). Throughput: a beat every ``rounds`` cycles
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
        Read ports of each column's copy.

    Attributes
    ----------
    write : In(StructLayout({"addr", "data", "en"}))
    geometry : In(Geometry(depth, data_bits))
    table : In(ArrayLayout(ArrayLayout(GatherEntry, alpha), cols))
    start : In(1)
    busy : Out(1)
    limit : In(range(depth + 1))
        The program's activation buffer words (reads at it or past it are faults).
    fault : Out(1)
    o : Out(stream.Signature(ArrayLayout(ArrayLayout(unsigned(data_bits), alpha), cols)))
    aux, aux_data : In(ArrayLayout(range(depth), ports)), Out(ArrayLayout(word, ports))
        The read ports of column 0's copy for others (the post-processing unit, the host)
        from the cycle after ``busy`` falls until the cycle after a ``start``: data a cycle
        after the address.

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
        super().__init__({
            "write": In(data.StructLayout({"addr": range(depth),
                                           "data": unsigned(lanes * data_bits), "en": 1})),
            "geometry": In(Geometry(depth, data_bits, -(-alpha // ports))),
            "table": In(data.ArrayLayout(data.ArrayLayout(GatherEntry, alpha), cols)),
            "start": In(1),
            "busy": Out(1),
            "limit": In(range(depth + 1)),
            "fault": Out(1),
            "aux": In(data.ArrayLayout(range(depth), ports)),
            "aux_data": Out(data.ArrayLayout(unsigned(lanes * data_bits), ports)),
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
        k = SimpleNamespace()           # the registers the stages share
        self._positions(m, k)
        # A position starts only with room for its vector in the FIFO.
        m.submodules.fifo = k.fifo_out = fifo.SyncFIFO(
            width=len(self.o.payload.as_value()), depth=_FIFO_DEPTH)
        self._rounds(m, k)
        self._reads(m, k)
        # The beat is whole a cycle after its last round's lanes land.
        done_d = [Signal(name=f"beat_done_{i}") for i in range(3)]
        m.d.sync += [done_d[0].eq(k.go & k.last_round), done_d[1].eq(done_d[0]),
                     done_d[2].eq(done_d[1])]
        fifo_out = k.fifo_out
        m.d.comb += [fifo_out.w_en.eq(done_d[2]), fifo_out.w_data.eq(k.beat.as_value())]
        m.d.comb += [self.o.valid.eq(fifo_out.r_rdy), self.o.payload.eq(fifo_out.r_data),
                     fifo_out.r_en.eq(self.o.ready)]
        return m

    def _positions(self, m, k):
        """The pass's registers: the geometry and table (sampled a cycle after ``start``,
        from ``first``), the products it needs, the window's top-left (``oy * s - p``, ``ox
        * s - p``) and its word, the row's and the image's first windows, the round;
        ``busy`` and who reads column 0's ports."""
        k.geo = Signal.like(self.geometry, name="geo")
        k.table = Signal.like(self.table, name="gather_table")
        # The products the pass needs, registered as it starts: no multiplier is in front
        # of the position registers.
        k.row_step = Signal(24, name="row_step")            # stride * width
        corner = Signal(24, name="corner")                  # padding * width + padding
        # ``start`` loads a few registers; the wide table and the geometry are sampled from
        # a register a cycle later (``first``), so that the start decision does not drive
        # the enable of every table bit.
        g = self.geometry
        with m.If(self.start & ~self.busy):
            m.d.sync += [k.row_step.eq(g.stride * g.width),
                         corner.eq(g.padding * g.width + g.padding)]
        # Position registers: signed, since padding starts them negative.
        span = signed(24)
        k.wy, k.wx = Signal(span, name="window_y"), Signal(span, name="window_x")
        k.base, k.row_base = Signal(span, name="base"), Signal(span, name="row_base")
        k.image_top = Signal(span, name="image_top")    # the image's first window
        k.oy, k.ox = Signal(16, name="oy"), Signal(16, name="ox")
        k.image = Signal(16, name="image")
        k.rnd = counter(self.rounds, name="round")
        k.issuing = Signal(name="issuing")
        k.pending = Signal(range(_FIFO_DEPTH + 1), name="pending")  # in flight or queued
        m.d.comb += self.busy.eq(k.issuing | (k.pending != 0))
        # Column 0's read ports serve ``aux`` unless a pass was busy a cycle ago (its first
        # read address comes two cycles after ``start``, its last while still busy).
        k.passing = Signal(name="passing")
        m.d.sync += k.passing.eq(self.busy)
        k.beat = Signal.like(self.o.payload, name="beat")   # the streams of a position
        k.first = Signal(name="first")                 # a cycle to set up from the inputs
        with m.If(self.start & ~self.busy):
            m.d.sync += [k.first.eq(1), k.issuing.eq(1)]
        m.d.sync += self.fault.eq(0)                    # a read below may set it
        with m.If(k.first):
            top_left = g.src - corner
            m.d.sync += [k.first.eq(0), k.geo.eq(g), k.table.eq(self.table), k.beat.eq(0),
                         k.wy.eq(-g.padding), k.wx.eq(-g.padding), k.oy.eq(0), k.ox.eq(0),
                         k.rnd.eq(0), k.base.eq(top_left), k.row_base.eq(top_left),
                         k.image_top.eq(top_left), k.image.eq(0)]

    def _rounds(self, m, k):
        """A position's rounds of reads (``go``), begun with room in the FIFO; after its
        last round the next position, row or image, or the pass's end."""
        geo, pad = k.geo, k.geo.padding
        begin = k.issuing & ~k.first & (k.rnd == 0) & (k.pending < _FIFO_DEPTH)
        k.go = k.issuing & ~k.first & ((k.rnd != 0) | begin)
        k.last_round = k.rnd == geo.rounds - 1
        with m.If(k.go):
            m.d.sync += k.rnd.eq(Mux(k.last_round, 0, k.rnd + 1))
            with m.If(k.last_round):
                with m.If(k.ox == geo.out_width - 1):
                    next_row = k.row_base + k.row_step
                    m.d.sync += [k.ox.eq(0), k.oy.eq(k.oy + 1), k.wx.eq(-pad),
                                 k.wy.eq(k.wy + geo.stride), k.base.eq(next_row),
                                 k.row_base.eq(next_row)]
                    with m.If(k.oy == geo.out_height - 1):
                        next_image = k.image_top + geo.image_words
                        m.d.sync += [k.oy.eq(0), k.wy.eq(-pad), k.image.eq(k.image + 1),
                                     k.image_top.eq(next_image), k.base.eq(next_image),
                                     k.row_base.eq(next_image)]
                        with m.If(k.image == geo.images - 1):
                            m.d.sync += k.issuing.eq(0)
                with m.Else():
                    m.d.sync += [k.ox.eq(k.ox + 1), k.wx.eq(k.wx + geo.stride),
                                 k.base.eq(k.base + geo.stride)]
        fifo_out = k.fifo_out
        m.d.sync += k.pending.eq(k.pending + begin - (fifo_out.r_en & fifo_out.r_rdy))

    def _reads(self, m, k):
        """The buffer's copies, one per array column, each written by ``write`` and read
        through ``ports`` ports (column 0's also serve ``aux``); each port's reads
        (``_read_port``)."""
        copies = [memory.Memory(shape=unsigned(self._lanes * self._data_bits),
                                depth=self._depth, init=[]) for _ in range(self._cols)]
        for g, copy in enumerate(copies):
            m.submodules[f"act_c{g}"] = copy
            write = copy.write_port()
            m.d.comb += [write.addr.eq(self.write.addr), write.data.eq(self.write.data),
                         write.en.eq(self.write.en)]
            for p in range(self._ports):
                read = copy.read_port()
                self._read_port(m, k, g, p, read)

    def _read_port(self, m, k, g, p, read):
        """Read port ``p`` of column ``g``'s copy: step 1, the port's address, whether its
        value is inside the map, its lane; step 2, the memory's read; step 3, the lane,
        into the beat being built (stream ``r * ports + p`` in round ``r``)."""
        A, P, D, rounds, geo = self._alpha, self._ports, self._data_bits, self.rounds, k.geo
        slot = Array(k.table[g][min(r * P + p, A - 1)] for r in range(rounds))[k.rnd]
        y, x = k.wy + slot.ky, k.wx + slot.kx
        has_input = slot.lane != NO_LANE
        inside = has_input & (y >= 0) & (y < geo.height) & (x >= 0) & (x < geo.width)
        valid = Signal(name=f"read_c{g}_p{p}_valid")
        padded = Signal(name=f"read_c{g}_p{p}_padded")
        lane = Signal(8, name=f"read_c{g}_p{p}_lane")
        stream_index = Signal(range(max(2, rounds * P)), name=f"read_c{g}_p{p}_slot")
        address = Signal(range(self._depth), name=f"read_c{g}_p{p}_addr")
        if g == 0:
            m.d.comb += [read.addr.eq(Mux(k.passing, address, self.aux[p])),
                         self.aux_data[p].eq(read.data)]
        else:
            m.d.comb += read.addr.eq(address)
        named = Signal(signed(26), name=f"read_c{g}_p{p}_named")
        m.d.comb += named.eq(k.base + slot.offset)
        with m.If(k.go & inside & ((named < 0) | (named >= self.limit))):
            m.d.sync += self.fault.eq(1)
        m.d.sync += [address.eq(Mux(inside, named, 0)),
                     valid.eq(k.go & inside), padded.eq(has_input & ~inside),
                     lane.eq(slot.lane), stream_index.eq(k.rnd * P + p)]
        wanted = Signal(name=f"read_c{g}_p{p}_wanted")
        m.d.sync += wanted.eq(k.go)
        valid_q, padded_q, lane_q, index_q, wanted_q = (
            Signal.like(s, name=f"{s.name}_q")
            for s in (valid, padded, lane, stream_index, wanted))
        m.d.sync += [valid_q.eq(valid), padded_q.eq(padded), lane_q.eq(lane),
                     index_q.eq(stream_index), wanted_q.eq(wanted)]
        lane_bits = max(1, (self._lanes - 1).bit_length())
        value = Mux(valid_q, read.data.word_select(lane_q[:lane_bits], D),
                    Mux(padded_q, geo.pad, 0))
        with m.If(wanted_q):
            for a in range(A):
                if a % P == p:
                    with m.If(index_q == a):
                        m.d.sync += k.beat[g][a].eq(value)
