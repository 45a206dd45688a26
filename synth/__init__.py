"""Synthesis of codnn's gateware: yosys and nextpnr through YoWASP, device definitions,
resource/Fmax reports."""
