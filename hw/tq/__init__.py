"""Term-quantization gateware: term encoder, term revealer, term lister, tMAC, pMAC and
the TQ array."""

from hw.tq.array import TermQuantArray
from hw.tq.encoder import TermEncoder
from hw.tq.lister import TermLister
from hw.tq.mac import PMac, TMac
from hw.tq.revealer import TermRevealer

__all__ = ["TermEncoder", "TermRevealer", "TermLister", "TMac", "PMac", "TermQuantArray"]
