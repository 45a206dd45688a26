"""The states every board top's request executor shares, added to its FSM: taking a request
from the host link (``request_states``) and sending the response (``response_states``).
Call them inside the top's ``with m.FSM():``."""

from amaranth.hdl import Cat

__all__ = ["request_states", "response_states"]


def request_states(m, link, *, command, length, args, index, then):
    """IDLE and ARGS: take a request from ``link`` (``codnn.hw.soc.HostLink``), keep its
    ``command`` and ``length``, shift its first ``len(args) // 8`` payload bytes into
    ``args`` (the first at the bottom; ``index`` counts the buffer's reads), then go to
    state ``then``. Latency: ``len(args) // 8 + 2`` cycles."""
    with m.State("IDLE"):
        m.d.comb += link.request.ready.eq(1)
        with m.If(link.request.valid):
            m.d.sync += [command.eq(link.request.payload.command),
                         length.eq(link.request.payload.length), index.eq(0)]
            m.next = "ARGS"
    with m.State("ARGS"):
        m.d.comb += link.buffer_addr.eq(index)
        m.d.sync += index.eq(index + 1)
        with m.If(index != 0):
            m.d.sync += args.eq(Cat(args[8:], link.buffer_data))
        with m.If(index == len(args) // 8):
            m.next = then


def response_states(m, link, *, status, reply_length, out_word, out_bytes, words, address,
                    end, fetch, load):
    """HEADER, FETCH, LOAD and EMIT: send the response header (``status``,
    ``reply_length``), then the bytes of ``out_word`` (``out_bytes`` of them, from the
    bottom), or, with ``words``, the words ``address`` .. ``end - 1`` of a memory one after
    another: ``fetch(address)`` gives the statements that set the read address (FETCH),
    ``load()`` the word read and its bytes (LOAD). Back to IDLE after the last byte."""
    with m.State("HEADER"):
        m.d.comb += [link.response.valid.eq(1), link.response.payload.status.eq(status),
                     link.response.payload.length.eq(reply_length)]
        with m.If(link.response.ready):
            with m.If(words):
                m.next = "FETCH"
            with m.Elif(reply_length == 0):
                m.next = "IDLE"
            with m.Else():
                m.next = "EMIT"
    with m.State("FETCH"):
        m.d.comb += fetch(address)
        m.next = "LOAD"
    with m.State("LOAD"):
        data, nbytes = load()
        m.d.sync += [out_word.eq(data), out_bytes.eq(nbytes)]
        m.next = "EMIT"
    with m.State("EMIT"):
        m.d.comb += [link.response_data.valid.eq(1),
                     link.response_data.payload.eq(out_word[:8])]
        with m.If(link.response_data.ready):
            m.d.sync += [out_word.eq(out_word >> 8), out_bytes.eq(out_bytes - 1)]
            with m.If(out_bytes == 1):
                m.next = "IDLE"
                with m.If(words):
                    m.d.sync += address.eq(address + 1)
                    with m.If(address + 1 != end):
                        m.next = "FETCH"
