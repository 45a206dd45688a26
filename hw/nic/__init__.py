"""NIC gradient-compression gateware: the byte packer, the INCEPTIONN-style compressor and
decompressor, their loop, the TernGrad encoder, decoder and max-abs unit, and the
AXI4-Stream top."""

from hw.nic.axis import AxiStreamTop
from hw.nic.compressor import InceptionnCompressor
from hw.nic.decompressor import InceptionnDecompressor
from hw.nic.loopback import CodecLoopback
from hw.nic.maxabs import MaxAbs
from hw.nic.packer import BytePacker
from hw.nic.registry import ENGINES, NicEngine
from hw.nic.terngrad import TernGradDecoder, TernGradEncoder

__all__ = ["BytePacker", "InceptionnCompressor", "InceptionnDecompressor", "CodecLoopback",
           "TernGradEncoder", "TernGradDecoder", "MaxAbs", "AxiStreamTop", "ENGINES",
           "NicEngine"]
