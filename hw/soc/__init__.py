"""Board-level tops: the engines behind a UART host link (``hw.soc.protocol``)."""

from .link import HostLink
from .systolic import SystolicSoc
from .uart import UartRx, UartTx

__all__ = ["HostLink", "SystolicSoc", "UartRx", "UartTx"]
