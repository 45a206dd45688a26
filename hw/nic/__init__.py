"""NIC gradient-compression gateware: the byte packer, the INCEPTIONN-style compressor and
decompressor, their loop, the TernGrad encoder, decoder and max-abs unit, the
AXI4-Stream top, and a ring of links for simulating the ring exchange."""

from codnn.hw.nic.axis import AxiStreamTop
from codnn.hw.nic.compressor import InceptionnCompressor
from codnn.hw.nic.decompressor import InceptionnDecompressor
from codnn.hw.nic.loopback import CodecLoopback
from codnn.hw.nic.maxabs import MaxAbs
from codnn.hw.nic.packer import BytePacker
from codnn.hw.nic.registry import NIC_ENGINES, NicDescriptor
from codnn.hw.nic.ring_links import RingLinks
from codnn.hw.nic.terngrad import TernGradDecoder, TernGradEncoder

__all__ = ["BytePacker", "InceptionnCompressor", "InceptionnDecompressor", "CodecLoopback",
           "TernGradEncoder", "TernGradDecoder", "MaxAbs", "AxiStreamTop", "NIC_ENGINES",
           "NicDescriptor", "RingLinks"]
