"""The network engine's binary program, defined once (docs/semantics.md section 9): the
header's fields and each operation's descriptor fields, as words and bits. Golden's
encoder and decoder (``codnn.golden.network_program``) pack and unpack with these tables,
the engine's sequencer and program checks read its registers through layouts built from
them (``codnn.hw.network.descriptor``), and the semantics' format table is printed from
them (``format_table``).

A layout maps each name to a ``Field`` (a word, its first bit and width) or to a nested
layout placed at a word (``(word, layout)``: a region's three words). Values are nested
dicts of ints, as the layouts are. Every bit of a descriptor outside its operation's
fields is 0 in a program the engine runs.
"""

import enum
from dataclasses import dataclass

__all__ = ["MAGIC", "VERSION", "HEADER_WORDS", "STEP_WORDS", "Op", "Field", "REGION",
           "HEADER", "STEPS", "fields", "pack", "unpack", "unused_bits", "format_table"]

MAGIC = 0x6E646F63                              # "codn"
#: 10: a layer's fused residual add (word 0, bits 12-14; words 16-18); 9: a layer's
#: fused 2 x 2 max pooling (word 0, bits 9-11); 8: the header's
#: requantization (word 13, bits 8-15) and, with the multiplier, a row block's
#: multipliers in the weight image (7: a window's padding on each of its four sides; 6:
#: one padding for all four).
VERSION = 10
#: Little-endian u32 words of the header and of each step's descriptor.
HEADER_WORDS, STEP_WORDS = 18, 19


class Op(enum.IntEnum):
    """A descriptor's operation: the low byte of its first word."""

    LAYER = 0
    POOL = 1
    ADD = 2
    LOAD = 3
    STORE = 4


@dataclass(frozen=True)
class Field:
    """``width`` bits from bit ``bit`` of 32-bit word ``word``."""

    word: int
    bit: int = 0
    width: int = 32


#: A region of a buffer: three words (docs/semantics.md section 9, "Binary program").
REGION = {"addr": Field(0, 0, 29), "ext": Field(0, 29, 1), "vector": Field(0, 30, 1),
          "acc": Field(0, 31, 1), "channels": Field(1), "height": Field(2, 0, 16),
          "width": Field(2, 16, 16)}


def _window(word, last):
    """A window's word: kernel, stride, the padding above the map and ``last`` (a name)
    in bits 24-31."""
    return {"kernel": Field(word, 0, 8), "stride": Field(word, 8, 8),
            "padding_top": Field(word, 16, 8), last: Field(word, 24, 8)}


HEADER = {
    "magic": Field(0), "version": Field(1), "steps": Field(2, 0, 24),
    "images_less_one": Field(2, 24, 8), "input": (3, REGION), "output": (6, REGION),
    "rows": Field(9), "cols": Field(10), "alpha": Field(11), "weight_bits": Field(12, 0, 8),
    "out_bits": Field(12, 8, 8), "acc_bits": Field(12, 16, 8),
    "gather_ports": Field(12, 24, 8), "mac": Field(13, 0, 8), "requant": Field(13, 8, 8),
    "act_words": Field(14), "acc_words": Field(15), "psum_words": Field(16),
    "image_words": Field(17)}

_OP = {"op": Field(0, 0, 8)}
_TRANSFER = {**_OP, "buffer": (1, REGION), "ext_addr": Field(4), "words": Field(5)}

#: Each operation's descriptor. Every operation's first region is at word 1 and its
#: second at word 4 (the engine's checks share their products between operations).
STEPS = {
    Op.LAYER: {
        **_OP, "output_stage": Field(0, 8, 1), "pool": Field(0, 9, 1),
        "pool_odd_height": Field(0, 10, 1), "pool_odd_width": Field(0, 11, 1),
        "src": (1, REGION), "dst": (4, REGION),
        "filters": Field(7), "row_blocks": Field(8), "col_blocks": Field(9),
        "positions": Field(10), "weights": Field(11), "pad": Field(12, 0, 8),
        "padding_left": Field(12, 8, 8), "padding_bottom": Field(12, 16, 8),
        "padding_right": Field(12, 24, 8), **_window(13, "rounds"), "images": Field(14),
        "src_stride": Field(15, 0, 16), "dst_stride": Field(15, 16, 16),
        "add": Field(0, 12, 1), "add_signed_b": Field(0, 13, 1),
        "add_signed_out": Field(0, 14, 1), "add_b": Field(16, 0, 29),
        "add_b_acc": Field(16, 31, 1),
        "add_ma": Field(17, 0, 24), "add_mb": Field(18, 0, 24)},
    Op.POOL: {
        **_OP, "avg": Field(0, 8, 1), "count_pad": Field(0, 9, 1), "src": (1, REGION),
        "dst": (4, REGION), **_window(7, "padding_left"), "blocks": Field(8, 0, 16),
        "padding_bottom": Field(8, 16, 8), "padding_right": Field(8, 24, 8)},
    Op.ADD: {
        **_OP, "signed_a": Field(0, 8, 1), "signed_b": Field(0, 9, 1),
        "signed_out": Field(0, 10, 1), "a": (1, REGION), "b": (4, REGION),
        "dst": (7, REGION), "ma": Field(10), "mb": Field(11), "words": Field(12)},
    Op.LOAD: _TRANSFER,
    Op.STORE: _TRANSFER,
}


def fields(layout, word=0, prefix=""):
    """``(dotted name, Field)`` of every field of ``layout`` placed at ``word``, nested
    layouts' fields named ``outer.inner``, in the layout's order."""
    for name, item in layout.items():
        if isinstance(item, Field):
            yield prefix + name, Field(word + item.word, item.bit, item.width)
        else:
            yield from fields(item[1], word + item[0], f"{prefix}{name}.")


def pack(layout, values, count):
    """``count`` words holding ``values`` (a nested dict of ints, as ``layout``; a field
    left out is 0). ``ValueError`` if a value does not fit its field."""
    words = [0] * count
    for name, f in fields(layout):
        value = values
        for part in name.split("."):
            value = value.get(part, 0) if isinstance(value, dict) else 0
        if not 0 <= value < 1 << f.width:
            raise ValueError(f"{name} is {value}, which does not fit {f.width} bits")
        words[f.word] |= value << f.bit
    return words


def unpack(layout, words):
    """The nested dict of ``layout``'s fields in ``words`` (ints)."""
    out = {}
    for name, f in fields(layout):
        *outer, last = name.split(".")
        place = out
        for part in outer:
            place = place.setdefault(part, {})
        place[last] = int(words[f.word]) >> f.bit & ((1 << f.width) - 1)
    return out


def unused_bits(layout, count):
    """Per word of ``count``, the mask of the bits no field of ``layout`` holds."""
    masks = [0xFFFF_FFFF] * count
    for _, f in fields(layout):
        masks[f.word] &= ~(((1 << f.width) - 1) << f.bit)
    return masks


def format_table():
    """The format as docs/semantics.md prints it: a Markdown table of the header's and
    each operation's fields (word, bits, name), the regions' three words once."""
    rows = ["| layout | word | bits | field |", "|---|---|---|---|"]

    def add(title, layout):
        for name, item in layout.items():
            if isinstance(item, Field):
                bits = (f"{item.bit}" if item.width == 1
                        else f"{item.bit}..{item.bit + item.width - 1}")
                rows.append(f"| {title} | {item.word} | {bits} | `{name}` |")
            else:
                rows.append(f"| {title} | {item[0]}..{item[0] + 2} | | `{name}` (region) |")
    add("region", REGION)
    add("header", HEADER)
    for op, layout in STEPS.items():
        add(f"{op.name.lower()} ({op.value})", layout)
    return "\n".join(rows)
