"""The network engine: a whole network from a program and a weight image, no host step
between layers (docs/semantics.md section 9)."""

import dataclasses

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, memory, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import (ACT_PORTS, HEADER_CYCLES, HEADER_WORDS, MAGIC,
                                          STEP_WORDS, VERSION, WEIGHT_PORTS, EngineConfig,
                                          act_stride, bias_bytes, external_weight_bytes,
                                          image_word, word_stride)
from codnn.golden.systolic import MAC_KINDS, select_bits
from codnn.hw.common.counters import counter
from codnn.hw.common.params import positive_int
from codnn.hw.network.activations import AxiActivations, axi_signature
from codnn.hw.network.gather import Gather
from codnn.hw.network.postprocess import PostOp, PostProcess
from codnn.hw.network.results import ResultWriter

from codnn.hw.network.weights import AxiWeights, OnChipWeights, axi_read_signature
from codnn.hw.systolic import ColumnCombinedArray

__all__ = ["NetworkEngine"]

#: Activations and weights are 8 bits, accumulators 32 (what the compiler writes).
_DATA_BITS, _WEIGHT_BITS, _ACC_BITS = 8, 8, 32


class _State(enum.Enum, shape=4):
    IDLE = 0
    HEADER = 1          # the program's header, checked against the engine
    FETCH = 2           # a step's descriptor
    DISPATCH = 3
    BIAS = 4            # a row block's bias words
    TABLE = 5           # a tile's gather table words
    WEIGHTS = 6         # a tile's cell words, into the array
    DATA = 7            # the tile's positions into the array
    POST = 8            # pooling or an add on the post-processing unit
    ERROR = 9
    CHECK = 10          # the header against the engine
    LAUNCH = 11         # a loaded tile waits for the previous tile's last result
    DRAIN = 12          # a layer's last results
    TRANSFER = 13       # a load or store with external activation memory


class NetworkEngine(wiring.Component):
    """A column-combined array (``rows x cols``, ``alpha`` streams, ``mac`` kind, 8-bit
    weights and activations, 32-bit accumulators), its gather, the post-processing unit,
    and a sequencer that runs a binary program (``golden.network_program.encode_program``)
    over a weight image (words of ``2 * cols`` bytes), step after step.

    The host writes the program (``program_write``, u32 words), the weight image
    (``weight_write``; with ``weight_port="axi"`` it is in external memory instead, read
    through the AXI4 read port ``axi`` from byte ``weight_base``, a word every
    ``word_stride(2 * cols)`` bytes: ``hw.network.weights.AxiWeights``) and the input
    image (``act_write``, words of ``rows`` activations; a batch program's images, or its
    input in external activation memory) while the engine is idle, pulses
    ``start``, waits for ``busy`` to fall and reads the result (``act_read`` or
    ``acc_read``, data a cycle after the address). ``error`` is set (until the next
    ``start``) when the program's header does not match the engine, a step's operation is
    unknown or it reads or writes the accumulator buffer where it cannot (a layer's or
    pooling's source, pooling's or an add's destination, an add's operand flagged
    signed), a layer's pad code is not an activation (256 or more), a layer step names no
    images or more than 65535, a row block of a layer with an output stage has a shift of
    32 or more (before its first tile), or an external memory answered with an error;
    ``cycles`` counts the cycles of the last run, ``weight_bytes_read`` the bytes the
    weight memory has moved since reset.

    With ``act_port="axi"`` the engine has an external activation memory behind a second
    AXI4 port, ``act_axi`` (read and write; word ``k`` at byte ``act_base + k *
    act_stride``, ``act_base`` 4 KB aligned, else ``error`` at the first load or store):
    load and store steps move a region between it and the activation buffer
    (``hw.network.activations.AxiActivations``), counted in ``act_bytes_read`` and
    ``act_bytes_written``. Without it, a load or store is an unknown operation.

    Cycles, exactly ``golden.network_program.step_cycles`` (plus the header's): per step
    its descriptor, then a layer's tiles: a row block's bias words, a tile's gather table
    and cells (the array takes a row a cycle; the next tile's go into the array's other
    weight bank while the current tile's last positions are in the array), and its
    positions (every image's, for a step of several) through the gather and the array;
    a tile starts once the previous tile's last result is out (its partial sums are the
    next one's input); pooling and the add take the post-processing unit's cycles and 2.
    External weights add the memory's latency to each run of words (a row block's bias, a
    tile's table, its cells) when it answers a burst's address after that latency and then
    a word a cycle.

    Raises
    ------
    TypeError
        If a size is not a positive integer.
    ValueError
        If ``mac`` or ``weight_port`` is unknown.

    Parameters
    ----------
    rows, cols, alpha : int
    mac : str
    act_words, acc_words, psum_words, weight_words, program_words : int
        Buffer depths (``weight_words`` of ``2 * cols`` bytes, on-chip only;
        ``program_words`` of 32 bits).
    weight_port : str
        ``"onchip"`` or ``"axi"``.
    act_port : str
        ``"none"`` or ``"axi"``.
    """

    def __init__(self, *, rows, cols, alpha, mac="bitserial", act_words=2048, acc_words=16,
                 psum_words=1024, weight_words=4096, program_words=1024,
                 weight_port="onchip", act_port="none"):
        for value, what in ((rows, "Row count"), (cols, "Column count"), (alpha, "Alpha"),
                            (act_words, "Activation words"), (acc_words, "Accumulator words"),
                            (psum_words, "Partial-sum words"), (weight_words, "Weight words"),
                            (program_words, "Program words")):
            positive_int(value, what)
        if mac not in MAC_KINDS:
            raise ValueError(f"MAC kind must be one of {', '.join(MAC_KINDS)}, not {mac!r}")
        if weight_port not in WEIGHT_PORTS:
            raise ValueError(f"Weight port must be one of {', '.join(WEIGHT_PORTS)}, not "
                             f"{weight_port!r}")
        if act_port not in ACT_PORTS:
            raise ValueError(f"Activation port must be one of {', '.join(ACT_PORTS)}, not "
                             f"{act_port!r}")
        self._p = dict(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=act_words,
                       acc_words=acc_words, psum_words=psum_words, weight_words=weight_words,
                       program_words=program_words, weight_port=weight_port,
                       act_port=act_port)
        if weight_port == "onchip":
            memory_ports = {"weight_write": In(data.StructLayout({
                "addr": range(weight_words), "data": 16 * cols, "en": 1}))}
        else:
            memory_ports = {"weight_base": In(32),
                            "axi": Out(axi_read_signature(8 * word_stride(2 * cols)))}
        if act_port == "axi":
            stride = act_stride(EngineConfig(rows=rows, cols=cols, alpha=alpha))
            memory_ports.update({"act_base": In(32),
                                 "act_axi": Out(axi_signature(8 * stride)),
                                 "act_bytes_read": Out(32), "act_bytes_written": Out(32)})
        super().__init__({
            "program_write": In(data.StructLayout({"addr": range(program_words),
                                                   "data": 32, "en": 1})),
            **memory_ports,
            "weight_bytes_read": Out(32),
            "act_write": In(data.StructLayout({"addr": range(act_words),
                                               "data": rows * _DATA_BITS, "en": 1})),
            "act_read": In(range(act_words)),
            "act_read_data": Out(rows * _DATA_BITS),
            "acc_read": In(range(acc_words)),
            "acc_read_data": Out(rows * _ACC_BITS),
            "start": In(1),
            "busy": Out(1),
            "error": Out(1),
            "cycles": Out(32),
        })

    params = property(lambda self: dict(self._p), doc="The engine's parameters.")

    @property
    def latency(self):
        """Cycles from ``start`` to the first step's descriptor: the header's. A run's
        cycles follow its program (``golden.network_program.step_cycles``)."""
        return HEADER_CYCLES

    @property
    def config(self):
        """The ``golden.network_program.EngineConfig`` a program for this engine names."""
        p = self._p
        config = EngineConfig(rows=p["rows"], cols=p["cols"], alpha=p["alpha"], mac=p["mac"],
                              act_words=p["act_words"], acc_words=p["acc_words"],
                              psum_words=p["psum_words"])
        if p["act_port"] == "axi":
            config = dataclasses.replace(config, spill_words=(1 << 32) // act_stride(config))
        if p["weight_port"] == "axi":
            return dataclasses.replace(config, weight_bytes=external_weight_bytes(config))
        return dataclasses.replace(config, weight_bytes=p["weight_words"] * image_word(config))

    @classmethod
    def for_program(cls, program, weight_port="onchip"):
        """The engine a ``golden.network_program.Program`` was compiled for, its weight
        (on-chip) and program memories just large enough, an activation port when the
        program may use external activation memory."""
        e = program.engine
        return cls(rows=e.rows, cols=e.cols, alpha=e.alpha, mac=e.mac, act_words=e.act_words,
                   acc_words=e.acc_words, psum_words=e.psum_words,
                   weight_words=max(1, program.weight_image_bytes // image_word(e)),
                   program_words=HEADER_WORDS + STEP_WORDS * len(program.steps),
                   weight_port=weight_port, act_port="axi" if e.spill_words else "none")

    def elaborate(self, platform):
        m = Module()
        p = self._p
        R, W, A = p["rows"], p["cols"], p["alpha"]
        word_bits = 16 * W

        array = ColumnCombinedArray(rows=R, cols=W, alpha=A, weight_bits=_WEIGHT_BITS,
                                    data_bits=_DATA_BITS, acc_bits=_ACC_BITS, mac=p["mac"],
                                    out_bits=_DATA_BITS)
        gather = Gather(cols=W, alpha=A, lanes=R, depth=p["act_words"], ports=2)
        post = PostProcess(lanes=R, depth=p["act_words"], acc_depth=p["acc_words"])
        m.submodules.array, m.submodules.gather, m.submodules.post = array, gather, post

        def store(name, shape, depth):
            """A memory: its write port and a read port (data a cycle after the address)."""
            mem = memory.Memory(shape=unsigned(shape), depth=depth, init=[])
            m.submodules[name] = mem
            return mem.write_port(), mem.read_port(transparent_for=())
        prog_w, prog_r = store("program", 32, p["program_words"])
        error = Signal()
        if p["weight_port"] == "onchip":
            weights = OnChipWeights(word_bits=word_bits, words=p["weight_words"])
            m.d.comb += weights.write.eq(self.weight_write)
        else:
            weights = AxiWeights(word_bits=word_bits)
            m.d.comb += weights.base.eq(self.weight_base)
            with m.If(weights.error):
                m.d.sync += error.eq(1)
            wiring.connect(m, wiring.flipped(self.axi), weights.axi)
        m.submodules.weights = weights
        m.d.comb += self.weight_bytes_read.eq(weights.bytes_read)
        psum_w, psum_r = store("psums", R * _ACC_BITS, p["psum_words"])
        acc_w, acc_host = store("accumulators", R * _ACC_BITS, p["acc_words"])
        m.d.comb += [
            prog_w.addr.eq(self.program_write.addr), prog_w.data.eq(self.program_write.data),
            prog_w.en.eq(self.program_write.en),
            self.acc_read_data.eq(acc_host.data),
        ]

        state = Signal(_State)
        m.d.comb += self.busy.eq((state != _State.IDLE) & (state != _State.ERROR))
        m.d.comb += self.error.eq(error)
        cycles = Signal(32)
        m.d.comb += self.cycles.eq(cycles)
        with m.If(self.busy):
            m.d.sync += cycles.eq(cycles + 1)

        # Program words: in HEADER and FETCH word ``pc`` is read each cycle and arrives the
        # next, shifted into the header or the descriptor.
        pc = Signal(range(p["program_words"] + 1))
        header = Signal(32 * HEADER_WORDS)
        desc = Signal(32 * STEP_WORDS)
        fetched = counter(max(HEADER_WORDS, STEP_WORDS) + 2, name="fetched")
        steps_left = Signal(32)
        m.d.comb += prog_r.addr.eq(pc)

        def field(bits, k):
            return bits.word_select(k, 32)

        def region(bits, k):
            """(address, is acc, channels, height, width) of the region at word ``k``."""
            first, hw = field(bits, k), field(bits, k + 2)
            return first[:30], first[31], field(bits, k + 1), hw[:16], hw[16:]

        # Weight image words: a run from ``wptr`` per bias, table and cells (``requested``
        # once asked for), shifted into a register (bias, table) or offered to the array.
        wptr = Signal(32)
        requested = Signal()
        word = weights.o
        m.d.comb += weights.addr.eq(wptr)
        bias_words = bias_bytes(self.config) // image_word(self.config)
        bias = Signal(bias_words * word_bits)
        table = Signal(2 * A * word_bits)
        # A table word shifts in a cycle after it is taken, from a register, so that no
        # sequencer decision drives the enable of every table bit (WEIGHTS follows TABLE
        # for at least a cycle: the table is whole before the tile launches).
        table_word, table_we = Signal(word_bits), Signal()
        m.d.sync += [table_word.eq(word.payload[:word_bits]), table_we.eq(0)]
        with m.If(table_we):
            m.d.sync += table.eq(Cat(table[word_bits:], table_word))
        loaded = counter(max(bias_words, 2 * A, R) + 2, name="loaded")

        # Layer bookkeeping: positions count over the step's images (``total`` of them).
        row_block, col_block = Signal(16), Signal(16)
        position, total = Signal(33), Signal(33)
        op = desc[:8]
        flags = desc[8:16]
        l_src, _, _, l_h, l_w = region(desc, 1)
        l_dst, l_dst_acc, _, out_h, out_w = region(desc, 4)
        l_row_blocks, l_col_blocks = field(desc, 8), field(desc, 9)
        l_positions, l_weights = field(desc, 10), field(desc, 11)
        l_window = field(desc, 13)
        kernel, stride, padding = l_window[:8], l_window[8:16], l_window[16:24]
        l_rounds = l_window[24:32]
        l_images, strides = field(desc, 14), field(desc, 15)
        src_stride, dst_stride = strides[:16], strides[16:]
        last_col = col_block == l_col_blocks - 1

        # The gather's geometry and table for the layer and tile.
        m.d.comb += [
            gather.geometry.src.eq(l_src), gather.geometry.height.eq(l_h),
            gather.geometry.width.eq(l_w), gather.geometry.out_height.eq(out_h),
            gather.geometry.out_width.eq(out_w),
            gather.geometry.stride.eq(Mux(kernel == 0, 1, stride)),
            gather.geometry.padding.eq(Mux(kernel == 0, 0, padding)),
            gather.geometry.pad.eq(field(desc, 12)),
            gather.geometry.rounds.eq(l_rounds),
            gather.geometry.images.eq(l_images), gather.geometry.image_words.eq(src_stride),
            gather.table.eq(table),
        ]
        # Each row's shift, from the row block's bias words, goes with its weight beat. A
        # shift past the output stage's stops the run before the block's first tile.
        row_shifts = [bias.word_select(4 * R + r, 8) for r in range(R)]
        m.d.comb += array.shift.eq(Array(row_shifts)[loaded])
        bad_shift = flags[0] & Cat(v[5:] != 0 for v in row_shifts).any()

        # Data beats: the gather's vectors with the partial sums of this position (the
        # bias, or the previous column block's sums from the partial-sum buffer, read a
        # cycle ahead).
        taking = array.data.valid & array.data.ready
        m.d.comb += [
            array.data.valid.eq((state == _State.DATA) & gather.o.valid),
            gather.o.ready.eq((state == _State.DATA) & array.data.ready),
            array.data.payload.x.eq(gather.o.payload),
            array.data.payload.last.eq(position == total - 1),
            psum_r.addr.eq(position + taking),
        ]
        for r in range(R):
            m.d.comb += array.data.payload.psum[r].eq(
                Mux(col_block == 0, bias.word_select(r, 32), psum_r.data.word_select(r, 32)))
        with m.If(taking):
            m.d.sync += position.eq(position + 1)

        # Results: the partial sums of a column block, or the layer's output. They come
        # while the next tile loads, so where they go is taken when their tile starts.
        results = ResultWriter(result_layout=array.result.payload.shape(),
                               act_depth=p["act_words"], acc_depth=p["acc_words"],
                               psum_depth=p["psum_words"])
        m.submodules.results = results
        wiring.connect(m, array.result, results.result)
        block_base = Signal(32)             # row_block * positions, kept as a running sum
        act_write = gather.write
        launch = Signal()                   # the gather starts the loaded tile (below)
        free = results.free                 # the started tile's results are out after this
        m.d.comb += [
            results.launch.eq(launch), results.to_psums.eq(~last_col),
            results.to_acc.eq(l_dst_acc), results.base.eq(l_dst + block_base),
            results.stride.eq(dst_stride), results.positions.eq(l_positions),
            results.total.eq(total),
            psum_w.addr.eq(results.psum_write.addr), psum_w.data.eq(results.psum_write.data),
            psum_w.en.eq(results.psum_write.en),
            acc_w.addr.eq(results.acc_write.addr), acc_w.data.eq(results.acc_write.data),
            acc_w.en.eq(results.acc_write.en),
        ]
        with m.If(results.act_write.en):
            m.d.comb += [act_write.addr.eq(results.act_write.addr),
                         act_write.data.eq(results.act_write.data), act_write.en.eq(1)]

        # Weight beats: a cell word a cycle as the array takes them.
        in_weights = state == _State.WEIGHTS
        m.d.comb += [array.weights.valid.eq(in_weights & requested & word.valid)]
        sel_bits = select_bits(A)
        for c in range(W):
            cell = word.payload.word_select(c, 16)
            m.d.comb += [array.weights.payload[c].w.eq(cell[:8]),
                         array.weights.payload[c].sel.eq(cell[8:8 + sel_bits])]

        # Post-processing: its step from the descriptor; it reads through the gather's
        # spare ports and writes the activation buffer.
        # The descriptor's regions: pooling's source and destination, the add's a, b and
        # destination.
        first, first_acc, _, p_h, p_w = region(desc, 1)
        transfer_read = Signal(range(p["act_words"]))      # a store's buffer reads
        # Who reads column 0's copy of the buffer through the gather's other port: the
        # state a cycle ago (the post-processing unit and a store read from the cycle after
        # their start on; the host only while the engine is idle).
        reads_post, reads_transfer = Signal(), Signal()
        m.d.sync += [reads_post.eq(state == _State.POST),
                     reads_transfer.eq(state == _State.TRANSFER)]
        second, second_acc, _, p_oh, p_ow = region(desc, 4)
        third, third_acc = region(desc, 7)[:2]
        pool_window = field(desc, 7)
        is_add = op == 2
        pk = pool_window[:8]
        global_pool = pk == 0
        blocks, words_add = field(desc, 8), field(desc, 12)
        m.d.comb += [
            post.step.op.eq(Mux(is_add, PostOp.ADD, Mux(flags[0], PostOp.AVG_POOL,
                                                         PostOp.MAX_POOL))),
            post.step.count_pad.eq(flags[1]),
            post.step.a_acc.eq(first_acc), post.step.b_acc.eq(second_acc),
            post.step.a_signed.eq(flags[0]), post.step.b_signed.eq(flags[1]),
            post.step.out_signed.eq(flags[2]),
            post.step.src.eq(first), post.step.src_b.eq(second),
            post.step.dst.eq(Mux(is_add, third, second)),
            post.step.blocks.eq(blocks), post.step.words.eq(words_add),
            post.step.height.eq(p_h), post.step.width.eq(p_w),
            post.step.out_height.eq(p_oh), post.step.out_width.eq(p_ow),
            post.step.kernel_h.eq(Mux(global_pool, p_h, pk)),
            post.step.kernel_w.eq(Mux(global_pool, p_w, pk)),
            post.step.stride.eq(Mux(global_pool, 1, pool_window[8:16])),
            post.step.padding.eq(Mux(global_pool, 0, pool_window[16:24])),
            post.step.ma.eq(field(desc, 10)), post.step.mb.eq(field(desc, 11)),
            gather.aux[0].eq(Mux(reads_post, post.read[0],
                                 Mux(reads_transfer, transfer_read, self.act_read))),
            gather.aux[1].eq(post.read[1]),
            post.read_data[0].eq(gather.aux_data[0]), post.read_data[1].eq(gather.aux_data[1]),
            self.act_read_data.eq(gather.aux_data[0]),
            acc_host.addr.eq(Mux(state == _State.POST, post.acc_read, self.acc_read)),
            post.acc_read_data.eq(acc_host.data),
        ]
        # What no step can be: an unknown operation, a layer or pooling reading the
        # accumulator buffer, pooling or an add writing it, an add calling accumulators
        # signed activations, a layer padding with more than an activation or reading
        # in no rounds or more than the gather has.
        signed_acc = (flags[0] & first_acc) | (flags[1] & second_acc)
        wide_pad = field(desc, 12)[_DATA_BITS:] != 0
        # Loads and stores: with an activation port, a region of the activation buffer
        # (``first``) and external words from ``field(desc, 4)``, ``field(desc, 5)`` of them.
        is_transfer = op >= 3
        if p["act_port"] == "axi":
            xfer = AxiActivations(word_bits=R * _DATA_BITS, depth=p["act_words"])
            m.submodules.activations = xfer
            wiring.connect(m, wiring.flipped(self.act_axi), xfer.axi)
            m.d.comb += [xfer.base.eq(self.act_base), xfer.store.eq(op == 4),
                         xfer.addr.eq(field(desc, 4)), xfer.buf.eq(first),
                         xfer.count.eq(field(desc, 5)), xfer.read_data.eq(gather.aux_data[0]),
                         transfer_read.eq(xfer.read),
                         self.act_bytes_read.eq(xfer.bytes_read),
                         self.act_bytes_written.eq(xfer.bytes_written)]
            with m.If(xfer.error):
                m.d.sync += error.eq(1)
            with m.If(xfer.write.en):
                m.d.comb += [act_write.addr.eq(xfer.write.addr),
                             act_write.data.eq(xfer.write.data), act_write.en.eq(1)]
            bad_transfer = first_acc | (self.act_base[:12] != 0)
            last_op = 4
        else:
            xfer, bad_transfer, last_op = None, 1, 2
        bad_rounds = (l_rounds == 0) | (l_rounds > gather.rounds)
        bad_images = (l_images == 0) | (l_images[16:] != 0)
        invalid = (op > last_op) | Mux(
            op == 0, first_acc | wide_pad | bad_rounds | bad_images,
            Mux(is_add, third_acc | signed_acc,
                Mux(is_transfer, bad_transfer, first_acc | second_acc)))
        with m.If(post.write.en):
            m.d.comb += [act_write.addr.eq(post.write.addr), act_write.data.eq(post.write.data),
                         act_write.en.eq(1)]
        with m.If((state == _State.IDLE) | (state == _State.ERROR)):
            m.d.comb += [act_write.addr.eq(self.act_write.addr),
                         act_write.data.eq(self.act_write.data),
                         act_write.en.eq(self.act_write.en)]

        expected = [MAGIC, VERSION, None, R, W, A,
                    _WEIGHT_BITS | _DATA_BITS << 8 | _ACC_BITS << 16, MAC_KINDS.index(p["mac"]),
                    p["act_words"], p["acc_words"], p["psum_words"]]
        started = Signal()
        with m.Switch(state):
            with m.Case(_State.IDLE, _State.ERROR):
                with m.If(self.start):
                    m.d.sync += [state.eq(_State.HEADER), pc.eq(0), fetched.eq(0),
                                 cycles.eq(0), error.eq(0)]
            with m.Case(_State.HEADER, _State.FETCH):
                # Word pc is read; the one before it arrives (from the second cycle on).
                size = Mux(state == _State.HEADER, HEADER_WORDS, STEP_WORDS)
                with m.If(fetched != 0):
                    with m.If(state == _State.HEADER):
                        m.d.sync += header.eq(Cat(header[32:], prog_r.data))
                    with m.Else():
                        m.d.sync += desc.eq(Cat(desc[32:], prog_r.data))
                with m.If(fetched != size):
                    m.d.sync += [pc.eq(pc + 1), fetched.eq(fetched + 1)]
                with m.Else():
                    m.d.sync += [fetched.eq(0), state.eq(Mux(state == _State.HEADER,
                                                             _State.CHECK, _State.DISPATCH))]
            with m.Case(_State.CHECK):
                fits = Cat(field(header, k) == v
                           for k, v in enumerate(expected) if v is not None).all()
                with m.If(~fits):
                    m.d.sync += [error.eq(1), state.eq(_State.ERROR)]
                with m.Elif(field(header, 2)[:24] == 0):
                    m.d.sync += state.eq(_State.IDLE)
                with m.Else():
                    m.d.sync += [steps_left.eq(field(header, 2)[:24]),
                                 state.eq(_State.FETCH)]
            with m.Case(_State.DISPATCH):
                m.d.sync += [steps_left.eq(steps_left - 1), row_block.eq(0), col_block.eq(0),
                             block_base.eq(0), total.eq(l_positions[:17] * l_images[:16]),
                             wptr.eq(l_weights), loaded.eq(0), started.eq(0), requested.eq(0)]
                m.d.sync += state.eq(Mux(op == 0, _State.BIAS,
                                         Mux(is_transfer, _State.TRANSFER, _State.POST)))
                with m.If(invalid):
                    m.d.sync += [error.eq(1), state.eq(_State.ERROR)]
            with m.Case(_State.BIAS, _State.TABLE):
                size = Mux(state == _State.BIAS, bias_words, 2 * A)
                m.d.comb += weights.count.eq(size)
                with m.If((state == _State.TABLE) & bad_shift):
                    with m.If(~results.pending):
                        m.d.sync += [error.eq(1), state.eq(_State.ERROR)]
                with m.Elif(~requested):
                    m.d.comb += weights.start.eq(1)
                    m.d.sync += requested.eq(1)
                with m.Else():
                    m.d.comb += word.ready.eq(1)
                    with m.If(word.valid):
                        with m.If(state == _State.BIAS):
                            m.d.sync += bias.eq(Cat(bias[word_bits:], word.payload[:word_bits]))
                        with m.Else():
                            m.d.sync += table_we.eq(1)
                        m.d.sync += loaded.eq(loaded + 1)
                        with m.If(loaded == size - 1):
                            m.d.sync += [loaded.eq(0), requested.eq(0), wptr.eq(wptr + size),
                                         state.eq(Mux(state == _State.BIAS, _State.TABLE,
                                                      _State.WEIGHTS))]
            with m.Case(_State.WEIGHTS):
                # The tile's cell words go to the array as the array takes them.
                weights_go = array.weights.valid & array.weights.ready
                m.d.comb += [weights.count.eq(R),
                             word.ready.eq(requested & array.weights.ready)]
                with m.If(~requested):
                    m.d.comb += weights.start.eq(1)
                    m.d.sync += requested.eq(1)
                with m.Elif(weights_go):
                    m.d.sync += loaded.eq(loaded + 1)
                    with m.If(loaded == R - 1):
                        m.d.sync += [requested.eq(0), loaded.eq(0), wptr.eq(wptr + R),
                                     state.eq(_State.LAUNCH)]
                        m.d.comb += launch.eq(free)
            with m.Case(_State.LAUNCH):
                m.d.comb += launch.eq(free)
            with m.Case(_State.DATA):
                # Once the tile's last position is in the array, the next tile loads while
                # its results come out (the next one starts after them: it may read them).
                with m.If(taking & (position == total - 1)):
                    with m.If(~last_col):
                        m.d.sync += [col_block.eq(col_block + 1), state.eq(_State.TABLE)]
                    with m.Elif(row_block != l_row_blocks - 1):
                        m.d.sync += [row_block.eq(row_block + 1), col_block.eq(0),
                                     block_base.eq(block_base + l_positions),
                                     state.eq(_State.BIAS)]
                    with m.Else():
                        m.d.sync += state.eq(_State.DRAIN)
            with m.Case(_State.DRAIN):
                with m.If(free):
                    m.d.sync += state.eq(Mux(steps_left == 0, _State.IDLE, _State.FETCH))
            with m.Case(_State.POST, _State.TRANSFER):
                # Pooling and adds on the post-processing unit, loads and stores on the
                # activation port: started once, awaited.
                in_post = state == _State.POST
                busy = post.busy if xfer is None else Mux(in_post, post.busy, xfer.busy)
                with m.If(~started):
                    m.d.comb += post.start.eq(in_post)
                    if xfer is not None:
                        m.d.comb += xfer.start.eq(~in_post)
                    m.d.sync += started.eq(1)
                with m.Elif(~busy):
                    m.d.sync += state.eq(Mux(steps_left == 0, _State.IDLE, _State.FETCH))
        with m.If(launch):           # after the sequencer, so that this state wins
            m.d.comb += gather.start.eq(1)
            m.d.sync += [position.eq(0), state.eq(_State.DATA)]
        return m
