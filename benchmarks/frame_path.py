"""Line rate of the frame path: cycles per frame back to back against the cycles the wire
gives a frame, and (``--synth``) Fmax on ecp5-85k.

    .venv/bin/python benchmarks/frame_path.py [--synth] [--frames 16]

For each direction and width (1 byte per beat, 1 GbE at 125 MHz; 8 bytes, 10 GbE at
156.25 MHz) and each kind of frame (the smallest, 60 bytes, and the largest, 1514 bytes,
both as gradient frames and as frames the rule passes), ``--frames`` equal frames go
through ``hw.nic.FramePath`` on Amaranth's simulator with no idle input and no
backpressure; the steady-state cycles per frame are the mean gap between the last few
frames' last beats out. The receiver gets each gradient frame compressed, as the sender
sends it. The wire gives a frame of ``L`` bytes (no FCS) ``(L + 24) / W`` cycles at ``W``
bytes per cycle (FCS 4, preamble and SFD 8, inter-frame gap 12); the table's ``share`` is
the wire's cycles over the path's, so 1.0 or more keeps line rate. Every frame out is also
checked against ``codnn.golden.packets.frame_path``.
"""

import argparse
import random

import numpy as np

from codnn.flows import run_synthesis
from codnn.golden.packets import compress_frame, frame_path
from codnn.hw.nic.frame_path import FramePath
from codnn.sim.frame_fuzz import gradient_frame
from codnn.sim.pysim import run_frame_path

#: (width in bytes, the wire's rate, its clock in MHz)
LINKS = ((1, "1 GbE", 125.0), (8, "10 GbE", 156.25))
#: Ethernet's bytes around a frame: FCS, preamble and SFD, inter-frame gap.
WIRE_OVERHEAD = 4 + 8 + 12


def _kinds(rng):
    """(name, frame as the sender gets it) of each kind measured."""
    smallest = gradient_frame(rng, rng.normal(0, 0.01, 4).astype("<f4")) + bytes(2)
    largest = gradient_frame(rng, rng.normal(0, 0.01, 368).astype("<f4"))
    other = gradient_frame(rng, np.zeros(4, "<f4"), tos=0) + bytes(2)
    other_large = gradient_frame(rng, np.zeros(368, "<f4"), tos=0)
    return [("smallest gradient", smallest), ("smallest other", other),
            ("largest gradient", largest), ("largest other", other_large)]


def measure(direction, width, frame, count):
    """Steady-state cycles per frame of ``count`` copies of ``frame``, back to back."""
    frames = [(frame, False)] * count
    want, _ = frame_path(frames, direction)
    result = run_frame_path(FramePath(direction=direction, width=width), frames,
                            bounds=[10] * count, expected_frames=len(want),
                            rng=random.Random(1))
    assert result["frames"] == want, "the frame path differs from golden"
    ends = result["ends"]
    tail = ends[len(ends) // 2:]
    return (tail[-1] - tail[0]) / (len(tail) - 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=16)
    parser.add_argument("--synth", action="store_true", help="also synthesize on ecp5-85k")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    kinds = _kinds(rng)
    print(f"{'direction':<11}{'link':<8}{'frame':<19}{'bytes in':>9}{'wire cycles':>12}"
          f"{'path cycles':>12}{'share':>7}")
    for direction in ("compress", "decompress"):
        for width, link, _ in LINKS:
            for name, frame in kinds:
                sent = compress_frame(frame) if direction == "decompress" else frame
                wire = (len(sent) + WIRE_OVERHEAD) / width
                cycles = measure(direction, width, sent, args.frames)
                print(f"{direction:<11}{link:<8}{name:<19}{len(sent):>9}{wire:>12.1f}"
                      f"{cycles:>12.1f}{wire / cycles:>7.2f}")
    if args.synth:
        print(f"\n{'direction':<11}{'link':<8}{'LUT':>7}{'FF':>7}{'EBR':>5}{'Fmax MHz':>10}"
              f"{'needed':>8}")
        for direction in ("compress", "decompress"):
            for width, link, clock in LINKS:
                report = run_synthesis("framepath", {"direction": direction, "width": width},
                                       device="ecp5-85k")
                print(f"{direction:<11}{link:<8}{report['luts']:>7}{report['ffs']:>7}"
                      f"{report['brams']:>5}{report['fmax_mhz']:>10.1f}{clock:>8.2f}")


if __name__ == "__main__":
    main()
