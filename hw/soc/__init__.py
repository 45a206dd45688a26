"""Board-level tops: the engines behind a UART host link (``codnn.hw.soc.protocol``)."""

from .array_soc import ArraySoc
from .link import HostLink
from .link_frames import LinkFrames
from .network_soc import NetworkSoc
from .nic import NicSoc
from .systolic import SystolicSoc
from .tq import TqSoc
from .uart import UartRx, UartTx

__all__ = ["ArraySoc", "HostLink", "LinkFrames", "NetworkSoc", "NicSoc", "SystolicSoc",
           "TqSoc", "UartRx", "UartTx"]
