"""Term-quantization gateware: term encoder, term revealer, term lister, tMAC, pMAC and
the TQ array."""

from codnn.hw.tq.array import TermQuantArray
from codnn.hw.tq.encoder import TermEncoder
from codnn.hw.tq.lister import TermLister
from codnn.hw.tq.mac import PMac, TMac
from codnn.hw.tq.revealer import TermRevealer

__all__ = ["TermEncoder", "TermRevealer", "TermLister", "TMac", "PMac", "TermQuantArray"]
