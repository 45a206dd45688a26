"""A flag for each state of an Amaranth FSM, for properties and checkers outside it."""

from types import SimpleNamespace

__all__ = ["state_flags"]


def state_flags(fsm):
    """A flag for each state of ``fsm`` (the ``with m.FSM() as fsm`` object), high while
    the FSM is in that state: by name. Call it inside the ``with`` block, after the
    states, so that each flag is driven."""
    return SimpleNamespace(**{name: fsm.ongoing(name) for name in list(fsm.encoding)})
