"""The network engine: a whole network from a program and a weight image, no host step
between layers (docs/semantics.md section 9)."""

import dataclasses

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, enum, memory, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.network_program import (ACT_PORTS, DECIDE_CYCLES, HEADER_CYCLES,
                                          MAX_GATHER_PORTS, PREFETCH_BURST,
                                          PREFETCH_BURSTS, WEIGHT_PORTS,
                                          EngineConfig, act_stride, bias_bytes,
                                          external_weight_bytes, image_word, max_shift,
                                          table_words, word_stride)
from codnn.golden.program_format import HEADER_WORDS, STEP_WORDS, Op
from codnn.golden.systolic import MAC_KINDS, REQUANT_KINDS, select_bits
from codnn.hw.common.counters import counter
from codnn.hw.common.delays import stage
from codnn.hw.common.params import positive_int
from codnn.hw.network.activations import AxiActivations, axi_signature
from codnn.hw.network.descriptor import HeaderLayout, StepLayout
from codnn.hw.network.gather import Gather
from codnn.hw.network.postprocess import PostOp, PostProcess
from codnn.hw.network.program_check import ProgramCheck
from codnn.hw.network.results import ResultWriter

from codnn.hw.network.weights import AxiWeights, OnChipWeights, axi_read_signature
from codnn.hw.systolic import ColumnCombinedArray

__all__ = ["NetworkEngine"]

#: Activations and weights are 8 bits, accumulators 32 (what the compiler writes).
_DATA_BITS, _WEIGHT_BITS, _ACC_BITS = 8, 8, 32


@dataclasses.dataclass(slots=True)
class _Shared:
    """What the engine's stages share, by the method that makes it (``elaborate`` calls
    them in this order; a later one reads what an earlier one made)."""

    # _units: the array, gather, post-processing unit, weight memory and memories.
    word_bits: int = None
    array: object = None
    gather: object = None
    post: object = None
    weights: object = None              # OnChipWeights or AxiWeights
    prog_r: object = None               # memory ports: the program's read
    prog_data: Signal = None            # its word, registered
    psum_w: object = None
    psum_r: object = None
    acc_w: object = None
    acc_host: object = None             # the accumulator buffer's host read port
    error: Signal = None
    # _run_state: the sequencer's state, the program counter, header and descriptor.
    state: Signal = None
    cycles: Signal = None
    pc: Signal = None
    header: Signal = None               # HeaderLayout
    desc: Signal = None                 # StepLayout
    check: object = None                # ProgramCheck
    fetched: Signal = None
    steps_left: Signal = None
    started: Signal = None
    # _tile_words: the weight words in flight, a row block's bias, a tile's table.
    wptr: Signal = None
    requested: Signal = None
    word: object = None                 # the weight memory's output stream
    bias_words: Signal = None
    bias: Signal = None
    table_words: Signal = None
    table_we: Signal = None
    loaded: Signal = None
    aside: bool = None                  # the table through the weight memory's second port
    table_at: Signal = None             # ... and its words taken of a tile
    # _layer: a layer step's tiles, positions and results.
    map_height: object = None           # the window's map (before fused pooling)
    map_width: object = None
    row_block: Signal = None
    col_block: Signal = None
    position: Signal = None
    total: Signal = None
    last_col: Signal = None
    bad_shift: object = None            # a row block's shift past the output stage
    selects: object = None              # a cell word's stream selects, column by column
    taking: object = None
    streaming: Signal = None
    first_col: Signal = None
    results: object = None              # ResultWriter
    block_base: Signal = None
    launch: object = None
    # _post_steps and _transfers: the post-processing unit's and the transfers' reads.
    transfer_read: object = None
    xfer: object = None                 # AxiActivations, or None without the port


class _State(enum.Enum, shape=4):
    IDLE = 0
    HEADER = 1          # the program's header, checked against the engine
    FETCH = 2           # a step's descriptor
    DISPATCH = 3
    BIAS = 4            # a row block's bias words
    TABLE = 5           # a tile's gather table words (one run with its cells)
    WEIGHTS = 6         # a tile's cell words, into the array
    POST = 8            # pooling or an add on the post-processing unit
    ERROR = 9
    CHECK = 10          # the header against the engine
    LAUNCH = 11         # a loaded tile waits for the previous one's last position
    DRAIN = 12          # a layer's last results
    TRANSFER = 13       # a load or store with external activation memory


class NetworkEngine(wiring.Component):
    """A column-combined array (``rows x cols``, ``alpha`` streams, ``mac`` kind, 8-bit
    weights and activations, 32-bit accumulators), its gather, the post-processing unit,
    and a sequencer that runs a binary program (``codnn.golden.network_program.encode_program``)
    over a weight image (words of ``2 * cols`` bytes), step after step.

    The host writes the program (``program_write``, u32 words), the weight image
    (``weight_write``; with ``weight_port="axi"`` it is in external memory instead, read
    through the AXI4 read port ``axi`` from byte ``weight_base``, a word every
    ``word_stride(2 * cols)`` bytes: ``codnn.hw.network.weights.AxiWeights``) and the input
    image (``act_write``, words of ``rows`` activations; a batch program's images, or its
    input in external activation memory) while the engine is idle, pulses
    ``start``, waits for ``busy`` to fall and reads the result (``act_read`` or
    ``acc_read``, data a cycle after the address). ``error`` is set (until the next
    ``start``) when the engine refuses the program (``ProgramCheck``: the header when a
    run starts, each step's descriptor when it is reached; the same decisions as
    ``codnn.golden.network_program.decode_program`` with the engine), and the run stops;
    when a row block's shift is past the output stage's (32 or more; 48 or more with
    ``requant="multiplier"``: the run stops before its first tile); and,
    the run going on to its end with results that mean nothing, when a tile's part of
    the weight image names a gather lane past the rows or a stream select past alpha,
    its gather reads a word outside the program's activation buffer, or an external
    memory answers with an error.
    ``cycles`` counts the cycles of the last run, ``weight_bytes_read`` the bytes the
    weight memory has moved since reset. A program compiled for smaller buffers runs
    (its header names them). docs/networks.md, "Driving the engine", has every port.

    With ``act_port="axi"`` the engine has an external activation memory behind a second
    AXI4 port, ``act_axi`` (read and write; word ``k`` at byte ``act_base + k *
    act_stride``, ``act_base`` 4 KB aligned, else ``error`` at the first load or store):
    load and store steps move a region between it and the activation buffer
    (``codnn.hw.network.activations.AxiActivations``), counted in ``act_bytes_read`` and
    ``act_bytes_written``. Without it, a load or store is an unknown operation.

    Cycles, exactly ``codnn.golden.network_program.step_cycles`` (plus the header's): per
    step its descriptor, then a layer's tiles: a row block's bias words, a tile's gather
    table and cells (with ``weight_ports`` 2 on chip two runs at once, else one; the array
    takes a row a cycle into its other weight bank once that bank is free), and its
    positions (every image's, for a step of several) through the gather and the array; the
    next tile loads while a tile streams and starts once the tile's last position is in (the
    result writer adds the partial sums behind the array); the layer ends with its last
    result written (``layer_cycles``; with fused pooling up to ``POOL_WRITE_STEPS`` later,
    with a fused add ``ADD_WRITE_STEPS - RESULT_WRITE_STEPS`` later);
    pooling and the add take the post-processing unit's cycles and 2.
    External weights are a layer's run, prefetched from its dispatch in bursts of
    ``PREFETCH_BURST`` words, ``PREFETCH_BURSTS`` held at once (``AxiWeights``): the
    model takes the memory's latency from a burst's address to its first word, then a
    word a cycle.

    Raises
    ------
    TypeError
        If a size is not a positive integer.
    ValueError
        If ``mac``, ``weight_port`` or ``requant`` is unknown.

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
    gather_ports : int
        Read ports of each lane bank of the activation buffer.
    weight_ports : int
        Read ports of the on-chip weight memory: 2 reads a tile's gather table beside its
        cells (a copy of the memory's block RAMs for the second), 1 one after the other.
    requant : str
        The output stage: ``"shift"``, or ``"multiplier"`` (each row's sum times its
        16-bit multiplier from the row block's bias words before the shift: a 32 x 16-bit
        product per row, ``REQUANT_PRODUCT_STEPS`` cycles more per layer).
    """

    def __init__(self, *, rows, cols, alpha, mac="bitserial", act_words=2048, acc_words=16,
                 psum_words=1024, weight_words=4096, program_words=1024,
                 weight_port="onchip", act_port="none", gather_ports=2, requant="shift",
                 weight_ports=2):
        for value, what in ((rows, "Row count"), (cols, "Column count"), (alpha, "Alpha"),
                            (act_words, "Activation words"), (acc_words, "Accumulator words"),
                            (psum_words, "Partial-sum words"), (weight_words, "Weight words"),
                            (program_words, "Program words"), (gather_ports, "Gather ports")):
            positive_int(value, what)
        if gather_ports > MAX_GATHER_PORTS:
            raise ValueError(f"Gather ports must be at most {MAX_GATHER_PORTS}, not "
                             f"{gather_ports}")
        if weight_ports not in (1, 2) or isinstance(weight_ports, bool):
            raise ValueError(f"Weight ports must be 1 or 2, not {weight_ports!r}")
        if mac not in MAC_KINDS:
            raise ValueError(f"MAC kind must be one of {', '.join(MAC_KINDS)}, not {mac!r}")
        if requant not in REQUANT_KINDS:
            raise ValueError(f"Requantization must be one of {', '.join(REQUANT_KINDS)}, "
                             f"not {requant!r}")
        if weight_port not in WEIGHT_PORTS:
            raise ValueError(f"Weight port must be one of {', '.join(WEIGHT_PORTS)}, not "
                             f"{weight_port!r}")
        if act_port not in ACT_PORTS:
            raise ValueError(f"Activation port must be one of {', '.join(ACT_PORTS)}, not "
                             f"{act_port!r}")
        self._p = dict(rows=rows, cols=cols, alpha=alpha, mac=mac, act_words=act_words,
                       acc_words=acc_words, psum_words=psum_words, weight_words=weight_words,
                       program_words=program_words, weight_port=weight_port,
                       act_port=act_port, gather_ports=gather_ports, requant=requant,
                       weight_ports=weight_ports)
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
    def memories(self):
        """The on-chip memories it is built with: ``{name: (width in bits, depth,
        copies)}`` (``program_memories``)."""
        return _memories(self._p)

    @property
    def latency(self):
        """Cycles from ``start`` to the first step's descriptor: the header's. A run's
        cycles follow its program (``codnn.golden.network_program.step_cycles``)."""
        return HEADER_CYCLES

    @property
    def config(self):
        """The ``codnn.golden.network_program.EngineConfig`` a program for this engine names."""
        p = self._p
        config = EngineConfig(rows=p["rows"], cols=p["cols"], alpha=p["alpha"], mac=p["mac"],
                              act_words=p["act_words"], acc_words=p["acc_words"],
                              psum_words=p["psum_words"], gather_ports=p["gather_ports"],
                              requant=p["requant"], weight_ports=p["weight_ports"])
        if p["act_port"] == "axi":
            config = dataclasses.replace(config, spill_words=(1 << 32) // act_stride(config))
        if p["weight_port"] == "axi":
            return dataclasses.replace(config, weight_bytes=external_weight_bytes(config))
        return dataclasses.replace(config, weight_bytes=p["weight_words"] * image_word(config))

    @classmethod
    def for_program(cls, program, weight_port="onchip"):
        """The engine a ``codnn.golden.network_program.Program`` was compiled for, its weight
        (on-chip) and program memories just large enough, an activation port when the
        program may use external activation memory."""
        return cls(**cls.program_params(program, weight_port))

    @staticmethod
    def program_params(program, weight_port="onchip"):
        """The parameters of ``for_program``'s engine, without building it."""
        e = program.engine
        return dict(rows=e.rows, cols=e.cols, alpha=e.alpha, mac=e.mac,
                    act_words=e.act_words, acc_words=e.acc_words, psum_words=e.psum_words,
                    weight_words=max(1, program.weight_image_bytes // image_word(e)),
                    program_words=HEADER_WORDS + STEP_WORDS * len(program.steps),
                    weight_port=weight_port, act_port="axi" if e.spill_words else "none",
                    gather_ports=e.gather_ports, requant=e.requant,
                    weight_ports=e.weight_ports)

    @classmethod
    def program_memories(cls, program, weight_port="onchip"):
        """The on-chip memories of ``for_program``'s engine, without building it: ``{name:
        (width in bits, depth, copies)}``; the activation buffer is a bank per lane, which
        yosys copies for each of the gather's ``gather_ports`` read ports and the result
        writer's (a fused add's operand); behind the
        AXI4 port the weight memory is the prefetch FIFO's words."""
        return _memories(cls.program_params(program, weight_port))

    def elaborate(self, platform):
        m = Module()
        k = _Shared()
        self._units(m, k)
        self._run_state(m, k)
        self._tile_words(m, k)
        self._layer(m, k)
        self._post_steps(m, k)
        self._transfers(m, k)
        self._buffer_writes(m, k)
        self._sequencer(m, k)
        return m

    def _units(self, m, k):
        """The array, the gather, the post-processing unit, the weight memory (on chip or
        behind the AXI4 port) and the program, partial-sum and accumulator memories."""
        p = self._p
        R, W, A = p["rows"], p["cols"], p["alpha"]
        k.word_bits = 16 * W
        k.array = ColumnCombinedArray(rows=R, cols=W, alpha=A, weight_bits=_WEIGHT_BITS,
                                      data_bits=_DATA_BITS, acc_bits=_ACC_BITS, mac=p["mac"])
        k.gather = Gather(cols=W, alpha=A, lanes=R, depth=p["act_words"],
                          ports=p["gather_ports"])
        k.post = PostProcess(lanes=R, depth=p["act_words"])
        m.submodules.array, m.submodules.gather, m.submodules.post = k.array, k.gather, k.post

        def store(name, shape, depth):
            """A memory: its write port and a read port (data a cycle after the address)."""
            mem = memory.Memory(shape=unsigned(shape), depth=depth, init=[])
            m.submodules[name] = mem
            return mem.write_port(), mem.read_port(transparent_for=())
        prog_w, k.prog_r = store("program", 32, p["program_words"])
        k.error = Signal(name="error")
        if p["weight_port"] == "onchip":
            k.weights = OnChipWeights(word_bits=k.word_bits, words=p["weight_words"],
                                      aside=p["weight_ports"] == 2)
            m.d.comb += k.weights.write.eq(self.weight_write)
        else:
            k.weights = AxiWeights(word_bits=k.word_bits)
            m.d.comb += k.weights.base.eq(self.weight_base)
            with m.If(k.weights.error):
                m.d.sync += k.error.eq(1)
            wiring.connect(m, wiring.flipped(self.axi), k.weights.axi)
        m.submodules.weights = k.weights
        m.d.comb += self.weight_bytes_read.eq(k.weights.bytes_read)
        k.psum_w, k.psum_r = store("psums", R * _ACC_BITS, p["psum_words"])
        k.acc_w, k.acc_host = store("accumulators", R * _ACC_BITS, p["acc_words"])
        m.d.comb += [
            prog_w.addr.eq(self.program_write.addr), prog_w.data.eq(self.program_write.data),
            prog_w.en.eq(self.program_write.en),
            self.acc_read_data.eq(k.acc_host.data),
        ]

    def _run_state(self, m, k):
        """The sequencer's state, ``busy``, ``error``, the run's cycle count, and the
        program words: in HEADER and FETCH word ``pc`` is read each cycle and arrives the
        next, shifted into the header or the step's descriptor (``k.desc``, a
        ``StepLayout``)."""
        p = self._p
        k.state = Signal(_State, name="state")
        m.d.comb += self.busy.eq((k.state != _State.IDLE) & (k.state != _State.ERROR))
        m.d.comb += self.error.eq(k.error)
        k.cycles = Signal(32, name="cycles")
        m.d.comb += self.cycles.eq(k.cycles)
        with m.If(self.busy):
            m.d.sync += k.cycles.eq(k.cycles + 1)
        k.pc = Signal(range(p["program_words"] + 1), name="pc")
        k.header = Signal(HeaderLayout, name="header")
        k.desc = Signal(StepLayout, name="desc")
        config = self.config
        k.check = check = ProgramCheck(
            rows=p["rows"], cols=p["cols"], alpha=p["alpha"], mac=p["mac"],
            act_words=p["act_words"], acc_words=p["acc_words"], psum_words=p["psum_words"],
            gather_ports=p["gather_ports"], requant=p["requant"],
            weight_limit=config.weight_bytes // image_word(config),
            ext_limit=config.spill_words, program_words=p["program_words"])
        m.submodules.check = check
        m.d.comb += [check.header.eq(k.header), check.desc.eq(k.desc)]
        k.fetched = counter(max(HEADER_WORDS, STEP_WORDS) + DECIDE_CYCLES + 3, name="fetched")
        k.steps_left = Signal(32, name="steps_left")
        k.started = Signal(name="started")
        m.d.comb += k.prog_r.addr.eq(k.pc)
        # The memory's word registered beside it before it fans out to the header's and the
        # descriptor's registers.
        k.prog_data = stage(m, k.prog_r.data, "program_data")

    def _tile_words(self, m, k):
        """Weight image words: a run from ``wptr`` per bias, table and cells
        (``requested`` once asked for), shifted into a register (bias), written into the
        gather's table memories (table) or offered to the array (the cells, a row a
        cycle)."""
        p = self._p
        R, W, A = p["rows"], p["cols"], p["alpha"]
        word_bits = k.word_bits
        k.wptr = Signal(32, name="wptr")
        k.requested = Signal(name="requested")
        k.word = word = k.weights.o
        k.bias_words = bias_bytes(self.config) // image_word(self.config)
        k.bias = Signal(k.bias_words * word_bits, name="bias")
        k.table_words = table_words(self.config)
        k.loaded = counter(max(k.bias_words, k.table_words, R) + 2, name="loaded")
        # With two read ports on chip a tile's table comes through the memory's second
        # (``aside``) while its cells come through the first: ``table_at`` counts its words.
        k.table_at = counter(k.table_words + 1, name="table_at")
        on_chip = self._p["weight_port"] == "onchip"
        k.aside = on_chip and self._p["weight_ports"] == 2
        in_table = k.state == _State.TABLE
        table_word = k.weights.aside.o if k.aside else word
        if k.aside:
            m.d.comb += [k.weights.addr.eq(Mux(in_table, k.wptr + k.table_words, k.wptr)),
                         k.weights.count.eq(Mux(in_table, R, k.bias_words)),
                         k.weights.aside.addr.eq(k.wptr),
                         k.weights.aside.count.eq(k.table_words)]
        elif on_chip:
            # The table's words and then the cells as one run.
            m.d.comb += [k.weights.addr.eq(k.wptr),
                         k.weights.count.eq(Mux(in_table, k.table_words + R, k.bias_words))]
        else:
            # A layer's words are asked for as one run at its dispatch (prefetched).
            m.d.comb += [k.weights.addr.eq(k.desc.layer.weights),
                         k.weights.count.eq(k.check.layer_words)]
        # A table word goes to the gather a cycle after it is taken, from a register, so
        # that no sequencer decision drives the write of the table memories (the gather
        # swaps its tables as the tile launches, its lanes checked a cycle later).
        table_write, k.table_we = k.gather.table_write, Signal(name="table_we")
        m.d.sync += [table_write.data.eq(table_word.payload[:word_bits]),
                     table_write.addr.eq(k.table_at if k.aside else k.loaded),
                     k.table_we.eq(0)]
        m.d.comb += table_write.en.eq(k.table_we)
        # Weight beats: a cell word a cycle as the array takes them (on chip beside the
        # table's words, behind the AXI4 port after them).
        array = k.array
        m.d.comb += array.weights.valid.eq(
            (in_table if k.aside else k.state == _State.WEIGHTS) & k.requested & word.valid)
        sel_bits = select_bits(A)
        for c in range(W):
            cell = word.payload.word_select(c, 16)
            m.d.comb += [array.weights.payload[c].w.eq(cell[:8]),
                         array.weights.payload[c].sel.eq(cell[8:8 + sel_bits])]

    def _layer(self, m, k):
        """A layer step's datapath: the gather's geometry and table, each row's shift,
        the data beats (the gather's vectors with their partial sums) and the result
        writer. Positions count over the step's images (``total`` of them)."""
        p = self._p
        R = p["rows"]
        array, gather, layer = k.array, k.gather, k.desc.layer
        # The window's map: the result's, or twice it plus the odd flags with fused
        # pooling (under 65536 a side: a larger map has no room in the activation buffer).
        k.map_height, k.map_width = (
            Mux(layer.pool, Cat(odd, side), side)[:16] for odd, side in (
                (layer.pool_odd_height, layer.dst.height),
                (layer.pool_odd_width, layer.dst.width)))
        k.row_block, k.col_block = Signal(16, name="row_block"), Signal(16, name="col_block")
        k.position, k.total = Signal(33, name="position"), Signal(33, name="total")
        # The step's last position, registered from ``total`` (set at dispatch).
        final = Signal(33, name="final_position")
        m.d.sync += final.eq(k.total - 1)
        k.last_col = k.col_block == layer.col_blocks - 1
        # The gather's geometry, registered every cycle from the descriptor (no enable: the
        # descriptor holds still from the step's dispatch to its end).
        m.d.sync += [
            gather.geometry.src.eq(layer.src.addr),
            gather.geometry.height.eq(layer.src.height),
            gather.geometry.width.eq(layer.src.width),
            gather.geometry.out_height.eq(k.map_height),
            gather.geometry.out_width.eq(k.map_width),
            gather.geometry.stride.eq(Mux(layer.kernel == 0, 1, layer.stride)),
            gather.geometry.padding_top.eq(Mux(layer.kernel == 0, 0, layer.padding_top)),
            gather.geometry.padding_left.eq(Mux(layer.kernel == 0, 0, layer.padding_left)),
            gather.geometry.pad.eq(layer.pad),
            gather.geometry.rounds.eq(layer.rounds),
            gather.geometry.images.eq(layer.images),
            gather.geometry.image_words.eq(layer.src_stride),
        ]
        # Each row's shift (and multiplier), from the row block's bias words, goes with a
        # tile to the result writer. A shift past the output stage's stops the run before
        # the block's first tile.
        row_shifts = [k.bias.word_select(4 * R + r, 8) for r in range(R)]
        k.bad_shift = layer.output_stage & Cat(v > max_shift(self.config)
                                               for v in row_shifts).any()
        # What a tile's part of the weight image may not hold (semantics section 9): a
        # gather lane past the rows (but 0xFF, none: the gather's ``bad_table``), a stream
        # select past alpha. They set ``error`` and the run goes on to its end (as a memory
        # error does).
        W = p["cols"]
        k.selects = Cat(k.word.payload.word_select(c, 16)[8:] for c in range(W))
        m.d.comb += gather.limit.eq(k.check.act_size)
        with m.If(gather.fault):
            m.d.sync += k.error.eq(1)

        # Data beats: the gather's vectors with the row block's bias in its first column
        # block (the result writer adds the others' partial sums).
        k.taking = taking = array.data.valid & array.data.ready
        # A tile streams from its launch to its last position, while the next one loads.
        k.streaming = in_data = Signal(name="streaming")
        k.first_col = Signal(name="stream_first_col")   # the streaming tile adds the bias
        m.d.comb += [
            array.data.valid.eq(in_data & gather.o.valid),
            gather.o.ready.eq(in_data & array.data.ready),
            array.data.payload.x.eq(gather.o.payload),
            array.data.payload.last.eq(k.position == final),
        ]
        for r in range(R):
            m.d.comb += array.data.payload.psum[r].eq(
                Mux(k.first_col, k.bias.word_select(r, 32), 0))
        with m.If(taking):
            m.d.sync += k.position.eq(k.position + 1)
            with m.If(k.position == final):
                m.d.sync += k.streaming.eq(0)

        self._results(m, k, row_shifts)

    def _results(self, m, k, row_shifts):
        """The result writer: the array's results plus the previous column blocks'
        partial sums, to the partial-sum buffer or through the output stage (or a fused
        add) to the layer's output. They come while later tiles load and run, so where
        they go is queued when their tile starts."""
        p, layer, gather = self._p, k.desc.layer, k.gather
        R = p["rows"]
        k.results = results = ResultWriter(
            rows=R, acc_bits=_ACC_BITS, out_bits=_DATA_BITS, act_depth=p["act_words"],
            acc_depth=p["acc_words"], psum_depth=p["psum_words"], requant=p["requant"])
        m.submodules.results = results
        wiring.connect(m, k.array.result, results.result)
        # row_block * the result's positions per block of lanes, a running sum
        k.block_base = Signal(32, name="block_base")
        k.launch = Signal(name="launch")                # the gather starts the loaded tile
        m.d.comb += [results.shifts[r].eq(row_shifts[r]) for r in range(R)]
        if p["requant"] == "multiplier":
            m.d.comb += [results.multipliers[r].eq(k.bias[8 * (5 * R + 2 * r):][:16])
                         for r in range(R)]
        m.d.comb += [
            results.launch.eq(k.launch), results.to_psums.eq(~k.last_col),
            results.add_psum.eq(k.col_block != 0),
            results.to_acc.eq(layer.dst.acc), results.base.eq(layer.dst.addr + k.block_base),
            results.stride.eq(layer.dst_stride), results.positions.eq(layer.positions),
            results.pool.eq(layer.pool), results.map_width.eq(k.map_width),
            results.out_height.eq(layer.dst.height), results.out_width.eq(layer.dst.width),
            results.total.eq(k.total),
            results.add.eq(layer.add), results.b_acc.eq(layer.add_b_acc),
            results.signed_b.eq(layer.add_signed_b),
            results.signed_out.eq(layer.add_signed_out), results.ma.eq(layer.add_ma),
            results.mb.eq(layer.add_mb),
            results.add_offset.eq(layer.add_b - layer.dst.addr),
            gather.side.eq(results.side), results.side_data.eq(gather.side_data),
            results.acc_side_data.eq(k.acc_host.data),
            k.psum_r.addr.eq(results.psum_read), results.psum_read_data.eq(k.psum_r.data),
            k.psum_w.addr.eq(results.psum_write.addr),
            k.psum_w.data.eq(results.psum_write.data), k.psum_w.en.eq(results.psum_write.en),
            k.acc_w.addr.eq(results.acc_write.addr), k.acc_w.data.eq(results.acc_write.data),
            k.acc_w.en.eq(results.acc_write.en),
        ]

    def _post_steps(self, m, k):
        """Pooling and adds: the post-processing unit's step from the descriptor; it
        reads through the gather's spare ports and writes the activation buffer."""
        p = self._p
        post, gather = k.post, k.gather
        pool, add = k.desc.pool, k.desc.add
        is_add = k.desc.op == Op.ADD
        # A store's buffer reads.
        k.transfer_read = Signal(range(p["act_words"]), name="transfer_read")
        # Who reads column 0's copy of the buffer through the gather's other port: the
        # state a cycle ago (the post-processing unit and a store read from the cycle after
        # their start on; the host only while the engine is idle).
        reads_post, reads_transfer = Signal(name="reads_post"), Signal(name="reads_transfer")
        m.d.sync += [reads_post.eq(k.state == _State.POST),
                     reads_transfer.eq(k.state == _State.TRANSFER)]
        global_pool = pool.kernel == 0
        # The unit's step, registered every cycle from the descriptor (as the gather's
        # geometry is).
        m.d.sync += [
            post.step.op.eq(Mux(is_add, PostOp.ADD,
                                Mux(pool.avg, PostOp.AVG_POOL, PostOp.MAX_POOL))),
            post.step.count_pad.eq(pool.count_pad),
            post.step.a_signed.eq(add.signed_a), post.step.b_signed.eq(add.signed_b),
            post.step.out_signed.eq(add.signed_out),
            post.step.src.eq(Mux(is_add, add.a.addr, pool.src.addr)),
            post.step.src_b.eq(add.b.addr),
            post.step.dst.eq(Mux(is_add, add.dst.addr, pool.dst.addr)),
            post.step.blocks.eq(pool.blocks), post.step.words.eq(add.words),
            post.step.height.eq(pool.src.height), post.step.width.eq(pool.src.width),
            post.step.out_height.eq(pool.dst.height), post.step.out_width.eq(pool.dst.width),
            post.step.kernel_h.eq(Mux(global_pool, pool.src.height, pool.kernel)),
            post.step.kernel_w.eq(Mux(global_pool, pool.src.width, pool.kernel)),
            post.step.stride.eq(Mux(global_pool, 1, pool.stride)),
            post.step.padding_top.eq(Mux(global_pool, 0, pool.padding_top)),
            post.step.padding_left.eq(Mux(global_pool, 0, pool.padding_left)),
            post.step.ma.eq(add.ma), post.step.mb.eq(add.mb),
        ]
        m.d.comb += [
            gather.aux[0].eq(Mux(reads_post, post.read[0],
                                 Mux(reads_transfer, k.transfer_read, self.act_read))),
            gather.aux[1].eq(post.read[1]),
            post.read_data[0].eq(gather.aux_data[0]), post.read_data[1].eq(gather.aux_data[1]),
            self.act_read_data.eq(gather.aux_data[0]),
            # The accumulator buffer's read port: a fused add's operands while the engine
            # runs, the host's reads while it is idle.
            k.acc_host.addr.eq(Mux(self.busy, k.results.side, self.acc_read)),
        ]

    def _transfers(self, m, k):
        """Loads and stores: with an activation port, a region of the activation buffer
        (its ``buffer``) and external words from its ``ext_addr``, ``words`` of them
        of them; without one, no transfer unit (``k.xfer`` None)."""
        p = self._p
        transfer = k.desc.load                  # a store's fields are a load's
        if p["act_port"] != "axi":
            k.xfer = None
            return
        k.xfer = xfer = AxiActivations(word_bits=p["rows"] * _DATA_BITS, depth=p["act_words"])
        m.submodules.activations = xfer
        wiring.connect(m, wiring.flipped(self.act_axi), xfer.axi)
        m.d.comb += [xfer.base.eq(self.act_base), xfer.store.eq(k.desc.op == Op.STORE),
                     xfer.addr.eq(transfer.ext_addr), xfer.buf.eq(transfer.buffer.addr),
                     xfer.count.eq(transfer.words), xfer.read_data.eq(k.gather.aux_data[0]),
                     k.transfer_read.eq(xfer.read),
                     self.act_bytes_read.eq(xfer.bytes_read),
                     self.act_bytes_written.eq(xfer.bytes_written)]
        with m.If(xfer.error):
            m.d.sync += k.error.eq(1)

    def _buffer_writes(self, m, k):
        """Who writes the activation buffer, the later taking precedence: the result
        writer, the transfer unit, the post-processing unit, the host while idle."""
        act_write = k.gather.write
        writers = [k.results.act_write, *([k.xfer.write] if k.xfer is not None else []),
                   k.post.write]
        for writer in writers:
            with m.If(writer.en):
                m.d.comb += [act_write.addr.eq(writer.addr), act_write.data.eq(writer.data),
                             act_write.en.eq(1)]
        with m.If((k.state == _State.IDLE) | (k.state == _State.ERROR)):
            m.d.comb += [act_write.addr.eq(self.act_write.addr),
                         act_write.data.eq(self.act_write.data),
                         act_write.en.eq(self.act_write.en)]

    def _sequencer(self, m, k):
        """The state machine: the header fetched and checked, then each step's descriptor
        fetched and dispatched, a layer's tiles loaded and run, pooling, adds, loads and
        stores started and awaited."""
        state, desc, layer = k.state, k.desc, k.desc.layer
        is_transfer = (desc.op == Op.LOAD) | (desc.op == Op.STORE)
        # A loaded tile starts once the previous one's last position is in the array.
        can_launch = ~k.streaming & k.results.room
        # Its table's lanes are checked a cycle after it starts.
        launched = Signal(name="launched")
        m.d.sync += launched.eq(0)
        with m.If(launched & k.gather.bad_table):
            m.d.sync += k.error.eq(1)
        invalid = k.check.step_bad | (is_transfer & (self.act_base[:12] != 0)
                                      if k.xfer is not None else k.check.step_bad)
        with m.Switch(state):
            with m.Case(_State.IDLE, _State.ERROR):
                with m.If(self.start):
                    m.d.sync += [state.eq(_State.HEADER), k.pc.eq(0), k.fetched.eq(0),
                                 k.cycles.eq(0), k.error.eq(0), k.streaming.eq(0)]
                    if self._p["weight_port"] == "axi":
                        # A stopped run's prefetched words go.
                        m.d.comb += k.weights.clear.eq(1)
            with m.Case(_State.HEADER, _State.FETCH):
                # Word pc is read; the one two before it arrives (from the third cycle on:
                # the memory, then its output register); then the checks decide
                # (``DECIDE_CYCLES``).
                size = Mux(state == _State.HEADER, HEADER_WORDS, STEP_WORDS)
                for j in range(max(HEADER_WORDS, STEP_WORDS)):
                    with m.If(k.fetched == j + 2):
                        if j < HEADER_WORDS:
                            with m.If(state == _State.HEADER):
                                m.d.sync += _word(k.header, j).eq(k.prog_data)
                        if j < STEP_WORDS:
                            with m.If(state == _State.FETCH):
                                m.d.sync += _word(k.desc, j).eq(k.prog_data)
                with m.If(k.fetched < size):
                    m.d.sync += k.pc.eq(k.pc + 1)
                with m.If(k.fetched != size + 1 + DECIDE_CYCLES):
                    m.d.sync += k.fetched.eq(k.fetched + 1)
                with m.Else():
                    m.d.sync += [k.fetched.eq(0), state.eq(Mux(state == _State.HEADER,
                                                               _State.CHECK, _State.DISPATCH))]
            with m.Case(_State.CHECK):
                with m.If(k.check.header_bad):
                    m.d.sync += [k.error.eq(1), state.eq(_State.ERROR)]
                with m.Elif(k.header.steps == 0):
                    m.d.sync += state.eq(_State.IDLE)
                with m.Else():
                    m.d.sync += [k.steps_left.eq(k.header.steps),
                                 state.eq(_State.FETCH)]
            with m.Case(_State.DISPATCH):
                m.d.sync += [k.steps_left.eq(k.steps_left - 1), k.row_block.eq(0),
                             k.col_block.eq(0), k.block_base.eq(0),
                             k.total.eq(layer.positions[:17] * layer.images[:16]),
                             k.wptr.eq(layer.weights), k.loaded.eq(0), k.started.eq(0),
                             k.requested.eq(0)]
                m.d.sync += state.eq(Mux(desc.op == Op.LAYER, _State.BIAS,
                                         Mux(is_transfer, _State.TRANSFER, _State.POST)))
                with m.If(invalid):
                    m.d.sync += [k.error.eq(1), state.eq(_State.ERROR)]
                if self._p["weight_port"] == "axi":
                    m.d.comb += k.weights.start.eq((desc.op == Op.LAYER) & ~invalid)
            with m.Case(_State.BIAS):
                self._load_run(m, k)
            with m.Case(_State.TABLE):
                if k.aside:
                    self._tile_runs(m, k, can_launch)
                else:
                    self._load_run(m, k)
            with m.Case(_State.WEIGHTS):
                with m.If(self._cells_run(m, k)):
                    self._tile_loaded(m, k, can_launch)
            with m.Case(_State.LAUNCH):
                m.d.comb += k.launch.eq(can_launch)
            with m.Case(_State.DRAIN):
                with m.If(~k.streaming & k.results.idle):
                    m.d.sync += state.eq(Mux(k.steps_left == 0, _State.IDLE, _State.FETCH))
            with m.Case(_State.POST, _State.TRANSFER):
                self._unit_step(m, k)
        with m.If(k.launch):         # after the sequencer, so that this state wins
            # The tile streams; the next one loads (its table once the gather has taken
            # this one's, a cycle from now; its cells once the array has a free bank).
            m.d.comb += k.gather.start.eq(1)
            m.d.sync += [k.position.eq(0), k.streaming.eq(1),
                         k.first_col.eq(k.col_block == 0)]
            m.d.sync += launched.eq(1)
            with m.If(~k.last_col):
                m.d.sync += [k.col_block.eq(k.col_block + 1), state.eq(_State.TABLE)]
            with m.Elif(k.row_block != layer.row_blocks - 1):
                m.d.sync += [k.row_block.eq(k.row_block + 1), k.col_block.eq(0),
                             k.block_base.eq(k.block_base + k.check.dst_plane),
                             state.eq(_State.BIAS)]
            with m.Else():
                m.d.sync += state.eq(_State.DRAIN)

    def _load_run(self, m, k):
        """BIAS, and TABLE with one read port: a run of words into the bias register or
        the gather's table. The bias is asked for once the previous tile's last position
        is in (its data take the bias). A tile's table and cells come one after the
        other (one run on chip; behind the AXI4 port from the layer's prefetched run),
        its cells taken in WEIGHTS as the array's weight bank takes them. A bad shift
        stops the run once the earlier tiles' results are written."""
        state, word, weights = k.state, k.word, k.weights
        in_bias = state == _State.BIAS
        size = Mux(in_bias, k.bias_words, k.table_words)
        on_chip = self._p["weight_port"] == "onchip"
        with m.If((state == _State.TABLE) & k.bad_shift):
            with m.If(k.results.idle):
                m.d.sync += [k.error.eq(1), state.eq(_State.ERROR)]
        with m.Elif(~k.requested):
            # On chip the table's words come at once and the cells wait in the memory's
            # read register for the bank; behind the AXI4 port they wait in the prefetch
            # FIFO (the layer's run was asked for at its dispatch).
            with m.If(Mux(in_bias, ~k.streaming, 1)):
                if on_chip:
                    m.d.comb += weights.start.eq(1)
                m.d.sync += k.requested.eq(1)
        with m.Else():
            m.d.comb += word.ready.eq(1)
            with m.If(word.valid):
                with m.If(in_bias):
                    m.d.sync += k.bias.eq(Cat(k.bias[k.word_bits:],
                                              word.payload[:k.word_bits]))
                with m.Else():
                    m.d.sync += k.table_we.eq(1)
                m.d.sync += k.loaded.eq(k.loaded + 1)
                with m.If(k.loaded == size - 1):
                    m.d.sync += [k.loaded.eq(0), state.eq(Mux(in_bias, _State.TABLE,
                                                              _State.WEIGHTS))]
                    with m.If(in_bias):
                        m.d.sync += [k.requested.eq(0), k.wptr.eq(k.wptr + k.bias_words)]

    def _cells_run(self, m, k):
        """WEIGHTS: the tile's cell words (the rest of its table's run) to the array as it
        takes them; the run's last word taken is the returned condition."""
        R = self._p["rows"]
        word, array = k.word, k.array
        weights_go = array.weights.valid & array.weights.ready
        last = Signal(name="cells_last")
        m.d.comb += word.ready.eq(array.weights.ready)
        # A cell's stream select past alpha sets ``error`` two cycles after it is taken:
        # the memory's word (the block RAM's output, unregistered) is registered before
        # the comparisons.
        selects = stage(m, k.selects, "cell_selects")
        taken = stage(m, weights_go, "cells_taken", reset_less=False)
        A, W = self._p["alpha"], self._p["cols"]
        with m.If(taken & Cat(selects.word_select(c, 8) >= A for c in range(W)).any()):
            m.d.sync += k.error.eq(1)
        with m.If(weights_go):
            m.d.sync += k.loaded.eq(k.loaded + 1)
            with m.If(k.loaded == R - 1):
                m.d.sync += k.loaded.eq(0)
                m.d.comb += last.eq(1)
        return last

    def _tile_runs(self, m, k, can_launch):
        """TABLE with two read ports on chip: a tile's table and cells as two runs at
        once, the table's through the memory's second port into the gather's table, a
        word a cycle, its cells to the array as its weight bank takes them
        (``_cells_run``). The tile launches once its last cell is taken and its table's
        last word was taken a cycle before or more (the word reaches the gather a cycle
        after it is taken: ``table_at`` has counted all ``t`` then). A bad shift stops
        the run once the earlier tiles' results are written."""
        state, aside = k.state, k.weights.aside
        cells_done = Signal(name="cells_done")
        with m.If(k.bad_shift):
            with m.If(k.results.idle):
                m.d.sync += [k.error.eq(1), state.eq(_State.ERROR)]
        with m.Elif(~k.requested):
            m.d.comb += [k.weights.start.eq(1), aside.start.eq(1)]
            m.d.sync += [k.requested.eq(1), k.table_at.eq(0), cells_done.eq(0)]
        with m.Else():
            # The table's run is ``t`` words: its valid falls after the last.
            m.d.comb += aside.o.ready.eq(1)
            with m.If(aside.o.valid):
                m.d.sync += [k.table_we.eq(1), k.table_at.eq(k.table_at + 1)]
            last_cell = self._cells_run(m, k)
            with m.If(last_cell):
                m.d.sync += cells_done.eq(1)
            with m.If((k.table_at == k.table_words) & (cells_done | last_cell)):
                self._tile_loaded(m, k, can_launch)

    def _tile_loaded(self, m, k, can_launch):
        """A tile's table and cells are in: the next tile's words from past them, the
        tile launched now if it can (else in LAUNCH)."""
        m.d.sync += [k.requested.eq(0), k.wptr.eq(k.wptr + k.table_words + self._p["rows"]),
                     k.state.eq(_State.LAUNCH)]
        m.d.comb += k.launch.eq(can_launch)

    def _unit_step(self, m, k):
        """POST and TRANSFER: pooling and adds on the post-processing unit, loads and
        stores on the activation port, started once and awaited."""
        state, post, xfer = k.state, k.post, k.xfer
        in_post = state == _State.POST
        busy = post.busy if xfer is None else Mux(in_post, post.busy, xfer.busy)
        with m.If(~k.started):
            m.d.comb += post.start.eq(in_post)
            if xfer is not None:
                m.d.comb += xfer.start.eq(~in_post)
            m.d.sync += k.started.eq(1)
        with m.Elif(~busy):
            m.d.sync += state.eq(Mux(k.steps_left == 0, _State.IDLE, _State.FETCH))


def _memories(p):
    """The on-chip memories of an engine of parameters ``p`` (``NetworkEngine.memories``)."""
    R, W = p["rows"], p["cols"]
    found = {"activations": (_DATA_BITS, p["act_words"], R * (p["gather_ports"] + 1)),
             "accumulators": (R * _ACC_BITS, p["acc_words"], 1),
             "partial_sums": (R * _ACC_BITS, p["psum_words"], 1),
             "program": (32, p["program_words"], 1)}
    if p["weight_port"] == "onchip":
        found["weights"] = (16 * W, p["weight_words"], p["weight_ports"])
    else:
        found["weight_prefetch"] = (16 * W, PREFETCH_BURST * PREFETCH_BURSTS, 1)
    return found


def _word(view, k):
    """32-bit word ``k`` of a header or descriptor register, to be written."""
    return view.as_value().word_select(k, 32)
