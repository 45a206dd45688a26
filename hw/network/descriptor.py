"""The network program's header and step descriptors as the engine's registers hold them:
``amaranth.lib.data`` layouts built from the format's one table
(``codnn.golden.program_format``), so that the sequencer and the program checks read every
field by name (docs/semantics.md section 9)."""

from amaranth.hdl import unsigned
from amaranth.lib import data

from codnn.golden.program_format import HEADER, HEADER_WORDS, STEP_WORDS, STEPS, Field

__all__ = ["layout", "HeaderLayout", "StepLayout"]


def layout(fields, words):
    """A ``data.FlexibleLayout`` of ``words`` 32-bit words holding ``fields`` (a format
    layout: each name a ``Field`` or a nested ``(word, layout)``, a region)."""
    members = {}
    for name, item in fields.items():
        if isinstance(item, Field):
            members[name] = data.Field(unsigned(item.width), 32 * item.word + item.bit)
        else:
            at, inner = item
            size = 1 + max(f.word for f in inner.values())
            members[name] = data.Field(layout(inner, size), 32 * at)
    return data.FlexibleLayout(32 * words, members)


#: The header's fields.
HeaderLayout = layout(HEADER, HEADER_WORDS)

#: A step's descriptor: its operation (``op``, an ``Op``) and each operation's fields
#: over the same bits (``layer``, ``pool``, ``add``, ``load``, ``store``).
StepLayout = data.UnionLayout({"op": unsigned(8), **{
    op.name.lower(): layout(fields, STEP_WORDS) for op, fields in STEPS.items()}})
