"""Commands on files, NumPy only (no Amaranth is loaded): ``pack``, ``quantize``,
``compress``, ``decompress``, ``pcap``."""

from codnn.golden.packets import FRAME_CODECS

from ..packfile import WeightFileError
from .options import (
    UsageError,
    bound_bits_option,
    json_option,
    non_negative_float,
    output_file,
    positive_float,
    positive_int,
    show,
)

__all__ = ["COMMANDS", "USAGE_ERRORS", "FAILURES"]

USAGE_ERRORS = (WeightFileError,)
FAILURES = ()


def _weights_argument(sub):
    sub.add_argument("weights", metavar="WEIGHTS",
                     help=".npy (one N x C or conv layer) or .npz (one layer per key)")


def add_pack(sub):
    sub.description = ("Group the columns of each layer (column combining), prune conflicts, "
                       "write the packed form and report groups, conflicts pruned, packing "
                       "efficiency and tiles against a dense array.")
    _weights_argument(sub)
    sub.add_argument("--alpha", type=positive_int, default=8,
                     help="columns per group (default 8)")
    sub.add_argument("--gamma", type=non_negative_float, default=0.5,
                     help="allowed conflicts per row (default 0.5)")
    sub.add_argument("--rows", type=positive_int, default=32,
                     help="array rows for the tile count (default 32)")
    sub.add_argument("--cols", type=positive_int, default=32,
                     help="array columns for the tile count (default 32)")
    sub.add_argument("-o", "--output", required=True, metavar="FILE.npz",
                     type=output_file(".npz"))
    json_option(sub)


def run_pack(args):
    from codnn.golden.column_combining import dense_tiles, tiles

    from ..packfile import pack_file, save_packed
    from ..render import err_console, print_json, print_rows
    with err_console.status(f"packing {args.weights}..."):
        layers = pack_file(args.weights, args.alpha, args.gamma)
    save_packed(args.output, {name: packed for name, (_, packed) in layers.items()})
    rows = []
    for name, (matrix, packed) in layers.items():
        packed_tiles = tiles(packed, args.rows, args.cols)
        dense = dense_tiles(matrix.shape, args.rows, args.cols)
        rows.append({"layer": name, "shape": f"{matrix.shape[0]}x{matrix.shape[1]}",
                     "nonzeros": int((matrix != 0).sum()), "groups": len(packed.groups),
                     "conflicts_pruned": packed.pruned,
                     "packing_efficiency": round(packed.efficiency, 4),
                     "tiles": packed_tiles, "dense_tiles": dense,
                     "tiles_vs_dense": round(packed_tiles / dense, 4)})
    if args.json:
        print_json({"alpha": args.alpha, "gamma": args.gamma, "array": [args.rows, args.cols],
                    "output": str(args.output), "layers": rows})
    else:
        print_rows(f"codnn pack (alpha={args.alpha}, gamma={args.gamma}, "
                   f"{args.rows}x{args.cols} array) -> {args.output}", rows,
                   [("layer", "layer"), ("shape", "N x C"), ("nonzeros", "nnz"),
                    ("groups", "groups"), ("conflicts_pruned", "pruned"),
                    ("packing_efficiency", "pack eff"), ("tiles", "tiles"),
                    ("dense_tiles", "dense"), ("tiles_vs_dense", "ratio")])
    return 0


def add_quantize(sub):
    from codnn.golden.term_quant import ENCODINGS
    sub.description = ("Quantize each layer to sign-magnitude integers, keep the top ALPHA "
                       "terms of every group of G input channels, write both and report "
                       "terms per weight, term pairs against 8-bit uniform quantization and "
                       "error.")
    _weights_argument(sub)
    sub.add_argument("--group", type=positive_int, default=8,
                     help="values per group along the input axis (default 8)")
    sub.add_argument("--budget", type=positive_int, default=12,
                     help="terms kept per group, alpha (default 12)")
    sub.add_argument("--data-terms", type=positive_int, default=3,
                     help="terms kept per data value, beta, for the pair count (default 3)")
    sub.add_argument("--encoding", choices=ENCODINGS, default="naf",
                     help="term encoding (default naf)")
    sub.add_argument("--mag-bits", type=positive_int, default=7,
                     help="magnitude bits (default 7: -127..127)")
    sub.add_argument("-o", "--output", required=True, metavar="FILE.npz",
                     type=output_file(".npz"))
    json_option(sub)


def run_quantize(args):
    from ..quantfile import quantize_file
    from ..render import err_console, print_json, print_rows
    try:
        with err_console.status(f"quantizing {args.weights}..."):
            rows = quantize_file(args.weights, args.output, g=args.group, alpha=args.budget,
                                 beta=args.data_terms, encoding=args.encoding,
                                 mag_bits=args.mag_bits)
    except ValueError as error:
        if isinstance(error, WeightFileError):     # already says which file and why
            raise
        raise UsageError(str(error)) from error
    if args.json:
        print_json({"group": args.group, "budget": args.budget, "data_terms": args.data_terms,
                    "encoding": args.encoding, "output": str(args.output), "layers": rows})
    else:
        print_rows(f"codnn quantize (g={args.group}, alpha={args.budget}, "
                   f"beta={args.data_terms}, {args.encoding}) -> {args.output}", rows,
                   [("layer", "layer"), ("shape", "N x C"), ("terms_before", "terms/w UQ"),
                    ("terms_after", "terms/w TQ"), ("pairs_per_mac_tq", "pairs/MAC TQ"),
                    ("pairs_ratio", "fewer pairs than UQ8"), ("sqnr_uq_db", "SQNR UQ dB"),
                    ("sqnr_tq_db", "SQNR TQ dB")])
    return 0


def add_compress(sub):
    from codnn.golden.rice import ROUNDINGS

    from ..gradfile import CODECS
    sub.description = ("Compress the gradients of a .npy (one tensor) or .npz (one tensor "
                       "per array), converted to float32, with the golden codec into a "
                       "self-describing file; report the ratio and the error.")
    sub.add_argument("gradients", metavar="GRADS.npy|GRADS.npz")
    sub.add_argument("--codec", choices=CODECS, required=True)
    bound_bits_option(sub, type=int, what="inceptionn, rice: ", unset=True)
    sub.add_argument("--rounding", choices=ROUNDINGS, default=None,
                     help="rice: round to the nearest step of twice the bound, or "
                          "stochastically to a step of the bound (default nearest)")
    sub.add_argument("--seed", type=int, default=None,
                     help="terngrad, stochastic rice: random seed, 0..2**32-1 (default 0)")
    sub.add_argument("--clip", type=positive_float, default=None,
                     help="terngrad: scaler CLIP * std instead of max|g| (the paper uses 2.5)")
    sub.add_argument("-o", "--output", required=True, metavar="OUT.bin", type=output_file())
    json_option(sub)


#: The options of ``compress`` each codec uses; giving another is an error.
_CODEC_OPTIONS = {"inceptionn": ("bound_bits",), "terngrad": ("seed", "clip"),
                  "rice": ("bound_bits", "rounding", "seed")}


def run_compress(args):
    from codnn.golden.inceptionn import DEFAULT_BOUND_BITS

    from ..gradfile import compress_file
    from ..render import err_console
    unused = [name for name in ("bound_bits", "rounding", "seed", "clip")
              if getattr(args, name) is not None and name not in _CODEC_OPTIONS[args.codec]]
    if unused:
        raise UsageError(f"--codec {args.codec} does not use "
                         f"{', '.join('--' + name.replace('_', '-') for name in unused)}")
    args.bound_bits = DEFAULT_BOUND_BITS if args.bound_bits is None else args.bound_bits
    args.rounding = args.rounding or "nearest"
    args.seed = args.seed or 0
    try:
        with err_console.status(f"compressing {args.gradients} ({args.codec})..."):
            report = compress_file(args.gradients, args.output, codec=args.codec,
                                   bound_bits=args.bound_bits, seed=args.seed, clip=args.clip,
                                   rounding=args.rounding)
    except ValueError as error:
        if isinstance(error, WeightFileError):
            raise
        raise UsageError(str(error)) from error
    return show(args, f"codnn compress --codec {args.codec}", report)


def add_decompress(sub):
    sub.description = ("Decode a compressed gradient file into a .npy (or, for one made "
                       "from a .npz, an .npz of the same arrays) of float32.")
    sub.add_argument("compressed", metavar="IN.bin")
    sub.add_argument("-o", "--output", required=True, metavar="OUT.npy|OUT.npz",
                     type=output_file())
    json_option(sub)


def run_decompress(args):
    from ..gradfile import decompress_file
    from ..render import err_console
    with err_console.status(f"decompressing {args.compressed}..."):
        report = decompress_file(args.compressed, args.output)
    return show(args, "codnn decompress", report)


def add_pcap(sub):
    sub.description = ("Compress every gradient frame (Ethernet II / IPv4 / UDP, ToS 0x28, "
                       "whole float32 payload) of a classic pcap capture as the NIC engine "
                       "does, or with --decompress restore them; other frames pass unchanged.")
    sub.add_argument("--codec", choices=FRAME_CODECS, default="inceptionn",
                     help="the gradient frames' messages: INCEPTIONN's (the frame path's "
                          "gateware) or the Rice codec's, rounding to nearest (default "
                          "inceptionn)")
    sub.add_argument("capture", metavar="IN.pcap")
    sub.add_argument("-o", "--output", required=True, metavar="OUT.pcap", type=output_file())
    bound_bits_option(sub, type=positive_int)
    sub.add_argument("--decompress", action="store_true",
                     help="restore the values of ToS 0x28 frames (the receiver)")
    json_option(sub)


def run_pcap(args):
    from codnn.sim.pcapfile import rewrite_pcap
    try:
        report = rewrite_pcap(args.capture, args.output, bound_bits=args.bound_bits,
                              decompress=args.decompress, codec=args.codec)
    except ValueError as error:             # PcapError, a bad bound, a corrupt frame
        raise UsageError(str(error)) from None
    return show(args, f"codnn pcap {args.capture}", report)


COMMANDS = {"pack": (add_pack, run_pack), "quantize": (add_quantize, run_quantize),
            "compress": (add_compress, run_compress),
            "decompress": (add_decompress, run_decompress), "pcap": (add_pcap, run_pcap)}
