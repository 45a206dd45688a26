"""The training memory-traffic model (codnn.model.training_traffic): bytes counted by hand
on a small chain and a residual join, MBS's grouping against every grouping of a small
network, buffers too small, ResNet-50 and an imported model, and the command."""

import itertools
from pathlib import Path

import pytest

from codnn.model.onnx_import import load_onnx
from codnn.model.training_traffic import (Group, TrafficError, TrafficLayer,
                                          from_float_network, inception_v3, layer_by_layer,
                                          resnet50, serialize, traffic)

MODELS = Path(__file__).resolve().parent.parent / "benchmarks" / "models"

CHAIN = [TrafficLayer("a", ("x",), "A", 10, True), TrafficLayer("b", ("A",), "B", 20, True),
         TrafficLayer("c", ("B",), "C", 5, True)]
SIZES = {"x": 4, "A": 8, "B": 6, "C": 2}


def _total(rows):
    return sum(r["activations"] + r["weights"] for r in rows)


def test_a_chain_counted_by_hand():
    # Batch 4, one byte a value. Layer by layer: a reads x (16) and again in the backward
    # pass (16), writes A (32); b reads A (32), writes and reads its gradient (64), reads
    # A again (32), writes B (24); c likewise over B (72 + 24) and writes C (8). Weights:
    # read forward and backward, gradient written, update (3): 6 x the parameters.
    rows = traffic(CHAIN, SIZES, layer_by_layer(CHAIN, 4), 4, value_bytes=1)
    assert [(r["activations"], r["weights"]) for r in rows] == \
        [(64, 60), (152, 120), (104, 30)]
    # a and b in sub-batches of 2: A stays on chip (stashed once: written, read in the
    # backward pass), weights read by both sub-batches each way, gradient written then
    # read and written again: 10 x the parameters.
    rows = traffic(CHAIN, SIZES, [Group(0, 1, 2), Group(2, 2, 4)], 4, value_bytes=1)
    assert [(r["activations"], r["weights"]) for r in rows] == \
        [(64, 100), (56, 200), (104, 30)]


def test_a_residual_join_counts_the_shortcut_where_it_crosses_groups():
    layers = [TrafficLayer("conv", ("x",), "y", 0, True),
              TrafficLayer("body", ("y",), "z", 0, True), TrafficLayer("add", ("z", "y"), "s")]
    sizes = {"x": 1, "y": 2, "z": 2, "s": 2}
    inside = traffic(layers, sizes, [Group(0, 2, 1)], 1, value_bytes=1)
    # one group: y stashed (written, read by body's backward); s written (the output)
    assert [r["activations"] for r in inside] == [1 + 1 + 2, 2, 2]
    split = traffic(layers, sizes, [Group(0, 1, 1), Group(2, 2, 1)], 1, value_bytes=1)
    # the add in its own group reads z and y from DRAM and returns both gradients
    assert split[2]["activations"] == 3 * 2 + 3 * 2 + 2
    assert split[1]["activations"] == 2 + 2          # y's stash read; z written


def _fits(layers, sizes, first, last, batch, buffer):
    from codnn.model.training_traffic import _consumers, _peak
    if first == last:
        return batch
    return min(batch, buffer // (2 * _peak(layers, sizes, first, last, _consumers(layers))))


def test_serialization_moves_the_fewest_bytes_of_every_grouping():
    layers = [TrafficLayer(f"l{k}", (f"t{k}",), f"t{k + 1}", w, k != 2)
              for k, w in enumerate((50, 5, 0, 400, 30))]
    sizes = {f"t{k}": s for k, s in enumerate((30, 60, 40, 40, 20, 10))}
    batch, buffer = 16, 1000
    best = None
    for cuts in itertools.product([0, 1], repeat=len(layers) - 1):
        starts = [0] + [k + 1 for k, c in enumerate(cuts) if c]
        groups = []
        for first, end in zip(starts, starts[1:] + [len(layers)]):
            sub = _fits(layers, sizes, first, end - 1, batch, buffer)
            if sub < 1:
                break
            groups.append(Group(first, end - 1, sub))
        else:
            total = _total(traffic(layers, sizes, groups, batch))
            best = total if best is None else min(best, total)
    chosen = serialize(layers, sizes, batch, buffer)
    assert _total(traffic(layers, sizes, chosen, batch)) == best
    assert best < _total(traffic(layers, sizes, layer_by_layer(layers, batch), batch))
    assert any(g.last > g.first for g in chosen)


def test_a_buffer_below_a_layers_working_set_is_refused():
    with pytest.raises(TrafficError, match=r"a: one sample's inputs and output \(24 bytes\) "
                                           r"do not fit the 20-byte buffer"):
        serialize(CHAIN, SIZES, 4, 20)


def test_resnet50_shapes_and_serialization():
    layers, sizes = resnet50()
    assert sum(layer.weights for layer in layers) == 25_557_032      # torchvision's count
    assert sizes["res5c_add"] == 2048 * 7 * 7 and len(layers) == 72
    groups = serialize(layers, sizes, 32, 10 << 20)
    assert [g.first for g in groups] == sorted(g.first for g in groups)
    assert sum(g.last - g.first + 1 for g in groups) == len(layers)
    base = _total(traffic(layers, sizes, layer_by_layer(layers, 32), 32))
    assert _total(traffic(layers, sizes, groups, 32)) < 0.5 * base


def test_inception_v3_shapes():
    layers, sizes = inception_v3()
    # torchvision's 27,161,264 parameters less its auxiliary classifier's 3,326,696
    assert sum(layer.weights for layer in layers) == 23_834_568
    assert (sizes["Mixed_5b"], sizes["Mixed_6a"], sizes["Mixed_7a"], sizes["Mixed_7c"]) == \
        (256 * 35 * 35, 768 * 17 * 17, 1280 * 8 * 8, 2048 * 8 * 8)
    assert layers[-1].reads == ("avgpool",) and sizes["avgpool"] == 2048


def test_an_imported_network_becomes_its_layers():
    layers, sizes = from_float_network(load_onnx(MODELS / "lenet5_mnist.onnx"))
    assert [layer.stashes for layer in layers] == [True, True, True, True, True, True, True]
    assert sizes[layers[0].reads[0]] == 28 * 28 and sizes[layers[-1].output] == 10
    assert layers[4].reads == (layers[3].output,)                   # through the flatten


def test_the_command(capsys, tmp_path):
    from codnn.cli import main
    assert main(["traffic", "resnet50", "--batch", "8", "--buffer", "10MiB", "--mbs",
                 "--plot", str(tmp_path / "t.png")]) == 0
    out = capsys.readouterr().out
    assert "MBS groups with a 10485760-byte buffer" in out and "% less" in out
    assert (tmp_path / "t.png").stat().st_size > 0
    for argv, message in ((["resnet50", "--buffer", "10XB"], "expected a size like 10MiB"),
                          (["nosuch.onnx"], "no such model file: nosuch.onnx (an ONNX file, "
                                            "or one of resnet50, inception_v3)"),
                          (["resnet50", "--mbs", "--buffer", "1KiB"], "conv1: one sample's")):
        assert main(["traffic", *argv]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, err
