"""Synthesis of codnn's gateware: yosys and nextpnr through YoWASP, device definitions,
resource/Fmax reports. Installed as ``codnn.synth`` (the folder ``synth/``)."""
