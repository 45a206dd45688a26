"""The proof harness (codnn.sim.formal) and the engines' properties (codnn.hw.formal):
every proof ends as docs/formal.md says; a broken design fails with the cycle, the
property's line and a counterexample VCD; cover mode tells reached from unreached; bad
settings are refused."""

import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from amaranth.asserts import AnySeq
from amaranth.hdl import Cover, Fragment, Module, Mux, ResetSignal, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.cli import main
from codnn.hw.common.skid import SkidOutput
from codnn.hw.formal import link_answers
from codnn.hw.formal import network as formal_network
from codnn.hw.formal import proofs
from codnn.hw.formal.arrays import array_banks_top, array_values_top
from codnn.hw.formal.environment import flat_axis_streams, stream_engine_top
from codnn.hw.formal.link_answers import check_answer_bounds, link_answers_top
from codnn.hw.formal.network import axi_weights_top
from codnn.hw.formal import nic as formal_nic
from codnn.hw.formal.nic import (answers_top, header_counts_top, inceptionn_value_top,
                                 message_bytes_top, messages_top, settings_edge_top,
                                 terngrad_value_top, waits_top)
from codnn.hw.formal.mutations import MUTATIONS, Mutation, install, mutated_source
from codnn.hw.formal.proofs import PROOFS
from codnn.hw.formal.soc_reset import LinkPorts, soc_reset_top
from codnn.hw.formal.streams import no_reset, value_frames
from codnn.hw.formal.units import skid_top
from codnn.hw.network import weights
from codnn.hw.nic import NIC_ENGINES, NicDescriptor, terngrad
from codnn.hw.nic.axis import axis_ports
from codnn.hw.nic.engine_base import NicEngineBase
from codnn.hw.nic.inceptionn_format import Thresholds
from codnn.hw.nic.layouts import beat_layout
from codnn.hw.nic.maxabs import MaxAbs
from codnn.hw.nic.terngrad import TernGradDecoder
from codnn.hw.soc import ArraySoc, HostLink, LinkFrames, SystolicSoc, link_frames
from codnn.hw.soc.protocol import Command, EngineKind
from codnn.hw.systolic import ColumnCombinedArray
from codnn.hw.tq.array import TermQuantArray
from codnn.sim.formal import ProofError, run_proof

EXPECTED = {"skid": "proved", "skid_order": "bounded", "fmix32": "bounded",
            "fmix32_latency": "proved", "compressor": "proved", "decompressor": "proved",
            "loopback": "proved", "terngrad": "proved", "terngrad_decoder": "proved",
            "maxabs": "proved", "systolic": "proved", "tq_array": "proved",
            "block_dot": "proved", "rice_compressor": "proved", "rice_decompressor": "proved",
            "rice_loopback": "proved", "gather": "proved", "inceptionn_value": "proved",
            "frame_path": "proved", "host_link": "proved", "systolic_values": "bounded",
            "systolic_latency": "bounded", "terngrad_decoder_settings": "bounded",
            "term_encoder": "proved", "term_revealer": "proved", "term_lister": "proved",
            "tmac": "proved", "pmac": "proved", "nic_core": "proved",
            "onchip_weights": "proved", "axi_weights": "proved", "systolic_banks": "proved",
            "host_link_answers": "proved", "soc_reset": "proved", "link_frames": "proved",
            "tq_soc_reset": "proved", "nic_soc_reset": "proved"}


def test_the_quick_proofs_are_the_documented_ones():
    # The quick proofs run below; `codnn prove all` runs the others too (minutes each).
    quick = {name for name, spec in PROOFS.items() if spec.quick}
    assert set(EXPECTED) == quick
    decoders = ("decompressor", "loopback", "terngrad_decoder", "rice_decompressor")
    assert set(PROOFS) - quick == {
        *(f"{name}_frames" for name in decoders), "systolic_beats", "tq_array_beats",
        "ring_links", "tq_array_latency", *(f"{name}_messages" for name in NIC_ENGINES),
        *(name for name in PROOFS if name.endswith("_waits")), "maxabs_answers",
        "terngrad_bytes", "terngrad_decoder_counts", "tq_array_values", "terngrad_value"}


def test_every_proof_is_in_the_docs():
    text = (Path(__file__).parent.parent / "docs" / "formal.md").read_text()
    assert [name for name in PROOFS if f"`{name}`" not in text] == []


#: The quick proofs that take ten seconds or more, and the RESET proofs of the TQ and NIC
#: tops (``soc_reset`` again on other arrays), run in ``make test-long``.
_LONG_PROOFS = {"terngrad_decoder_settings", "systolic_values", "systolic_latency", "loopback",
                "rice_loopback", "frame_path", "systolic_banks", "tq_soc_reset",
                "nic_soc_reset"}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.long) if name in _LONG_PROOFS else name
    for name in sorted(EXPECTED)])
def test_every_quick_proof_ends_as_documented(tmp_path, name):
    # One test a proof, so the workers share them.
    spec = PROOFS[name]
    proof = run_proof(spec.build(**spec.params), name, tmp_path, mode=spec.mode,
                      depth=spec.depth)
    assert proof.status == EXPECTED[name], proof.summary()


class ZeroOneStepHigh(Thresholds):
    """Values one exponent above the bound's drop to 0 (a wrong compare)."""

    @staticmethod
    def _zero_below(b):
        return 128 - b


class SmallOneStepLow(Thresholds):
    """The 8-bit class ends an exponent early (its largest values go to 16 bits)."""

    @staticmethod
    def _small_below(b):
        return 133 - b


@pytest.mark.parametrize("thresholds", [ZeroOneStepHigh, SmallOneStepLow])
def test_a_wrong_bound_compare_fails_the_value_proof(tmp_path, thresholds):
    proof = run_proof(inceptionn_value_top(thresholds), "wrong_bound", tmp_path,
                      mode="prove", depth=1)
    assert proof.status == "failed" and proof.step == 0, proof.summary()
    assert proof.failed and all("nic.py" in where for where in proof.failed)
    assert proof.vcd.exists()


def on_the_other_bank(array_class):
    """``array_class`` with cells that compute with the weight bank not in use (the one
    being loaded)."""
    class OtherBank(array_class):
        def _cells(self, m, row_psum, weight, use_bank, *rest):
            super()._cells(m, row_psum, weight, ~use_bank, *rest)
    return OtherBank


OtherBank = on_the_other_bank(ColumnCombinedArray)


@pytest.mark.parametrize("mac", ["parallel", "bitserial"])
def test_an_array_on_the_wrong_bank_fails_the_value_proof(tmp_path, mac):
    dut = OtherBank(rows=1, cols=1, alpha=2, weight_bits=2, data_bits=2, acc_bits=4, mac=mac)
    proof = run_proof(array_values_top(dut, reset=False), "other_bank", tmp_path,
                      mode="bmc", depth=16)
    assert proof.status == "failed" and proof.step >= 1, proof.summary()
    assert all("arrays.py" in where for where in proof.failed)


@pytest.mark.long
def test_a_tq_array_on_the_wrong_bank_fails_the_value_proof(tmp_path):
    dut = on_the_other_bank(TermQuantArray)(rows=1, cols=1, g=2, alpha=2, beta=1, mag_bits=2,
                                            acc_bits=6)
    proof = run_proof(array_values_top(dut, reset=False), "tq_other_bank", tmp_path,
                      mode="bmc", depth=20)
    assert proof.status == "failed" and proof.step >= 1, proof.summary()
    assert all("arrays.py" in where for where in proof.failed)


def test_a_decoder_that_drops_a_message_of_the_largest_count_fails_the_header_count(tmp_path):
    # Its limit one short: a message of max_values values is dropped, so the next
    # message's frame answers for it.
    dut = TernGradDecoder(lanes=1, max_values=3)
    proof = run_proof(header_counts_top(dut, 4), "limit_short", tmp_path, mode="bmc", depth=10)
    assert proof.status == "failed", proof.summary()
    assert all("nic.py" in where for where in proof.failed)


class WritesInUse(ColumnCombinedArray):
    """An array whose weight beats write the bank not being loaded (the one in use)."""

    def _weight_banks(self, m, k):
        tag = Signal.like(k.tag, name="wrong_tag")
        m.d.comb += [tag.eq(k.tag), tag.bank.eq(~k.tag.bank)]
        k.tag = tag
        return super()._weight_banks(m, k)


@pytest.mark.parametrize("mac", ["parallel", pytest.param("bitserial", marks=pytest.mark.long)])
@pytest.mark.parametrize("broken", [OtherBank, WritesInUse])
def test_an_array_off_its_banks_fails_the_bank_proof(tmp_path, broken, mac):
    dut = broken(rows=2, cols=2, alpha=2, weight_bits=2, data_bits=2, acc_bits=4, mac=mac)
    proof = run_proof(array_banks_top(dut), "off_banks", tmp_path, mode="bmc", depth=12)
    assert proof.status == "failed", proof.summary()
    assert all("arrays.py" in where for where in proof.failed)


@pytest.mark.long
def test_the_bit_serial_banks_prove(tmp_path):
    spec = PROOFS["systolic_banks"]
    proof = run_proof(spec.build(**{**spec.params, "bitserial": 1}), "serial_banks", tmp_path,
                      mode="prove", depth=12)
    assert proof.status == "proved", proof.summary()


@pytest.mark.long
@pytest.mark.parametrize("name, depth", [
    ("terngrad_decoder_counts", 10),    # a later message's frame, of one value or more
    ("systolic_banks", 20),             # the last cell reading a bank again, third tile
    ("host_link_answers", 18),          # an error answered in exactly its bound (cycle 16)
])
def test_a_proof_reaches_its_cover(tmp_path, name, depth):
    spec = PROOFS[name]
    proof = run_proof(spec.build(**spec.params), name, tmp_path, mode="cover", depth=depth)
    assert proof.status == "covered", proof.summary()


def test_the_bank_proof_takes_the_column_combined_array_only():
    dut = TermQuantArray(rows=2, cols=2, g=2, alpha=2, beta=1)
    with pytest.raises(ValueError, match="column-combined array"):
        array_banks_top(dut)
    Fragment.get(dut, None)             # used, so no warning that it never was


class LateTimeout(LinkFrames):
    """The link's frames ending a frame cut short one quiet cycle later than their
    ``timeout`` says."""

    timeout = property(lambda self: self._timeout - 1)


def test_a_link_that_times_out_late_fails_the_answer_proof(tmp_path):
    dut = LateTimeout(timeout=8)
    proof = run_proof(link_answers_top(dut, stall=0, answer=6), "late", tmp_path,
                      mode="bmc", depth=12)
    assert proof.status == "failed", proof.summary()
    assert all("link_answers.py" in where for where in proof.failed)


def _mutant(module, old, new):
    """A copy of ``module`` with the text ``old`` of its source (there once) made ``new``:
    a mutation of one decision, for a proof to catch."""
    path, source = mutated_source(Mutation("test", module.__name__, old, new, ""))
    mutant = types.ModuleType(module.__name__ + "_mutant")
    mutant.__file__, mutant.__package__ = str(path), module.__package__
    exec(compile(source, str(path), "exec"), mutant.__dict__)
    return mutant


@pytest.mark.parametrize("old, new, depth", [
    # A frame with a bad CRC taken and a good one refused (the first mutation).
    ("with m.If((byte << 8 | received_crc) == crc):",
     "with m.If((byte << 8 | received_crc) != crc):", 10),
    # A frame of exactly MAX_PAYLOAD bytes dropped as too long.
    ("with m.If(length > MAX_PAYLOAD):", "with m.If(length >= MAX_PAYLOAD):", 8),
    # The received frame's CRC started one off.
    ("m.d.sync += crc.eq(0xFFFF)\n                    m.next = \"CODE\"",
     "m.d.sync += crc.eq(0xFFFE)\n                    m.next = \"CODE\"", 8),
    # Every answer sent with a wrong CRC (the sending CRC started one off; the issue's
    # second mutation, which once left the proof unknown and `codnn prove` at exit 0).
    ("out_crc.eq(0xFFFF), left.eq(length)", "out_crc.eq(0xFFFE), left.eq(length)", 8),
])
def test_the_answer_proof_holds_the_links_decisions(tmp_path, monkeypatch, old, new, depth):
    # The link's decisions (which frames it offers as requests, which it answers with
    # which error) against the proof's ghost CRC and length: each mutation fails.
    mutant = _mutant(link_frames, old, new)
    monkeypatch.setattr(link_answers, "LinkFrames", mutant.LinkFrames)
    proof = run_proof(link_answers_top(mutant.LinkFrames(timeout=14), stall=1, answer=12),
                      "decisions", tmp_path, mode="bmc", depth=depth)
    assert proof.status == "failed", proof.summary()
    assert all("link_answers.py" in where for where in proof.failed)


def test_prove_exits_non_zero_on_a_link_sending_wrong_crcs(tmp_path, monkeypatch, capsys):
    # `codnn prove host_link_answers` as a user or CI job runs it, on the second
    # mutation: the proof's documented status is "proved", anything else exits 1.
    mutant = _mutant(link_frames, "out_crc.eq(0xFFFF), left.eq(length)",
                     "out_crc.eq(0xFFFE), left.eq(length)")
    monkeypatch.setattr(proofs, "LinkFrames", mutant.LinkFrames)
    monkeypatch.setattr(link_answers, "LinkFrames", mutant.LinkFrames)
    assert main(["prove", "host_link_answers", "--build-dir", str(tmp_path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["status"] in ("failed", "unknown")


def test_a_terngrad_lane_off_its_threshold_fails_the_value_proof(tmp_path, monkeypatch):
    # The proof takes minutes (`codnn prove all` runs it); a lane comparing with half its
    # threshold fails it in seconds, with a counterexample.
    mutation = next(m for m in MUTATIONS if m.name == "ternary_threshold_shifted")
    mutant = _mutant(terngrad, mutation.old, mutation.new)
    monkeypatch.setattr(formal_nic, "survives", mutant.survives)
    proof = run_proof(terngrad_value_top(), "threshold", tmp_path, mode="bmc", depth=1)
    assert proof.status == "failed" and proof.vcd.exists(), proof.summary()


def test_the_mutation_table_names_real_texts_and_proofs():
    # Each mutation's text is in its design once and each proof it names exists, so the
    # table (docs/formal.md, benchmarks/formal_proofs.py --mutations) cannot go stale.
    assert len({m.name for m in MUTATIONS}) == len(MUTATIONS)
    for mutation in MUTATIONS:
        path, text = mutated_source(mutation)
        assert mutation.new in text and path.exists()
        named = [*mutation.catch, *mutation.gaps]
        assert named and len(set(named)) == len(named)
        assert set(named) <= set(PROOFS), mutation.name
    with pytest.raises(ValueError, match="0 times, not once"):
        mutated_source(dataclasses.replace(MUTATIONS[0], old="no such text"))


def test_a_mutation_is_imported_in_place_of_the_design():
    # In a process of its own, as the benchmark runs it: the design's users get the
    # mutant; in one that has imported the design already, install refuses.
    script = ("from codnn.hw.formal.mutations import MUTATIONS, install\n"
              "install(MUTATIONS[1])\n"
              "from codnn.hw.formal import proofs\n"
              "import sys, types\n"
              "def consts(code):\n"
              "    for c in code.co_consts:\n"
              "        yield c\n"
              "        if isinstance(c, types.CodeType): yield from consts(c)\n"
              "functions = vars(proofs.LinkFrames).values()\n"
              "print(any(0xFFFE in consts(f.__code__) for f in functions\n"
              "          if isinstance(f, types.FunctionType)))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert MUTATIONS[1].name == "crc_sent_wrong" and done.stdout.split() == ["True"]
    with pytest.raises(RuntimeError, match="imported already"):
        install(MUTATIONS[1])


@pytest.mark.parametrize("dut, message", [
    (lambda: LinkFrames(timeout=12), "must outlast its error answer"),
    (lambda: HostLink(divisor=4, timeout_bytes=16), "takes the link's frames"),
])
def test_the_answer_proof_takes_the_link_frames_with_a_long_timeout(dut, message):
    dut = dut()
    with pytest.raises(ValueError, match=message):
        link_answers_top(dut, stall=1, answer=12)
    Fragment.get(dut, None)             # used, so no warning that it never was


@pytest.mark.parametrize("timeout, stall, answer, message", [
    (14, -1, 12, "stall must be 0 or more"), (14, 1, 0, "bound 1 or more"),
    (12, 1, 12, "must outlast"), (3000, 99, 600, "at most 256 cycles"),
])
def test_the_answer_proof_checks_its_bounds(timeout, stall, answer, message):
    with pytest.raises(ValueError, match=message):
        check_answer_bounds(timeout, stall, answer)


class KeepsRows(ArraySoc):
    """A board top whose RESET forgets none of the weight rows."""

    def _decode(self, m, k):
        super()._decode(m, k)
        with m.If(k.command == Command.RESET):
            m.d.sync += k.written.eq(k.written)


def _top_keeping_rows(rows):
    array = ColumnCombinedArray(rows=rows, cols=2, weight_bits=2, data_bits=2, acc_bits=4)
    return KeepsRows(array, engine=EngineKind.SYSTOLIC, depth=1, link=LinkPorts(),
                     config={"alpha": 1, "weight_bits": 2, "data_bits": 2, "data_signed": 0,
                             "bitserial": 0})


def test_a_reset_that_keeps_the_rows_does_not_prove(tmp_path):
    # The invariant that ties the rows written to the answers fails in the induction.
    proof = run_proof(soc_reset_top(_top_keeping_rows(2)), "keeps", tmp_path, depth=4)
    assert proof.status == "unknown", proof.summary()


def test_the_reset_proof_takes_a_board_top_with_link_ports():
    soc = SystolicSoc(rows=2, cols=2, depth=1)
    with pytest.raises(ValueError, match="link=LinkPorts"):
        soc_reset_top(soc)
    Fragment.get(soc, None)             # used, so no warning that it never was


class LosingSkid(SkidOutput):
    """A skid without its spare: a beat written while ``o`` is held is lost."""

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [self.free.eq(1), self.free_next.eq(1)]
        with m.If(~self.o.valid | self.o.ready):
            m.d.sync += [self.o.payload.eq(self.payload), self.o.valid.eq(self.write)]
        return m


class AddSetting(NicEngineBase):
    """A toy NIC engine: each beat's data plus the setting ``k``, one register stage;
    ``latched`` reads ``k`` at a message's first beat as documented, else at every beat
    (a setting sampled on the wrong edge)."""

    PORTS = {"k": In(4), "beats": Out(8)}

    def __init__(self, *, lanes, max_values, latched):
        super().__init__(lanes, self.PORTS, max_values)
        self._latched = latched

    def elaborate(self, platform):
        m = Module()
        first, k = Signal(init=1), Signal(4)
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            add = Mux(first, self.k, k) if self._latched else self.k
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(self.i.payload),
                         self.o.payload.data.eq(self.i.payload.data + add),
                         first.eq(self.i.payload.last), k.eq(add),
                         self.beats.eq(self.beats + 1)]
        return m


@pytest.mark.parametrize("latched, status", [(True, "bounded"), (False, "failed")])
def test_settings_read_off_their_edge_fail_the_settings_proof(tmp_path, latched, status):
    """The settings proof on a toy engine: reading its setting at a message's first beat
    passes; reading it at every beat (a setting sampled on the wrong edge) fails."""
    class Toy(AddSetting):
        def __init__(self, *, lanes, max_values):
            super().__init__(lanes=lanes, max_values=max_values, latched=latched)

    engine = NicDescriptor("add", Toy, "toy", "none", "values", "values", "{lanes} a cycle")
    proof = run_proof(settings_edge_top(engine, 1, 20), "settings", tmp_path, mode="bmc",
                      depth=6)
    assert proof.status == status, proof.summary()


def test_a_broken_skid_fails_with_a_counterexample(tmp_path):
    proof = run_proof(skid_top(dut_class=LosingSkid), "losing", tmp_path, depth=6)
    assert proof.status == "failed" and proof.step is not None and proof.step >= 1
    assert proof.failed and all("units.py" in where for where in proof.failed)
    assert proof.vcd.exists() and proof.vcd.stat().st_size > 0
    assert f"fails at cycle {proof.step}" in proof.summary()
    ordered = run_proof(skid_top(order=True, dut_class=LosingSkid), "losing_order", tmp_path,
                        mode="bmc", depth=8)
    assert ordered.status == "failed"


class Blinking(wiring.Component):
    """An output that takes a beat back after a cycle, whether or not it was taken."""

    o: Out(stream.Signature(unsigned(4)))
    setting: In(4)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += [self.o.valid.eq(~self.o.valid), self.o.payload.eq(self.setting)]
        return m


def test_stream_proofs_reset_with_beats_in_flight(tmp_path):
    # The stream proofs leave the reset free: a run resets while the output holds a beat.
    spec = PROOFS["terngrad_decoder"]
    top = spec.build(**spec.params)
    top.d.comb += Cover(ResetSignal() & top.submodules.dut.o.valid)
    assert run_proof(top, "reset", tmp_path, mode="cover", depth=12).status == "covered"


class FrameMaker(wiring.Component):
    """Sends one frame, when ready: a descriptor counting 2 values, then ``beats`` value
    beats, ``last`` on the final one."""

    o: Out(stream.Signature(beat_layout(4)))

    def __init__(self, beats):
        self._beats = beats
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        sent = Signal(4)
        m.d.comb += [self.o.valid.eq(sent <= self._beats),
                     self.o.payload.data.eq(Mux(sent == 0, 2, 7)),
                     self.o.payload.last.eq(sent == self._beats)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += sent.eq(sent + 1)
        return m


@pytest.mark.parametrize("beats,status", [(2, "bounded"), (3, "failed"), (1, "failed")])
def test_value_frames_property_counts_the_beats(tmp_path, beats, status):
    # A frame of 2 values at one lane is its descriptor and 2 value beats: one more or
    # one fewer (last on the wrong beat) fails.
    m = Module()
    no_reset(m)
    m.submodules.maker = maker = FrameMaker(beats)
    m.d.comb += maker.o.ready.eq(AnySeq(1))
    value_frames(m, maker.o, lanes=1, max_values=4)
    proof = run_proof(m, f"frames_{beats}", tmp_path, mode="bmc", depth=8)
    assert proof.status == status


class PassThrough(wiring.Component):
    """Beats of one lane through ``stages`` registers that move while ``o`` is ready (0:
    none), mutated on request: ``split`` sets ``last`` on every beat (each beat of a
    message made a message of its own), ``endless`` on none (every message's end lost);
    after a beat with ``last`` is taken, the input waits ``hold`` cycles, or for ever
    (``hold`` None: a hang)."""

    i: In(stream.Signature(beat_layout(4)))
    o: Out(stream.Signature(beat_layout(4)))

    def __init__(self, *, stages=0, split=False, endless=False, hold=0):
        self._stages, self._split, self._endless, self._hold = stages, split, endless, hold
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        left = Signal(4)                            # cycles the input still waits
        open_ = left == 0
        m.d.comb += self.i.ready.eq(self.o.ready & open_)
        valid, payload = self.i.valid & open_, self.i.payload
        for k in range(self._stages):
            stage_valid = Signal(name=f"valid_{k}")
            stage_payload = Signal.like(self.i.payload, name=f"beat_{k}")
            with m.If(self.o.ready):
                m.d.sync += [stage_valid.eq(valid), stage_payload.eq(payload)]
            valid, payload = stage_valid, stage_payload
        m.d.comb += [self.o.valid.eq(valid), self.o.payload.eq(payload)]
        if self._split or self._endless:
            m.d.comb += self.o.payload.last.eq(int(self._split))
        with m.If(self.i.valid & self.i.ready & self.i.payload.last):
            m.d.sync += left.eq(1 if self._hold is None else self._hold)
        if self._hold is not None:                  # a hang never counts down
            with m.Elif(~open_):
                m.d.sync += left.eq(left - 1)
        return m


@pytest.mark.parametrize("split,status", [(False, "bounded"), (True, "failed")])
def test_messages_property_finds_a_message_split_in_two(tmp_path, split, status):
    proof = run_proof(messages_top(PassThrough(split=split)), "passing", tmp_path, mode="bmc",
                      depth=6)
    assert proof.status == status, proof.summary()


@pytest.mark.parametrize("hold,status", [(3, "bounded"), (4, "failed"), (None, "failed")])
def test_waits_property_finds_a_longer_wait_and_a_hang(tmp_path, hold, status):
    # An input held 4 cycles fails a bound of 3 (an off-by-one), and so does one held
    # for ever (a hang); one held 3 cycles keeps it.
    proof = run_proof(waits_top(PassThrough(hold=hold), wait=3), "holding", tmp_path,
                      mode="bmc", depth=10)
    assert proof.status == status, proof.summary()


def test_max_abs_answers_within_its_documented_latency():
    dut = MaxAbs(lanes=1)
    Fragment.get(dut, None)
    assert PROOFS["maxabs_answers"].params["answer"] == dut.latency


@pytest.mark.parametrize("endless,answer,status", [
    (False, 2, "bounded"), (False, 1, "failed"), (True, 4, "failed")])
def test_answers_property_finds_a_late_answer_and_a_lost_one(tmp_path, endless, answer,
                                                              status):
    # Messages through two registers answer 2 cycles after their last beat: a bound of 1
    # fails, and so does any bound when no answer ends.
    proof = run_proof(answers_top(PassThrough(stages=2, endless=endless), 4, answer),
                      "answers", tmp_path, mode="bmc", depth=8)
    assert proof.status == status, proof.summary()


@pytest.mark.parametrize("extra,status", [(0, "bounded"), (-1, "failed"), (1, "failed")])
def test_message_bytes_property_counts_every_byte(tmp_path, extra, status):
    # A pass-through gives each message's descriptor and values: 4 + 4 n bytes. One byte
    # more or fewer than it carries fails.
    proof = run_proof(message_bytes_top(PassThrough(stages=1), 4,
                                        lambda n: 4 + 4 * n + extra),
                      "message_bytes", tmp_path, mode="bmc", depth=8)
    assert proof.status == status, proof.summary()


def test_a_burst_across_a_4k_page_fails(tmp_path, monkeypatch):
    # The AXI4 weight reader's bursts with the page limit left out (at most 256 words,
    # wherever they start) cross 4 KB pages, which AXI4 forbids.
    monkeypatch.setattr(weights, "burst_words",
                        lambda address, left, stride, most=256: Mux(left < most, left, most))
    proof = run_proof(axi_weights_top(32), "pages", tmp_path, depth=3)
    assert proof.status == "failed" and any("network.py" in where for where in proof.failed)


def test_a_clear_that_withdraws_an_offered_address_fails(tmp_path, monkeypatch):
    # The AXI4 weight reader ending a run on ``clear`` by dropping the burst address it
    # has on offer (no stale offer kept): AXI4 forbids taking ``arvalid`` back.
    mutant = _mutant(weights, "axi.arvalid.eq(stale | ((left != 0)",
                     "axi.arvalid.eq(((left != 0)")
    monkeypatch.setattr(formal_network, "AxiWeights", mutant.AxiWeights)
    proof = run_proof(axi_weights_top(32), "withdrawn", tmp_path, mode="bmc", depth=6)
    assert proof.status == "failed" and any("streams.py" in where for where in proof.failed)


class FlatBlinking(wiring.Component):
    """``Blinking`` on flat AXI4-Stream ports: ``m_axis_tvalid`` falls a cycle after it
    rose, whether or not ``m_axis_tready`` took the beat; ``s_axis`` is always ready."""

    def __init__(self):
        super().__init__(axis_ports(1))

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.s_axis_tready.eq(1)
        m.d.sync += [self.m_axis_tvalid.eq(~self.m_axis_tvalid),
                     self.m_axis_tdata.eq(self.s_axis_tdata)]
        return m


@pytest.mark.parametrize("dut", [Blinking, FlatBlinking])
def test_a_stream_that_breaks_the_rules_fails(tmp_path, dut):
    proof = run_proof(stream_engine_top(dut()), "blinking", tmp_path, depth=3)
    assert proof.status == "failed" and "streams.py" in proof.failed[0]


def test_flat_axis_groups_are_streams():
    dut = FlatBlinking()
    Fragment.get(dut, None)             # used, so no warning that it never was
    groups = flat_axis_streams(dut)
    assert set(groups) == {"s_axis", "m_axis"}
    assert groups["s_axis"].input and not groups["m_axis"].input
    assert sorted(groups["m_axis"].ports) == sorted(
        f"m_axis_t{n}" for n in ("data", "keep", "last", "valid", "ready"))
    assert len(groups["m_axis"].payload) == 8 + 1 + 1


def _counter(goal):
    m = Module()
    no_reset(m)
    count = Signal(4)
    with m.If(AnySeq(1)):
        m.d.sync += count.eq(Mux(count == 9, 0, count + 1))
    m.d.comb += Cover(count == goal)
    return m


def test_cover_mode_tells_reached_from_unreached(tmp_path):
    assert run_proof(_counter(5), "reached", tmp_path, mode="cover", depth=8).status \
        == "covered"
    missed = run_proof(_counter(12), "unreached", tmp_path, mode="cover", depth=8)
    assert missed.status == "not covered" and missed.unreached


def _running_in(folder):
    """Processes whose working folder lies in ``folder`` (sby, smtbmc, z3)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(folder) in os.readlink(proc / "cwd"):
                found.append(proc.name)
        except OSError:
            pass
    return found


def test_time_limit_ends_the_solvers(tmp_path):
    spec = PROOFS["decompressor"]
    with pytest.raises(ProofError, match="did not finish in 1 s"):
        run_proof(spec.build(**spec.params), "slow", tmp_path, mode="bmc", depth=40, timeout=1)
    assert _running_in(tmp_path) == []


@pytest.mark.parametrize("kwargs,message", [({"mode": "sat"}, "Mode must be one of"),
                                            ({"depth": 0}, "Depth must be a positive")])
def test_bad_settings(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_proof(None, "bad", tmp_path, **kwargs)          # refused before the design


def test_command_line(capsys, tmp_path):
    code = main(["prove", "skid", "--set", "width=4", "--build-dir", str(tmp_path), "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and rows[0]["status"] == "proved" and rows[0]["properties"]
    assert main(["prove", "skid", "--set", "lanes=2", "--build-dir", str(tmp_path)]) == 2
    assert "skid has no parameter lanes" in capsys.readouterr().err
    assert main(["prove", "skid", "--set", "width", "--build-dir", str(tmp_path)]) == 2
    assert main(["prove", "skid", "--timeout", "0", "--build-dir", str(tmp_path)]) == 2
    capsys.readouterr()
    # A design's own parameter check: one line, exit 2.
    assert main(["prove", "host_link_answers", "--set", "timeout=5",
                 "--build-dir", str(tmp_path)]) == 2
    assert "must outlast its error answer" in capsys.readouterr().err
    assert main(["prove", "decompressor", "--mode", "bmc", "--depth", "40", "--timeout", "1",
                 "--build-dir", str(tmp_path)]) == 1
    assert "did not finish in 1 s" in capsys.readouterr().err
    # An induction that does not close is not success: unknown exits 1, as a failure does;
    # the same design bounded in bmc mode exits 0.
    assert main(["prove", "fmix32", "--mode", "prove", "--depth", "2", "--build-dir",
                 str(tmp_path), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)[0]["status"] == "unknown"
    assert main(["prove", "fmix32", "--mode", "bmc", "--depth", "2", "--build-dir",
                 str(tmp_path)]) == 0
