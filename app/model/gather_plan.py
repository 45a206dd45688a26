"""How the compiler fills the gather's lane banks (docs/networks.md, "One activation
buffer"): which of a layer's column groups share a tile, which lane each input is read
from, and which stream slot each takes.

The activation buffer is one memory per lane, and each lane bank reads one word per
stream slot (``codnn.golden.network_program.GatherTable``). So a tile's inputs must spread
over the lanes: the groups that share a tile are chosen so that no lane holds more of
their inputs than a round's slots allow, an input of a map with fewer channels than
lanes is read from whichever copy of its channel is least used, and each input gets a
slot that neither its column's other inputs nor its lane's other reads take (a proper
edge colouring of the bipartite graph of columns and lanes, which needs only as many
colours as the largest degree: Konig's theorem). A layer of fewer filters than rows
computes each filter again in the rows past them, so that its map holds every channel
in every lane that ``write_region`` says.

Time: the grouping is greedy, each tile a pass over the groups left, in two orders for
each number of rounds; the colouring swaps one alternating path per input.
"""

import dataclasses

import numpy as np

from codnn.golden.column_combining import PackedLayer
from codnn.golden.network_program import (NO_LANE, GatherTable, gather_entries,
                                          lane_choices, table_words)
from codnn.golden.systolic import mac_timing, make_tiles

__all__ = ["LayerPlan", "plan_layer"]


@dataclasses.dataclass(frozen=True)
class LayerPlan:
    """A layer's tiles (row blocks outer, as ``make_tiles`` cuts them; each tile's
    ``channels`` the gather entry, ``gather_entries``, of each stream slot), each with its
    ``GatherTable``, and the gather's ``rounds`` of reads per position."""

    tiles: tuple
    tables: tuple
    rounds: int


def plan_layer(packed, src_shape, kernel, engine, positions):
    """The ``LayerPlan`` of ``packed`` (a ``PackedLayer``) reading a source stored as
    ``src_shape`` on ``engine`` at ``positions`` output positions: of the groupings whose
    tiles need 1, 2 ... ``ceil(alpha / gather_ports)`` rounds, the one whose tiles take
    the fewest cycles (a tile takes its positions, ``max(beat_cycles, rounds)`` each, or
    the loading of the next tile's table and cells if that is longer)."""
    R, W, A, P = engine.rows, engine.cols, engine.alpha, engine.gather_ports
    entries = gather_entries(packed.columns, src_shape, kernel, R)
    channels = src_shape[0]
    choices = [[lane_choices(int(entries[c, 1]), channels, R) for c in group]
               for group in packed.groups]
    beat = mac_timing(engine.mac, data_bits=engine.out_bits, weight_bits=engine.weight_bits,
                      cols=W, acc_bits=engine.acc_bits)["beat_cycles"]
    widest = max(map(len, packed.groups), default=1)
    best = None
    interleaved = _interleaved(choices)
    orders = (interleaved, _heaviest_first(choices, interleaved))
    for rounds in range(-(-widest // P), -(-A // P) + 1):
        cap = min(A, P * rounds)
        for order in orders:
            tiles = _group_tiles(choices, order, W, R, cap)
            cost = len(tiles) * max(positions * max(beat, rounds),
                                    table_words(engine) + engine.rows)
            if best is None or cost < best[0]:
                best = (cost, tiles)
    order, lanes = [], {}
    for tile in best[1]:
        order += list(tile) + [None] * (W - len(tile))
        lanes.update(tile)
    while order and order[-1] is None:
        order.pop()
    tiles = make_tiles(_reordered(packed, order), R, W, A)
    planned, tables, rounds = [], [], 1
    for tile in tiles:
        groups = order[tile.col_block * W:(tile.col_block + 1) * W]
        tile, table, slots = _slotted(tile, [lanes.get(g, []) for g in groups], entries,
                                      engine)
        if tile.row_block == 0 and packed.rows < R:
            again = np.arange(R) % packed.rows
            tile = dataclasses.replace(tile, weights=tile.weights[again],
                                       selects=tile.selects[again])
        planned.append(tile)
        tables.append(table)
        rounds = max(rounds, -(-slots // P))
    return LayerPlan(tuple(planned), tuple(tables), rounds)


def _group_tiles(choices, order, cols, lanes, cap):
    """Groups into tiles, greedily: a tile takes each group left whose inputs fit beside
    those it holds (each input on the least used of its lanes, no lane past ``cap``
    inputs), up to ``cols`` groups, the groups taken in ``order``. A list of ``{group:
    lane of each input}``."""
    left = list(order)
    tiles = []
    while left:
        load = np.zeros(lanes, np.int64)
        tile, rest = {}, []
        for g in left:
            picks = _fit(choices[g], load, cap) if len(tile) < cols else None
            if picks is None:
                rest.append(g)
            else:
                tile[g] = picks
        tiles.append(tile)
        left = rest
    return tiles


def _interleaved(choices):
    """The groups taken in turn by the channel most of their inputs read (its first
    lane), since a layer's neighbouring columns often read one channel."""
    by_channel = {}
    for g, group in enumerate(choices):
        firsts = [c[0] for c in group]
        key = max(sorted(set(firsts)), key=firsts.count) if firsts else -1
        by_channel.setdefault(key, []).append(g)
    queues = [by_channel[key] for key in sorted(by_channel)]
    order = []
    for k in range(max(map(len, queues), default=0)):
        order += [queue[k] for queue in queues if k < len(queue)]
    return order


def _heaviest_first(choices, order):
    """``order`` with the groups that put the most inputs on one lane first (first fit
    decreasing: the groups hardest to place open the tiles)."""
    def heaviest(g):
        fixed = [c[0] for c in choices[g] if len(c) == 1]
        return max(map(fixed.count, set(fixed)), default=0)
    return sorted(order, key=lambda g: -heaviest(g))


def _fit(choices, load, cap):
    """Each input's lane (``load`` updated) if all of them fit under ``cap``, else None
    (``load`` unchanged). Inputs with one lane go first."""
    trial = load.copy()
    picks = [0] * len(choices)
    for k in sorted(range(len(choices)), key=lambda k: len(choices[k])):
        lane = min(choices[k], key=lambda lane: trial[lane])
        if trial[lane] >= cap:
            return None
        trial[lane] += 1
        picks[k] = lane
    load[:] = trial
    return picks


def _reordered(packed, order):
    """``packed`` with its groups in ``order`` (None: an empty group, a tile closed
    early)."""
    N = packed.rows
    P = np.zeros((N, len(order)), packed.P.dtype)
    idx = np.zeros((N, len(order)), packed.idx.dtype)
    groups = []
    for k, g in enumerate(order):
        if g is not None:
            P[:, k], idx[:, k] = packed.P[:, g], packed.idx[:, g]
        groups.append(() if g is None else packed.groups[g])
    return PackedLayer(P, idx, tuple(groups), packed.alpha, packed.gamma, packed.columns,
                       packed.pruned)


def _slotted(tile, lanes, entries, engine):
    """``tile`` with each input in a stream slot, its ``GatherTable`` and the slots used:
    column ``g``'s input ``k`` (``tile.channels[g, k]``) is read from lane
    ``lanes[g][k]`` in the slot of its colour (``_colour``)."""
    R, W, A = engine.rows, engine.cols, engine.alpha
    edges = [(g, lane) for g in range(W) for lane in (lanes[g] if g < len(lanes) else [])]
    colour = iter(_colour(edges, W, R, A))
    channels = np.full((W, A), -1, np.int64)
    slot_of = np.zeros((W, A), np.int64)
    table = GatherTable(np.zeros((A, R), np.int64), np.zeros((A, R), np.int64),
                        np.zeros((A, R), np.int64), np.full((A, W), NO_LANE, np.int64))
    used = 0
    for g in range(W):
        for k, lane in enumerate(lanes[g] if g < len(lanes) else []):
            a = next(colour)
            entry = tile.channels[g, k]
            channels[g, a], slot_of[g, k], used = entry, a, max(used, a + 1)
            table.lane[a, g] = lane
            offset, _, kyx = entries[entry]
            table.offset[a, lane], table.ky[a, lane], table.kx[a, lane] = \
                offset, kyx >> 4, kyx & 15
    selects = np.where(tile.weights != 0,
                       np.take_along_axis(slot_of, tile.selects.T, axis=1).T, 0)
    return dataclasses.replace(tile, channels=channels, selects=selects), table, used


def _colour(edges, left, right, colours):
    """A colour below ``colours`` for each edge ``(u, v)`` of a bipartite multigraph
    (``u`` below ``left``, ``v`` below ``right``) such that no two edges at a vertex share
    one; needs ``colours`` at least the largest degree. Each edge takes a colour ``a``
    free at ``u``; if ``a`` is taken at ``v``, the path from ``v`` alternating ``a`` and a
    colour ``b`` free at ``v`` swaps them (it cannot reach ``u``, where ``a`` is free)."""
    at = {("u", u): {} for u in range(left)} | {("v", v): {} for v in range(right)}
    found = [None] * len(edges)
    for e, (u, v) in enumerate(edges):
        a = next(c for c in range(colours) if c not in at[("u", u)])
        b = next(c for c in range(colours) if c not in at[("v", v)])
        if a in at[("v", v)]:
            path, side, x, want = [], "v", v, a
            while want in at[(side, x)]:
                f = at[(side, x)][want]
                path.append(f)
                side, x = ("u", edges[f][0]) if side == "v" else ("v", edges[f][1])
                want = b if want == a else a
            for f in path:
                del at[("u", edges[f][0])][found[f]], at[("v", edges[f][1])][found[f]]
            for f in path:
                found[f] = b if found[f] == a else a
                at[("u", edges[f][0])][found[f]] = at[("v", edges[f][1])][found[f]] = f
        found[e] = a
        at[("u", u)][a] = at[("v", v)][a] = e
    return found
