"""Distributed training with the NIC codecs: ``fast_codec`` (the INCEPTIONN-style codec
compiled with numba, byte-equal to ``codnn.golden.inceptionn``) and ``hooks`` (PyTorch DDP
communication hooks that send the codecs' messages)."""
