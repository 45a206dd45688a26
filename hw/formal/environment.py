"""The environment a component is proved in: every input stream from a source that keeps
the stream rules, every setting any value at any cycle, every sink ready at random, a
reset at any cycle; AXI4-Stream port groups taken as streams."""

from dataclasses import dataclass

from amaranth.asserts import AnySeq
from amaranth.hdl import Cat, Module, Shape
from amaranth.lib import stream
from amaranth.lib.wiring import Flow

from codnn.hw.formal.streams import stream_rules

__all__ = ["stream_engine_top", "FlatStream", "flat_axis_streams"]


def stream_engine_top(dut):
    """A component under any environment: each input stream from a source that keeps the
    stream rules (any beats: good messages, bad ones, cut ones), every other input
    (settings) changing at any cycle, each output stream's sink ready at random, and a
    reset at any cycle (with a message in flight too; the rule is not checked across a
    reset, whose cycle resets the check's register as well). The property: every output
    stream keeps the stream rules. Streams are ``lib.stream`` members and flat AXI4-Stream
    port groups (``{prefix}_tvalid``, ``_tready`` and the ``{prefix}_t*`` payload ports,
    ``tuser`` included: ``flat_axis_streams``)."""
    m = Module()
    m.submodules.dut = dut
    flat = flat_axis_streams(dut)
    grouped = {name for group in flat.values() for name in group.ports}
    for name, member in dut.signature.members.items():
        port = getattr(dut, name)
        if member.is_signature and isinstance(member.signature, stream.Signature):
            width = Shape.cast(member.signature.members["payload"].shape).width
            if member.flow == Flow.In:
                m.d.comb += [port.valid.eq(AnySeq(1)), port.payload.eq(AnySeq(width))]
                stream_rules(m, port, name, assume=True)
            else:
                m.d.comb += port.ready.eq(AnySeq(1))
                stream_rules(m, port, name)
        elif member.is_port and member.flow == Flow.In and name not in grouped:
            m.d.comb += port.eq(AnySeq(Shape.cast(member.shape).width))
    for prefix, group in flat.items():
        if group.input:
            m.d.comb += [port.eq(AnySeq(len(port))) for port in group.driven]
            stream_rules(m, group, prefix, assume=True)
        else:
            m.d.comb += group.ready.eq(AnySeq(1))
            stream_rules(m, group, prefix)
    return m


@dataclass
class FlatStream:
    """An AXI4-Stream port group as a stream: ``valid``, ``ready``, ``payload`` (the
    ``t*`` data ports, concatenated), ``input`` (the component takes it), ``driven`` (the
    ports its source drives but ``tready``), ``ports`` (every member name)."""

    valid: object
    ready: object
    payload: object
    input: bool
    driven: list
    ports: list


def flat_axis_streams(dut):
    """``FlatStream``s of ``dut``'s flat AXI4-Stream port groups with a ``tready``, by
    prefix (``s_axis``, ``m_axis``, ``s0_axis``...); a group without one (a MAC's
    receiver, which cannot wait) has no handshake to keep."""
    members = dut.signature.members
    groups = {}
    for name in members:
        if name.endswith("_tvalid") and f"{name[:-len('_tvalid')]}_tready" in members:
            prefix = name[:-len("_tvalid")]
            names = [n for n in members if n.startswith(f"{prefix}_t")]
            data_names = [n for n in names if n not in (f"{prefix}_tvalid", f"{prefix}_tready")]
            data_ports = [getattr(dut, n) for n in data_names]
            valid = getattr(dut, name)
            groups[prefix] = FlatStream(
                valid, getattr(dut, f"{prefix}_tready"), Cat(*data_ports),
                members[name].flow == Flow.In, [valid, *data_ports], names)
    return groups
