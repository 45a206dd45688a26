# amaranth: UnusedElaboratable=no
# (the engine is built first, for its own parameter checks; a later check of the board
# top's parameters then drops it with a clear error, which the warning would only repeat)
"""A NIC engine behind the UART host link: frames in, frames out, through ``ArraySoc``."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import Flow, In, Out

from codnn.hw.nic import NIC_ENGINES
from codnn.hw.nic.layouts import beat_layout, check_lanes

from .array_soc import ArraySoc
from .protocol import EngineKind

__all__ = ["NicCore", "NicSoc"]


class NicCore(wiring.Component):
    """A NIC engine (streams ``i``/``o`` of ``codnn.hw.nic.layouts.beat_layout``) with the
    streams ``ArraySoc`` drives, so the board top runs it like an array of one row.

    - ``weights``: one beat, the engine's input ports (``bound_bits``, ``bypass``, ``seed``,
      ``scaler``... in signature order, packed from bit 0), latched into registers that
      start at the ports' reset values;
    - ``data``: input beats (``x``: a beat; ``last``: the run's final beat; ``psum``
      unused);
    - ``result``: the engine's output beats, then one *terminator* beat with ``keep`` 0
      whose data are the engine's output ports (``error``, ``error_count``, ... packed from
      bit 0, as they were in its first cycle on offer) and whose ``last`` ends the run. It
      comes once the run's input is in and the engine has had no output for ``quiet``
      cycles.

    Latency: the engine's, then ``quiet`` cycles to the terminator. Throughput: the
    engine's.
    """

    def __init__(self, engine, quiet=64):
        self._engine = engine
        self._quiet = quiet
        members = engine.signature.members
        self._config = [name for name, m in members.items()
                        if name not in ("i", "o") and m.flow == Flow.In]
        self._report = [name for name, m in members.items()
                        if name not in ("i", "o") and m.flow == Flow.Out]
        config_bits = max(1, sum(len(getattr(engine, n)) for n in self._config))
        beat = beat_layout(len(engine.i.payload.keep))
        super().__init__({
            "weights": In(stream.Signature(config_bits)),
            "data": In(stream.Signature(data.StructLayout({"x": beat, "psum": 1,
                                                             "last": 1}))),
            "result": Out(stream.Signature(data.StructLayout({"acc": beat, "last": 1}))),
        })

    engine = property(lambda self: self._engine)
    rows = property(lambda self: 1, doc="One weights beat: the configuration.")
    cols = property(lambda self: self._engine.lanes, doc="Lanes.")
    acc_bits = property(lambda self: 32, doc="Bits per lane.")

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = engine = self._engine
        registers = [Signal.like(getattr(engine, name), name=f"cfg_{name}")
                     for name in self._config]
        for name, register in zip(self._config, registers):
            m.d.comb += getattr(engine, name).eq(register)
        m.d.comb += self.weights.ready.eq(1)
        if registers:
            with m.If(self.weights.valid):
                m.d.sync += Cat(*registers).eq(self.weights.payload)

        input_done = Signal()
        idle = Signal(range(self._quiet + 1))
        m.d.comb += [engine.i.payload.eq(self.data.payload.x),
                     engine.i.valid.eq(self.data.valid),
                     self.data.ready.eq(engine.i.ready)]
        with m.If(self.data.valid & self.data.ready & self.data.payload.last):
            m.d.sync += input_done.eq(1)

        terminate = input_done & (idle == self._quiet)
        # The terminator's reports are those of its first cycle on offer: held, they
        # stay as they were until it is taken (the stream rule), whatever the engine does.
        report = Cat(*(getattr(engine, name) for name in self._report))
        offered = Signal(name="terminator_offered")
        held = Signal.like(report, name="terminator_report")
        m.d.sync += [offered.eq(terminate & ~self.result.ready),
                     held.eq(Mux(offered, held, report))]
        with m.If(terminate):
            m.d.comb += [self.result.valid.eq(1), self.result.payload.last.eq(1),
                         self.result.payload.acc.data.eq(Mux(offered, held, report))]
            with m.If(self.result.ready):
                m.d.sync += [input_done.eq(0), idle.eq(0)]
        with m.Else():
            m.d.comb += [self.result.valid.eq(engine.o.valid),
                         self.result.payload.acc.eq(engine.o.payload),
                         engine.o.ready.eq(self.result.ready)]
            with m.If(engine.o.valid | ~input_done):
                m.d.sync += idle.eq(0)
            with m.Else():
                m.d.sync += idle.eq(idle + 1)
        return m


class NicSoc(ArraySoc):
    """``ArraySoc`` around a NIC engine (``NicCore``): ``WRITE_WEIGHTS`` writes the
    configuration word, ``WRITE_DATA`` input beats (a beat's data, keep and last, from bit
    0), ``RUN`` streams them through the engine and stores its output beats and the
    terminator (``BAD_ARGUMENT`` when they do not fit ``depth``), ``READ_RESULTS`` reads
    them. The words' fields are ``codnn.hw.nic.NIC_ENGINES[kind]``'s ``settings`` and ``reports``.

    Parameters
    ----------
    kind : str
        One of ``codnn.hw.nic.NIC_ENGINES``.
    lanes : int
        Float32 values per beat (a beat's data must hold the engine's report).
    depth, divisor, timeout_bytes, link
        As ``ArraySoc``.

    Raises
    ------
    ValueError
        For an unknown kind, a report wider than a beat, as the engine and as
        ``ArraySoc``.
    """

    def __init__(self, *, kind, lanes=2, depth=64, divisor=104, timeout_bytes=2000,
                 link=None):
        if kind not in NIC_ENGINES:
            raise ValueError(f"NIC engine must be one of {', '.join(NIC_ENGINES)}, not {kind!r}")
        check_lanes(lanes)
        report = NIC_ENGINES[kind].reports
        if sum(bits for _, bits in report) > 32 * lanes:
            raise ValueError(f"The {kind}'s report takes {sum(b for _, b in report)} bits, "
                             f"more than a beat of {lanes} lanes holds: use more lanes")
        core = NicCore(NIC_ENGINES[kind].component(lanes=lanes))
        super().__init__(core, engine=EngineKind.NIC, depth=depth, divisor=divisor,
                         timeout_bytes=timeout_bytes, link=link,
                         config={"lanes": lanes, "kind": list(NIC_ENGINES).index(kind)})
