"""Distributed training with the NIC codecs: ``fast_codec`` and ``fast_rice`` (the
INCEPTIONN-style and Rice codecs compiled with numba, byte-equal to ``codnn.golden.
inceptionn`` and ``codnn.golden.rice``), ``exchange`` (the ring and
aggregator exchanges of ``codnn.golden.exchange`` over torch.distributed), ``hooks`` (DDP
communication hooks that send the codecs' messages), ``links`` (network namespaces joined
by rate-limited veth pairs), ``worker`` and ``launch`` (a job of N training processes,
``codnn train --nodes``) and ``perf_model`` (iteration time by parts, ``codnn predict``).
This module itself needs neither PyTorch nor numba."""

__all__ = ["JobFailed"]


class JobFailed(RuntimeError):
    """A distributed job that started but did not finish: a rank died or timed out."""
