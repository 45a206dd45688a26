"""Rice-coded gradient compressor (docs/semantics.md section 10): value messages in, the
codec's messages out, one value per cycle."""

from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from codnn.golden.inceptionn import DEFAULT_BOUND_BITS
from codnn.golden.rice import BLOCK, ESCAPE_QUOTIENT, MAX_K, MAX_MAGNITUDE
from codnn.hw.common.crc import crc32_update, crc32_update_word
from codnn.hw.common.fmix32 import fmix32_stages
from codnn.hw.common.pipeline import StallPipeline
from codnn.hw.nic.engine_base import NicEngineBase, count_errors
from codnn.hw.nic.inceptionn_format import clamp_bound_bits
from codnn.hw.nic.layouts import DEFAULT_MAX_VALUES
from codnn.hw.nic.packer import BytePacker
from codnn.hw.nic.reader import Item, MessageReader

__all__ = ["RiceCompressor", "RICE_COMPRESSOR_LATENCY"]

#: Bits of a value's longest code (an escape) and of a block's header before its first.
_ESCAPE_BITS, _HEADER_BITS = ESCAPE_QUOTIENT + 32, 5
#: Bits of the longest code the emitter pushes: a block header and an escape.
_CODE_BITS = _HEADER_BITS + _ESCAPE_BITS
#: The bit accumulator; a code is pushed while at most ``_ROOM`` bits wait in it.
_ACC_BITS, _ROOM = 96, 96 - _CODE_BITS
#: Register stages from a token to its quantized value: the hash (5), then 3.
_DEPTH = 8
#: ``RiceCompressor.latency``: the reader (1), the pipeline (``_DEPTH``), the bank (1), the
#: parameter (1), the code's register (1).
RICE_COMPRESSOR_LATENCY = 4 + _DEPTH
#: Bits of a block's cost for one parameter (at most 16 escapes, 752 bits).
_COST_BITS = 10

_Token = data.StructLayout({
    "header": 1,            # a message's count and settings (else a value)
    "bits": 32,             # the value's float32 bits, or the count
    "counter": 32,          # seed + the value's index, for the stochastic draw
    "pos": 4,               # the value's position in its block
    "block_end": 1, "msg_end": 1,
    "bound": 4, "stochastic": 1})

#: A token after the hash and the quantizer: ``z`` the zigzagged integer, ``escape`` set
#: where the value leaves raw.
_Quantized = data.StructLayout({"token": _Token, "z": 16, "escape": 1})


class _Emit(enum.Enum, shape=3):
    IDLE = 0
    HEAD = 1        # the count and the settings byte
    CHOOSE = 2      # the block's Rice parameter
    CODES = 3       # its header and 16 codes, one a cycle
    END = 4         # the last bytes, then the CRC-32


@dataclass(slots=True)
class _Coder:
    """What the banks, the accumulator and the emitter share: a bank entry's layout, the
    two banks, the emitter's state, its job (a header or a full bank) and the job's
    cost per Rice parameter (``_banks``); the code the emitter makes, its length, its
    strobe and whether the accumulator has room for it (``_accumulator``)."""

    entry: data.StructLayout = None
    banks: Array = None
    state: Signal = None
    job: Signal = None
    job_costs: list = None
    code: Signal = None
    length: Signal = None
    make: Signal = None
    room: Value = None


class RiceCompressor(NicEngineBase):
    """Compress value messages into the Rice-coded codec's messages (``codnn.golden.rice``).

    Input: a descriptor beat with the count ``n`` (``codnn.hw.nic.layouts``), then the value
    beats. Output: ``n`` (u32), the settings byte, the bit stream of ``ceil(n / 16)``
    blocks and the CRC-32, as full beats of ``4 * lanes`` bytes, the final one keeping
    what is left, ``last`` set. ``bound_bits`` (``b`` of the bound ``2**-b``),
    ``rounding`` (1: stochastic) and ``seed`` are sampled at the edge that takes the
    descriptor beat.

    Defined behaviour on bad input (``error`` sticky, ``error_count`` once per message):
    ``bound_bits`` outside 7..15 is clamped into it; a message whose input ends before
    ``n`` values is padded with zeros, beats past the ``n``-th value are dropped, a count
    above ``max_values`` gives no output and is dropped up to its ``last``.

    Structure: the message's values go one a cycle through a pipeline that never holds
    a value it cannot pass on (a stall pipeline: the hash ``fmix32(seed + i)`` in 5
    stages, the quantizer in 3), then into one of two banks of a block (with each
    parameter's cost added up as they come); a full bank goes to the emitter, which picks
    the shortest parameter (a cycle) and makes the block's header and codes, a code a
    cycle through a register into a bit accumulator, while the other bank fills; the
    accumulator sends 4 bytes a cycle (and the message's last bytes one at a time) through
    the CRC-32 to a byte packer.

    Latency: ``latency`` (12) cycles from the value that ends a block to its first code
    in the bit accumulator; a word leaves it once 32 bits wait, then the byte packer's
    ``2 + ceil(log2(4 * lanes) / 3)``. Throughput: one value per cycle (so one beat every
    ``lanes`` cycles) less a cycle per block of 16, while the codes average at most 32
    bits a value and the output is not backpressured; a message costs its pads to a whole
    block and its last bytes and CRC (about 8 cycles).

    Parameters
    ----------
    lanes : int
        Float32 values per beat: 1, 2, 4, 8 or 16.
    max_values : int
        The largest count a message may declare (1..2**32-1).

    Attributes
    ----------
    i, o : In/Out(stream.Signature(beat_layout(4 * lanes)))
    bound_bits : In(4)
    rounding : In(1)
        0: to nearest, 1: stochastic.
    seed : In(32)
    error : Out(1)
    error_count : Out(16)
    """

    #: The engine's ports beside ``i`` and ``o``: settings (In) and reports (Out).
    PORTS = {"bound_bits": In(4, init=DEFAULT_BOUND_BITS), "rounding": In(1),
             "seed": In(32), "error": Out(1), "error_count": Out(16)}

    def __init__(self, *, lanes=1, max_values=DEFAULT_MAX_VALUES):
        super().__init__(lanes, self.PORTS, max_values)

    @property
    def latency(self):
        """Cycles from the edge that takes the value ending a block to the edge that puts
        the block's first code in the bit accumulator: the reader (1), the pipeline
        (``_DEPTH``), the bank (1), the parameter (1), the code's register (1). Its bytes
        leave once 32 bits wait (or the message ends), through the byte packer."""
        return RICE_COMPRESSOR_LATENCY

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        m.submodules.packer = packer = BytePacker(chunk_bytes=4, beat_bytes=4 * lanes)
        wiring.connect(m, wiring.flipped(self.o), packer.o)

        # The message's settings, sampled with its descriptor.
        flag, advance = Signal(), Signal()
        reader = MessageReader(m, self.i, advance, lanes=lanes, flag=flag, bypass=Const(0),
                               max_values=self.max_values)
        count_errors(m, flag, self.error, self.error_count, between=reader.between)
        bound, out_of_range = clamp_bound_bits(m, self.bound_bits)
        settings = Signal(data.StructLayout({"bound": 4, "stochastic": 1, "seed": 32}))
        with m.If(reader.descriptor):
            m.d.sync += [settings.bound.eq(bound), settings.stochastic.eq(self.rounding),
                         settings.seed.eq(self.seed)]
            with m.If(out_of_range):
                m.d.comb += flag.eq(1)
        tokens = self._tokens(m, reader, advance, settings)
        quantized = self._quantizer(m, tokens)
        self._blocks_and_codes(m, quantized, packer)
        return m

    def _tokens(self, m, reader, advance, settings):
        """The reader's items as tokens, a value a cycle, then zeros to the block's end
        after a message's last value. Returns the token stream."""
        lanes, item = self.lanes, reader.item
        out = stream.Signature(_Token).create(path=("token",))
        tok = out.payload
        lane = Signal(range(lanes), name="token_lane")
        padding = Signal(name="padding")                 # zeros to the end of the block
        pad_pos = Signal(4, name="pad_pos")
        index = item.index + lane
        last_in_item = lane == item.count - 1
        m.d.comb += [tok.bound.eq(settings.bound), tok.stochastic.eq(settings.stochastic),
                     tok.counter.eq(settings.seed + index)]
        with m.If(padding):
            m.d.comb += [out.valid.eq(1), tok.pos.eq(pad_pos), tok.block_end.eq(pad_pos == 15),
                         tok.msg_end.eq(pad_pos == 15)]
            with m.If(out.ready):
                m.d.sync += [pad_pos.eq(pad_pos + 1), padding.eq(pad_pos != 15)]
        with m.Elif(item.kind == Item.HEADER):
            m.d.comb += [out.valid.eq(1), tok.header.eq(1), tok.bits.eq(item.bits[:32]),
                         tok.msg_end.eq(item.last), advance.eq(out.ready)]
        with m.Elif(item.kind == Item.VALUES):
            ends = item.final & last_in_item
            m.d.comb += [out.valid.eq(1), tok.bits.eq(item.bits.word_select(lane, 32)),
                         tok.pos.eq(index[:4]), tok.block_end.eq(index[:4] == 15),
                         tok.msg_end.eq(ends & (index[:4] == 15))]
            with m.If(out.ready):
                m.d.sync += lane.eq(Mux(last_in_item, 0, lane + 1))
                m.d.comb += advance.eq(last_in_item)
                with m.If(ends & (index[:4] != 15)):
                    m.d.sync += [padding.eq(1), pad_pos.eq(index[:4] + 1)]
        with m.Else():
            m.d.comb += advance.eq(1)                    # nothing held: take the next item
        return out

    def _quantizer(self, m, tokens):
        """Each token through the hash and the quantizer: a stream of ``(token, z,
        escape)``, ``z`` the zigzagged integer (``codnn.golden.rice``)."""
        out = stream.Signature(_Quantized).create(path=("quantized",))
        pipe = StallPipeline(m, tokens, out, _DEPTH)
        tok = tokens.payload
        draw = fmix32_stages(pipe.register, tok.counter, "draw")
        token = pipe.delay(tok, 5, "token")
        # Stage 6: the shift t of |x| / step (``151 - e - b`` to nearest, ``150 - e - b``
        # stochastic), clamped where the result no longer changes.
        bits = token.bits
        e, sign = bits[23:31], bits[31]
        t = Signal(signed(10), name="quant_shift_raw")
        m.d.comb += t.eq(Const(151, 10) - e - token.bound - token.stochastic)
        sig = Mux(e != 0, Cat(bits[:23], Const(1, 1)), 0)
        limit = Mux(token.stochastic, 56, 25)
        shift6 = pipe.register(Mux(e == 0, limit, Mux(t > limit, limit, t[:6])), "quant_shift")
        sig6 = pipe.register(sig, "quant_sig")
        sign6 = pipe.register(sign & ~token.header, "quant_sign")
        wide6 = pipe.register((e == 0xFF) | ((e != 0) & (t < 0)), "quant_wide")
        draw6 = pipe.register(draw, "quant_draw")
        token6 = pipe.register(token, "quant_token")
        # Stage 7: the shifts, to nearest (``(sig + 2**(t-1)) >> t``) or stochastic
        # (``sig >> t`` and the 32 bits below the point).
        nearest = pipe.register((((sig6 << 1) + (Const(1, 1) << shift6))
                                 >> (shift6 + 1))[:25], "quant_nearest")
        whole = pipe.register((sig6 >> shift6)[:25], "quant_whole")
        fraction = pipe.register((Cat(Const(0, 32), sig6) >> shift6)[:32], "quant_fraction")
        sign7, wide7, draw7 = (pipe.register(v, f"{name}7") for v, name in (
            (sign6, "quant_sign"), (wide6, "quant_wide"), (draw6, "quant_draw")))
        token7 = pipe.register(token6, "quant_token7")
        # Stage 8: the magnitude (stochastic: plus one when the fraction and the draw
        # carry), the escape, the zigzag.
        carry_out = (fraction + draw7)[32]
        magnitude = Mux(token7.stochastic, whole + carry_out, nearest)
        escape = wide7 | (magnitude >= MAX_MAGNITUDE)
        z = Mux(escape | (magnitude == 0), 0,
                Mux(sign7, (magnitude << 1) - 1, magnitude << 1))[:16]
        m.d.comb += [out.payload.token.eq(pipe.register(token7, "quantized_token")),
                     out.payload.z.eq(pipe.register(z, "quantized_z")),
                     out.payload.escape.eq(pipe.register(escape & ~token7.header,
                                                         "quantized_escape"))]
        return out

    def _blocks_and_codes(self, m, quantized, packer):
        """Banks of blocks, the emitter, the bit accumulator, the CRC, the chunks."""
        k = _Coder()
        self._banks(m, k, quantized)
        self._accumulator(m, k, packer)
        self._emitter(m, k)

    @staticmethod
    def _banks(m, k, quantized):
        """Two banks of a block (entry ``BLOCK * bank + position``) filled as the values
        come, each Rice parameter's cost summed as they come; a header or a full bank
        handed to the emitter as its job (with the costs)."""
        q = quantized.payload
        tok = q.token
        k.entry = data.StructLayout({"z": 16, "escape": 1, "raw": 32})
        banks = Array(Signal(k.entry.size, name=f"bank{b}_{i}")
                      for b in range(2) for i in range(BLOCK))
        fill_bank = Signal(name="fill_bank")
        costs = [Signal(_COST_BITS, name=f"cost_k{i}") for i in range(MAX_K + 1)]
        # The value's code length for each parameter.
        lengths = [Mux(q.escape | ((q.z >> i) >= ESCAPE_QUOTIENT), _ESCAPE_BITS,
                       (q.z >> i) + 1 + i) for i in range(MAX_K + 1)]
        # The emitter's job: a header or a full bank.
        state = Signal(_Emit, name="emit_state")
        job = Signal(data.StructLayout({"bits": 32, "settings": 8, "msg_end": 1,
                                        "bank": 1}), name="emit_job")
        job_costs = [Signal(_COST_BITS, name=f"job_cost_k{i}") for i in range(MAX_K + 1)]
        idle = state == _Emit.IDLE
        takes = quantized.valid & quantized.ready
        hands_over = tok.header | tok.block_end
        m.d.comb += quantized.ready.eq(~hands_over | idle)
        with m.If(takes & ~tok.header):
            m.d.sync += banks[Cat(tok.pos, fill_bank)].eq(Cat(q.z, q.escape, tok.bits))
            with m.If(tok.block_end):
                m.d.sync += [c.eq(0) for c in costs] + [fill_bank.eq(~fill_bank)]
            with m.Else():
                m.d.sync += [c.eq(c + n) for c, n in zip(costs, lengths)]
        with m.If(takes & hands_over):
            settings = tok.bound | tok.stochastic << 7
            m.d.sync += [job.bits.eq(tok.bits), job.settings.eq(settings),
                         job.msg_end.eq(tok.msg_end), job.bank.eq(fill_bank),
                         state.eq(Mux(tok.header, _Emit.HEAD, _Emit.CHOOSE))]
            m.d.sync += [j.eq(c + n) for j, c, n in zip(job_costs, costs, lengths)]
        k.banks, k.state, k.job, k.job_costs = banks, state, job, job_costs

    @staticmethod
    def _accumulator(m, k, packer):
        """The bit accumulator: ``fill`` bits of ``acc`` wait; 4 bytes leave when 32 are
        there (at a message's end, what is left a byte at a time, then the CRC). The
        emitter's code goes through a register (``staged``) on its way to it."""
        state = k.state
        acc = Signal(_ACC_BITS, name="bit_acc")
        fill = Signal(range(_ACC_BITS + 1), name="bit_fill")
        crc = Signal(32, init=0xFFFF_FFFF, name="crc")
        chunk = packer.i.payload
        whole_word = fill >= 32
        staged = Signal(name="code_staged")             # a code waits for the accumulator
        ending = (state == _Emit.END) & ~staged
        m.d.comb += [packer.i.valid.eq(whole_word | ending),
                     chunk.data.eq(Mux(ending & (fill == 0), ~crc, acc[:32])),
                     chunk.length.eq(Mux(whole_word | (fill == 0), 4, 1)),
                     chunk.last.eq(ending & (fill == 0))]
        sent = Signal(6, name="bits_sent")
        kept = Signal(range(_ACC_BITS + 1), name="bits_kept")
        with m.If(packer.i.valid & packer.i.ready):
            with m.If(whole_word):
                m.d.comb += sent.eq(32)
                m.d.sync += crc.eq(crc32_update_word(crc, acc[:32]))
            with m.Elif(fill != 0):
                m.d.comb += sent.eq(Mux(fill > 8, 8, fill))
                m.d.sync += crc.eq(crc32_update(crc, acc[:8]))
            with m.Else():
                m.d.sync += [crc.eq(0xFFFF_FFFF), state.eq(_Emit.IDLE)]
        code = Signal(_CODE_BITS, name="code")
        length = Signal(range(_CODE_BITS + 1), name="code_length")
        staged_code = Signal(_CODE_BITS, name="staged_code")
        staged_length = Signal(range(_CODE_BITS + 1), name="staged_length")
        push = Signal(name="push")
        m.d.comb += push.eq(staged & (fill <= _ROOM))
        room = ~staged | push                           # the emitter may stage a code
        make = Signal(name="code_made")
        with m.If(make & room):
            m.d.sync += [staged_code.eq(code), staged_length.eq(length), staged.eq(1)]
        with m.Elif(push):
            m.d.sync += staged.eq(0)
        m.d.comb += kept.eq(fill - sent)
        m.d.sync += [acc.eq((acc >> sent) | Mux(push, staged_code << kept, 0)),
                     fill.eq(kept + Mux(push, staged_length, 0))]
        k.code, k.length, k.make, k.room = code, length, make, room

    @staticmethod
    def _emitter(m, k):
        """The emitter: a header's 40 bits; a bank's Rice parameter (the cheapest), then
        its block flag, parameter and 16 codes, one a cycle (a block of zeros: one bit)."""
        state, job, code, length, make, room = k.state, k.job, k.code, k.length, k.make, k.room
        rice_k = Signal(range(MAX_K + 1), name="rice_k")
        slot = Signal(range(BLOCK), name="emit_slot")
        value = data.View(k.entry, k.banks[Cat(slot, job.bank)])
        u = value.z >> rice_k
        coded = ~value.escape & (u < ESCAPE_QUOTIENT)
        ones = u[:4]                                    # u itself when the value is coded
        value_code = Mux(coded, ((Const(1, 16) << ones) - 1)[:15]
                         | ((value.z & ((Const(1, 16) << rice_k) - 1)[:15]) << (ones + 1)),
                         Cat(Const((1 << ESCAPE_QUOTIENT) - 1, ESCAPE_QUOTIENT), value.raw))
        value_length = Mux(coded, u + 1 + rice_k, _ESCAPE_BITS)
        with m.Switch(state):
            with m.Case(_Emit.HEAD):
                m.d.comb += [code.eq(Cat(job.bits, job.settings)), length.eq(40),
                             make.eq(1)]
                with m.If(room):
                    m.d.sync += state.eq(Mux(job.msg_end, _Emit.END, _Emit.IDLE))
            with m.Case(_Emit.CHOOSE):
                m.d.sync += [rice_k.eq(_argmin(k.job_costs)), slot.eq(0)]
                # All 16 values are 0 (none escapes) exactly when every k = 0 code is
                # one bit.
                with m.If(k.job_costs[0] == BLOCK):
                    m.d.comb += [code.eq(0), length.eq(1), make.eq(1)]
                    with m.If(room):
                        m.d.sync += state.eq(Mux(job.msg_end, _Emit.END, _Emit.IDLE))
                with m.Else():
                    m.d.sync += state.eq(_Emit.CODES)
            with m.Case(_Emit.CODES):
                first = slot == 0
                m.d.comb += [code.eq(Mux(first, Cat(Const(1, 1), rice_k, value_code),
                                         value_code)),
                             length.eq(value_length + Mux(first, _HEADER_BITS, 0)),
                             make.eq(1)]
                with m.If(room):
                    m.d.sync += slot.eq(slot + 1)
                    with m.If(slot == BLOCK - 1):
                        m.d.sync += state.eq(Mux(job.msg_end, _Emit.END, _Emit.IDLE))


def _argmin(costs):
    """The index of the smallest of ``costs`` (the lowest on a tie), as a tree of
    comparisons."""
    pairs = [(Const(k, 4), c) for k, c in enumerate(costs)]
    while len(pairs) > 1:
        merged = []
        for (ka, ca), (kb, cb) in zip(pairs[::2], pairs[1::2]):
            better = cb < ca
            merged.append((Mux(better, kb, ka), Mux(better, cb, ca)))
        if len(pairs) % 2:
            merged.append(pairs[-1])
        pairs = merged
    return pairs[0][0]
