"""Registers and delay lines that load every cycle (no enable, no stall): a value
registered once (``stage``), ``n`` times (``delay``, ``delay_line``), or held ``n`` cycles
in block RAM (``memory_delay``), a group of values a cycle later as one struct (``carry``).
Stalling pipelines are ``codnn.hw.common.pipeline``'s."""

from amaranth.hdl import Mux, Signal, Value
from amaranth.lib import data, memory

__all__ = ["stage", "delay_line", "delay", "memory_delay", "carry"]


def stage(m, value, name, init=None, reset_less=True):
    """A register on ``value`` with initial value ``init`` (default: the shape's); no reset
    unless ``reset_less`` is False (data need none: their validity travels in the array's
    valid pipe)."""
    reg = Signal(value.shape(), name=name, reset_less=reset_less, init=init)
    m.d.sync += reg.eq(value)
    return reg


def delay_line(m, value, cycles, name, reset_less=True):
    """``value`` and its ``cycles`` delayed copies, a register each: a list of
    ``cycles + 1``."""
    line = [value]
    for k in range(cycles):
        line.append(stage(m, line[-1], f"{name}_d{k}", reset_less=reset_less))
    return line


def delay(m, value, cycles, name):
    """``value`` delayed by ``cycles`` registers."""
    return delay_line(m, value, cycles, name)[-1]


def memory_delay(m, value, cycles, name):
    """``value`` delayed by ``cycles`` (>= 2) through a ring of ``cycles`` memory entries
    (block RAM), written every cycle and read one entry ahead of the write: no enable, no
    register per bit and cycle."""
    mem = memory.Memory(shape=value.shape(), depth=cycles, init=[])
    m.submodules[name] = mem
    write, read = mem.write_port(), mem.read_port(transparent_for=())
    w_addr = Signal(range(cycles), name=f"{name}_w_addr")
    r_addr = Signal(range(cycles), name=f"{name}_r_addr", init=1)
    m.d.sync += [w_addr.eq(Mux(w_addr == cycles - 1, 0, w_addr + 1)),
                 r_addr.eq(Mux(r_addr == cycles - 1, 0, r_addr + 1))]
    m.d.comb += [write.addr.eq(w_addr), write.data.eq(value), write.en.eq(1),
                 read.addr.eq(r_addr)]
    return read.data


def carry(m, name, fields, registered=True):
    """Registers holding ``fields`` (a dict of values, or an earlier ``carry``) a cycle
    later, as one struct named ``name`` (not ``registered``: the same values, as wires)."""
    if isinstance(fields, data.View):
        fields = {key: getattr(fields, key) for key in fields.shape().members}
    layout = data.StructLayout({key: value.shape() if isinstance(value, data.View)
                                else Value.cast(value).shape()
                                for key, value in fields.items()})
    reg = Signal(layout, name=name)
    domain = m.d.sync if registered else m.d.comb
    domain += [getattr(reg, key).eq(value) for key, value in fields.items()]
    return reg
