"""Whole networks: ONNX import against onnx's reference evaluator and PyTorch, the integer
network against codnn.golden.systolic's tiled run, quantization accuracy, the schedule, and bad
models and inputs."""

import dataclasses
import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from codnn.golden.column_combining import im2col, pack
from codnn.golden.network import FRACTION, Add, IntegerNetwork, pool, residual_add
from codnn.golden.systolic import cycle_model, make_tiles, mac_timing, run_layer
from codnn.model.datasets import load_dataset
from codnn.model.graph import FloatNetwork, Layer
from codnn.cli import main
from codnn.model import onnx_import
from codnn.model.onnx_import import OPERATORS, ModelError, load_onnx
from codnn.model.quantize import asymmetric_grid, clip_peak, fixed_point, quantize_network
from codnn.model.schedule import dense_layer, schedule_network

SEED = 20261125
MODELS = Path(__file__).resolve().parent.parent / "benchmarks" / "models"


def _model(nodes, inits, shape, out_shape, opset=17, path=None, batch=1):
    """A model of ``nodes`` from input ``x`` (``batch x shape``; None: symbolic) to the
    last node's output."""
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, *shape])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if path is not None:
        onnx.save(model, str(path))
    return model


def _conv_net(rng, path, *, extra=(), tail="Relu"):
    """Conv(+BN) -> Relu -> pool -> Flatten -> Gemm, with every operator variant asked."""
    inits = {"w": rng.normal(0, 0.3, (4, 2, 3, 3)), "b": rng.normal(0, 0.1, 4),
             "gamma": rng.uniform(0.5, 1.5, 4), "beta": rng.normal(0, 0.1, 4),
             "mean": rng.normal(0, 0.1, 4), "var": rng.uniform(0.5, 1.5, 4),
             "fw": rng.normal(0, 0.3, (10, 4 * 3 * 3)), "fb": rng.normal(0, 0.1, 10),
             "shape": np.array([1, -1])}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"],
                              ["n"], name="bn"),
             helper.make_node(tail, ["n"], ["r"], name="act"),
             *extra,
             helper.make_node("Reshape", [extra[-1].output[0] if extra else "p", "shape"],
                              ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="fc", transB=1)]
    if not extra:
        nodes.insert(3, helper.make_node("MaxPool", ["r"], ["p"], name="pool",
                                         kernel_shape=[2, 2], strides=[2, 2]))
    inits["shape"] = inits["shape"].astype(np.float32)
    model = _model(nodes, inits, (2, 6, 6), [1, 10])
    # Reshape's shape must be int64
    for init in model.graph.initializer:
        if init.name == "shape":
            init.CopyFrom(numpy_helper.from_array(np.array([1, -1], np.int64), "shape"))
    onnx.save(model, str(path))
    return model


def _reference(model, x):
    evaluator = ReferenceEvaluator(model)
    return np.concatenate([evaluator.run(None, {"x": xi[None].astype(np.float32)})[0]
                           for xi in x])


@pytest.mark.parametrize("variant", ["maxpool", "avgpool", "avgpool_pad", "global", "relu6"])
def test_import_matches_the_onnx_reference(tmp_path, variant):
    print(f"seed={SEED}")
    rng = np.random.default_rng(SEED)
    tail = "Relu"
    extra = ()
    if variant == "avgpool":
        extra = (helper.make_node("AveragePool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                                  strides=[2, 2]),)
    elif variant == "avgpool_pad":
        extra = (helper.make_node("AveragePool", ["r"], ["p"], name="pool", kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]),)
    elif variant == "global":
        extra = (helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
                 helper.make_node("Identity", ["p"], ["p2"], name="id"))
    elif variant == "relu6":
        tail = "Clip"
    path = tmp_path / "m.onnx"
    model = _conv_net(rng, path, extra=extra, tail=tail)
    if variant == "relu6":
        for node in model.graph.node:
            if node.op_type == "Clip":
                node.input.extend(["lo", "hi"])
        model.graph.initializer.extend([numpy_helper.from_array(np.float32(0), "lo"),
                                        numpy_helper.from_array(np.float32(0.6), "hi")])
        onnx.save(model, str(path))
    if variant == "global":
        # the Gemm reads 4 features after a global pool
        for init in model.graph.initializer:
            if init.name == "fw":
                init.CopyFrom(numpy_helper.from_array(
                    rng.normal(0, 0.3, (10, 4)).astype(np.float32), "fw"))
        onnx.save(model, str(path))
    network = load_onnx(path)
    x = rng.uniform(0, 1, (5, 2, 6, 6))
    np.testing.assert_allclose(network.run(x), _reference(model, x), rtol=1e-4, atol=1e-5)


def test_residual_add_and_matmul_bias(tmp_path):
    rng = np.random.default_rng(SEED)
    inits = {"w1": rng.normal(0, 0.5, (4, 4)), "w2": rng.normal(0, 0.5, (4, 4)),
             "bias": rng.normal(0, 0.1, 4), "w3": rng.normal(0, 0.5, (4, 3))}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
             helper.make_node("Add", ["a", "bias"], ["ab"], name="bias_add"),
             helper.make_node("Relu", ["ab"], ["r"], name="relu1"),
             helper.make_node("MatMul", ["r", "w2"], ["m2"], name="mm2"),
             helper.make_node("Add", ["m2", "r"], ["s"], name="residual"),
             helper.make_node("Relu", ["s"], ["rs"], name="relu2"),
             helper.make_node("Dropout", ["rs"], ["d"], name="drop"),
             helper.make_node("MatMul", ["d", "w3"], ["y"], name="mm3")]
    model = _model(nodes, inits, (4,), [1, 3], path=tmp_path / "r.onnx")
    network = load_onnx(tmp_path / "r.onnx")
    x = rng.uniform(0, 1, (6, 4))
    np.testing.assert_allclose(network.run(x), _reference(model, x), rtol=1e-4, atol=1e-5)
    integer = quantize_network(network, x, alpha=2, gamma=0.5)
    assert any(isinstance(step, Add) for step in integer.steps)
    scores = integer.run(integer.quantize_input(x)) * integer.output_scale
    np.testing.assert_allclose(scores, network.run(x), atol=0.1)


def test_torch_export_imports_and_matches_torch(tmp_path):
    torch = pytest.importorskip("torch")        # the train extra; make test installs it
    torch.manual_seed(SEED)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3, padding=1), torch.nn.BatchNorm2d(3), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(3, 4, 3, stride=2), torch.nn.ReLU6(),
        torch.nn.Flatten(), torch.nn.Linear(4, 5)).eval()
    with torch.no_grad():
        model[1].running_mean.uniform_(-0.2, 0.2)
        model[1].running_var.uniform_(0.5, 1.5)
    with warnings.catch_warnings():         # torch's exporter warns about its own internals
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, 1, 8, 8),), str(tmp_path / "t.onnx"))
    network = load_onnx(tmp_path / "t.onnx")
    x = np.random.default_rng(SEED).uniform(0, 1, (4, 1, 8, 8))
    with torch.no_grad():
        want = model(torch.tensor(x, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(network.run(x), want, rtol=1e-4, atol=1e-5)


def test_resnet20_as_codnn_train_exports_it_imports(tmp_path):
    # Batch norm folded, the exporter writes the equal zero biases as one initializer and
    # an Identity per user: those Identities are constants.
    torch = pytest.importorskip("torch")
    from codnn.train.export import export_onnx
    from codnn.train.models import build_model, fold_batch_norm
    torch.manual_seed(SEED)
    model = build_model("resnet20", (1, 12, 12))
    fold_batch_norm(model)
    export_onnx(model, tmp_path / "r.onnx", (1, 12, 12))
    assert "Identity" in {node.op_type for node in onnx.load(str(tmp_path / "r.onnx")).graph.node}
    network = load_onnx(tmp_path / "r.onnx")
    x = np.random.default_rng(SEED).uniform(0, 1, (2, 1, 12, 12))
    with torch.no_grad():
        want = model(torch.tensor(x, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(network.run(x), want, rtol=1e-4, atol=1e-5)


def _mobile_block(torch, activation):
    """A MobileNet-style network: an inverted residual (1 x 1 expansion, a depthwise 3 x 3,
    a linear 1 x 1 projection added to its input, no ReLU after the add) with
    ``activation`` between, then a global average and a classifier."""
    nn = torch.nn

    class Mobile(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), activation())
            self.block = nn.Sequential(
                nn.Conv2d(8, 16, 1), nn.BatchNorm2d(16), activation(),
                nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), activation(),
                nn.Conv2d(16, 8, 1), nn.BatchNorm2d(8))
            self.head = nn.Linear(8, 5)

        def forward(self, x):
            x = self.stem(x)
            x = x + self.block(x)
            return self.head(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))

    return Mobile()


def _inception_block(torch):
    """Two ReLU'd branches (a 1 x 1 and a 3 x 3 convolution) concatenated along the
    channels, max pooled, a classifier: an Inception-style block."""
    nn = torch.nn

    class Inception(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Sequential(nn.Conv2d(1, 4, 1), nn.ReLU())
            self.b = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
            self.head = nn.Linear(8 * 4 * 4, 5)

        def forward(self, x):
            x = torch.cat([self.a(x), self.b(x)], dim=1)
            return self.head(torch.nn.functional.max_pool2d(x, 2).flatten(1))

    return Inception()


def _import_matrix():
    """(name, build(torch) -> module, input shape, None or the refusal's pattern)."""
    from codnn.train.models import build_model
    return [
        ("lenet5", lambda torch: build_model("lenet5", (1, 28, 28)), (1, 28, 28), None),
        ("vgg6", lambda torch: build_model("vgg6", (1, 16, 16)), (1, 16, 16), None),
        ("resnet20", lambda torch: build_model("resnet20", (1, 12, 12)), (1, 12, 12), None),
        ("inception_block", _inception_block, (1, 8, 8), None),
        ("mobilenet_v2_block", lambda torch: _mobile_block(torch, torch.nn.ReLU6),
         (1, 8, 8), None),
        ("mobilenet_v3_block", lambda torch: _mobile_block(torch, torch.nn.Hardswish),
         (1, 8, 8), r"unsupported operator HardSwish \(HardSwish node '[^']*'\)"),
        ("efficientnet_block", lambda torch: _mobile_block(torch, torch.nn.SiLU),
         (1, 8, 8), r"unsupported operator (Sigmoid|Mul|Swish) "),
    ]


@pytest.mark.parametrize("dynamo", [False, True])
@pytest.mark.parametrize("name,build,shape,refusal", _import_matrix(),
                         ids=[row[0] for row in _import_matrix()])
def test_torch_models_import_as_onnxruntime_runs_them(tmp_path, name, build, shape, refusal,
                                                      dynamo):
    # Each model as a user writes it (batch norm left in, eval mode), exported by either
    # exporter at its default opset: the imported float network equals ONNX Runtime's
    # run of the same file, or the file is refused in one line naming the operator and
    # the node.
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    torch.manual_seed(SEED)
    model = build(torch).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
    path = tmp_path / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, *shape),), str(path), dynamo=dynamo)
    if refusal:
        with pytest.raises(ModelError, match=refusal) as error:
            load_onnx(path)
        assert "\n" not in str(error.value)
        return
    network = load_onnx(path)
    x = np.random.default_rng(SEED).uniform(0, 1, (2, *shape)).astype(np.float32)
    session = ort.InferenceSession(str(path))
    feed = session.get_inputs()[0].name
    want = np.concatenate([session.run(None, {feed: x[k:k + 1]})[0] for k in range(2)])
    np.testing.assert_allclose(network.run(x.astype(np.float64)), want, rtol=1e-4, atol=1e-5)
    integer = quantize_network(network, x, alpha=4, gamma=0.5)
    scores = integer.run(integer.quantize_input(x)) * integer.output_scale
    assert np.abs(scores - want).max() < 0.05 * max(1.0, np.abs(want).max()) + 0.05


@pytest.mark.parametrize("dynamo", [True, False])
def test_depthwise_and_grouped_convolutions_import_and_pack(tmp_path, dynamo):
    # A MobileNet-style block (a depthwise 3 x 3, a pointwise 1 x 1) and a grouped
    # convolution: each becomes a convolution over all channels with zeros outside its
    # groups, which column combining packs (columns of different groups never conflict).
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(SEED)
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 1), nn.ReLU(),
        nn.Conv2d(8, 6, 3, stride=2, groups=2), nn.ReLU(),
        nn.Flatten(), nn.Linear(6 * 3 * 3, 4)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, 1, 8, 8),), str(tmp_path / "d.onnx"),
                          dynamo=dynamo)
    network = load_onnx(tmp_path / "d.onnx")
    x = np.random.default_rng(SEED).uniform(0, 1, (3, 1, 8, 8))
    with torch.no_grad():
        want = model(torch.tensor(x, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(network.run(x), want, rtol=1e-4, atol=1e-5)
    integer = quantize_network(network, x, alpha=8, gamma=0.5)
    depthwise = integer.array_layers[1].packed
    assert depthwise.P.shape[0] == 8 and depthwise.columns == 72
    assert len(depthwise.groups) == 9              # 72 columns in 9 groups of 8: no conflict
    scores = integer.run(integer.quantize_input(x)) * integer.output_scale
    np.testing.assert_allclose(scores, network.run(x), atol=0.15)


@pytest.mark.parametrize("dynamo", [True, False])
@pytest.mark.parametrize("pooling", ["adaptive", "mean"])
def test_torch_global_average_pool_imports_as_exported(tmp_path, dynamo, pooling):
    # adaptive_avg_pool2d(x, 1) and x.mean((2, 3)): ReduceMean over the spatial axes from
    # the default exporter, GlobalAveragePool or ReduceMean from the old one.
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(2, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4, 5)

        def forward(self, x):
            a = torch.relu(self.conv(x))
            if pooling == "adaptive":
                return self.fc(torch.nn.functional.adaptive_avg_pool2d(a, 1).flatten(1))
            return self.fc(a.mean((2, 3)))

    torch.manual_seed(SEED)
    model = Net().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.zeros(1, 2, 6, 6),), str(tmp_path / "g.onnx"),
                          dynamo=dynamo)
    print(sorted({node.op_type for node in onnx.load(str(tmp_path / "g.onnx")).graph.node}))
    network = load_onnx(tmp_path / "g.onnx")
    x = np.random.default_rng(SEED).uniform(0, 1, (3, 2, 6, 6))
    with torch.no_grad():
        want = model(torch.tensor(x, dtype=torch.float32)).numpy()
    np.testing.assert_allclose(network.run(x), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("keepdims,opset,squeeze", [(0, 17, False), (1, 18, True),
                                                     (1, 13, False)])
def test_reduce_mean_over_the_map_is_a_global_average_pool(tmp_path, keepdims, opset,
                                                           squeeze):
    rng = np.random.default_rng(SEED)
    inits = {"w": rng.normal(0, 0.3, (4, 2, 3, 3)), "fw": rng.normal(0, 0.3, (5, 4))}
    mean_inputs, mean_attrs = ["r"], {"keepdims": keepdims}
    if opset >= 18:
        inits["axes"] = np.array([-2, -1])
        mean_inputs.append("axes")
    else:
        mean_attrs["axes"] = [2, 3]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("ReduceMean", mean_inputs, ["m"], name="mean", **mean_attrs)]
    if keepdims:
        if squeeze:
            nodes.append(helper.make_node("Squeeze", ["m", "sq"], ["f"], name="squeeze"))
            inits["sq"] = np.array([2, 3])
        else:
            nodes.append(helper.make_node("Flatten", ["m"], ["f"], name="flat"))
    nodes.append(helper.make_node("Gemm", ["f" if keepdims else "m", "fw"], ["y"],
                                  name="fc", transB=1))
    model = _model(nodes, inits, (2, 5, 5), [1, 5], opset=opset)
    for init in model.graph.initializer:
        if init.name in ("axes", "sq"):
            init.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(init).astype(np.int64), init.name))
    onnx.save(model, str(tmp_path / "m.onnx"))
    network = load_onnx(tmp_path / "m.onnx")
    x = rng.uniform(0, 1, (4, 2, 5, 5))
    np.testing.assert_allclose(network.run(x), _reference(model, x), rtol=1e-4, atol=1e-5)
    integer = quantize_network(network, x, alpha=2, gamma=0.5)
    assert [type(s).__name__ for s in integer.steps][:3] == ["ArrayLayer", "Pool", "Flatten"]


def test_reduce_mean_over_other_axes_is_refused(tmp_path):
    rng = np.random.default_rng(SEED)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("ReduceMean", ["r"], ["m"], name="mean", axes=[1],
                              keepdims=0)]
    _model(nodes, {"w": rng.normal(0, 0.3, (4, 2, 3, 3))}, (2, 5, 5), [1, 3, 3],
           path=tmp_path / "m.onnx")
    with pytest.raises(ModelError, match=r"ReduceMean node 'mean': only a ReduceMean over "
                                         r"the two spatial axes \(2, 3\) of a map is "
                                         r"supported, not axes \[1\]"):
        load_onnx(tmp_path / "m.onnx")


@pytest.mark.parametrize("mutate,message", [
    (lambda m: m.graph.node[0].attribute.append(helper.make_attribute("group", 3)),
     "group=3 does not divide its 4 filters"),
    (lambda m: setattr(m.graph.node[2], "op_type", "Sigmoid"), "unsupported operator Sigmoid"),
    (lambda m: m.graph.node[0].attribute.append(helper.make_attribute("strides", [1, 2])),
     "equal strides"),
])
def test_unsupported_models_name_the_node(tmp_path, mutate, message):
    rng = np.random.default_rng(SEED)
    path = tmp_path / "m.onnx"
    model = _conv_net(rng, path)
    mutate(model)
    onnx.save(model, str(path))
    with pytest.raises(ModelError, match=message):
        load_onnx(path)


def test_weights_in_an_external_data_file(tmp_path):
    # Large models keep their tensors in a file beside the .onnx (how torch writes models
    # over 2 GB): they load from there, and a missing data file is a one-line error.
    rng = np.random.default_rng(SEED)
    model = _conv_net(rng, tmp_path / "inline.onnx")
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    assert (tmp_path / "m.data").stat().st_size > 0
    x = rng.uniform(0, 1, (2, 2, 6, 6))
    np.testing.assert_array_equal(load_onnx(tmp_path / "m.onnx").run(x),
                                  load_onnx(tmp_path / "inline.onnx").run(x))
    (tmp_path / "m.data").unlink()
    with pytest.raises(ModelError, match=r"m.onnx is not a valid ONNX model \(.*m.data") \
            as error:
        load_onnx(tmp_path / "m.onnx")
    assert "\n" not in str(error.value)


def test_list_ops_is_what_the_importer_takes(capsys):
    # Every operator with a handler, and ArgMax, whose label output is left out before.
    assert set(OPERATORS) == set(onnx_import._HANDLERS) | {"ArgMax"}
    assert main(["infer", "--list-ops", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [row["op"] for row in listed] == list(OPERATORS)
    assert main(["infer"]) == 2
    assert "give a model (MODEL.onnx), or --list-ops" in capsys.readouterr().err


def test_bad_model_files(tmp_path):
    (tmp_path / "junk.onnx").write_bytes(b"\x00not a protobuf at all" * 10)
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        load_onnx(tmp_path / "junk.onnx")
    rng = np.random.default_rng(SEED)
    model = _conv_net(rng, tmp_path / "m.onnx")
    model.opset_import[0].version = 12
    onnx.save(model, str(tmp_path / "old.onnx"))
    with pytest.raises(ModelError, match="opset 12"):
        load_onnx(tmp_path / "old.onnx")
    model = _conv_net(rng, tmp_path / "m.onnx")
    for init in model.graph.initializer:
        if init.name == "fw":
            bad = numpy_helper.to_array(init).copy()
            bad[0, 0] = np.nan
            init.CopyFrom(numpy_helper.from_array(bad, "fw"))
    onnx.save(model, str(tmp_path / "nan.onnx"))
    with pytest.raises(ModelError, match="NaN"):
        load_onnx(tmp_path / "nan.onnx")


def _padded_convolutions(rng, tmp_path):
    """Two padded 3 x 3 convolutions, the first without an activation (so the second
    reads signed values), and 50 inputs."""
    inits = {"w1": rng.normal(0, 0.5, (3, 2, 3, 3)), "w2": rng.normal(0, 0.5, (2, 3, 3, 3))}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w2"], ["y"], name="c2", pads=[1, 1, 1, 1])]
    _model(nodes, inits, (2, 5, 5), [1, 2, 5, 5], path=tmp_path / "p.onnx")
    return load_onnx(tmp_path / "p.onnx"), rng.uniform(0, 1, (50, 2, 5, 5))


def test_signed_activations_into_a_layer_are_offset_binary(tmp_path):
    # A layer without an activation feeding another layer hands it signed values in
    # offset binary: its bias adds 128 << shift, the reader's takes off 128 * sum(F[n]).
    # The integer network follows the float one, and so does a padded convolution
    # reading signed values (its padding carries the code 128, the value 0).
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    inits = {"w1": rng.normal(0, 0.5, (4, 6)), "w2": rng.normal(0, 0.5, (6, 3))}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
             helper.make_node("MatMul", ["a", "w2"], ["y"], name="mm2")]
    _model(nodes, inits, (4,), [1, 3], path=tmp_path / "s.onnx")
    network = load_onnx(tmp_path / "s.onnx")
    x = rng.uniform(0, 1, (200, 4))
    integer = quantize_network(network, x, alpha=2, gamma=0.0)
    first, second = integer.array_layers
    codes = integer.run(integer.quantize_input(x), keep=True)["a"]
    assert codes.min() < 100 and codes.max() > 156          # both signs, around 128
    floats = network.run(x)
    scores = integer.run(integer.quantize_input(x)) * integer.output_scale
    assert np.abs(scores - floats).max() < 0.03 * np.abs(floats).max()
    assert first.shift is not None and second.shift is None
    with pytest.raises(ValueError, match="non-negative"):
        quantize_network(network, -np.ones((2, 4)), alpha=2, gamma=0.5)
    network, x = _padded_convolutions(rng, tmp_path)
    integer = quantize_network(network, x, alpha=2, gamma=0.0)
    assert [layer.pad for layer in integer.array_layers] == [0, 128]
    floats = network.run(x)
    scores = integer.run(integer.quantize_input(x)) * integer.output_scale
    assert np.abs(scores - floats).max() < 0.03 * np.abs(floats).max()
    unpadded = dataclasses.replace(integer, steps=(
        integer.steps[0], dataclasses.replace(integer.steps[1], pad=0)))
    wrong = unpadded.run(integer.quantize_input(x)) * integer.output_scale
    assert np.abs(wrong - floats).max() > 0.1 * np.abs(floats).max()   # zero padding errs


def _skewed_convolutions(rng, path, classes=None):
    """Two padded 3 x 3 convolutions, the first without an activation and its output
    skewed positive (mostly above 0, a little below); with ``classes``, a ReLU and a
    dense layer to that many logits after them. Its path."""
    inits = {"w1": rng.normal(0, 0.4, (3, 2, 3, 3)), "b1": np.full(3, 0.8),
             "w2": rng.normal(0, 0.5, (2, 3, 3, 3))}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["a", "w2"], ["y"], name="c2", pads=[1, 1, 1, 1])]
    out_shape = [1, 2, 5, 5]
    if classes:
        inits.update(fw=rng.normal(0, 0.3, (classes, 50)), shape=np.array([1, -1]))
        nodes[-1].output[0] = "c"
        nodes += [helper.make_node("Relu", ["c"], ["r"], name="act"),
                  helper.make_node("Reshape", ["r", "shape"], ["f"], name="flat"),
                  helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1)]
        out_shape = [1, classes]
    _model(nodes, inits, (2, 5, 5), out_shape, path=path)
    return path


def test_asymmetric_signed_activations_take_their_own_zero_point(tmp_path):
    # docs/semantics.md section 7, --asymmetric: a signed tensor only layers read takes
    # codes 0..255 over [low, high] and the zero point round(-low / scale); the writer's
    # bias adds it, the reader's takes it off and pads with it.
    assert asymmetric_grid(np.array([-1.0, 0.5, 3.0]), 255) == (4 / 255, 64)
    assert asymmetric_grid(np.array([0.0, 2.0]), 255) == (2 / 255, 0)     # unsigned
    assert asymmetric_grid(np.array([-2.0, -1.0]), 255) == (2 / 255, 255)
    assert asymmetric_grid(np.zeros(3), 255) == (1 / 255, 0)
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network = load_onnx(_skewed_convolutions(rng, tmp_path / "skew.onnx"))
    x = rng.uniform(0, 1, (100, 2, 5, 5))
    floats = network.run(x)
    a = network.run(x, keep=True)["a"]
    assert a.min() < 0 < 3 * -a.min() < a.max()                 # signed, not centred
    errors = {}
    for asymmetric in (False, True):
        integer = quantize_network(network, x, alpha=2, gamma=0.0, asymmetric=asymmetric)
        first, second = integer.array_layers
        codes = integer.run(integer.quantize_input(x), keep=True)["a"]
        scale, zero = asymmetric_grid(a, 255) if asymmetric else (np.abs(a).max() / 127, 128)
        assert second.pad == zero and first.pad == 0
        if asymmetric:
            assert codes.min() <= 2 and codes.max() >= 253 and 0 < zero < 64
        np.testing.assert_allclose((codes - zero) * scale, a, atol=2 * scale)
        errors[asymmetric] = np.abs((codes - zero) * scale - a).mean()
        scores = integer.run(integer.quantize_input(x)) * integer.output_scale
        assert np.abs(scores - floats).max() < 0.03 * np.abs(floats).max()
    print(errors)
    assert errors[True] < 0.75 * errors[False]          # finer codes for the same range
    # A signed tensor a residual add reads keeps offset binary, the add unit's codes.
    inits = {"w1": rng.normal(0, 0.5, (4, 4)), "w2": rng.normal(0, 0.5, (4, 4)),
             "w3": rng.normal(0, 0.5, (4, 3))}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
             helper.make_node("MatMul", ["a", "w2"], ["b"], name="mm2"),
             helper.make_node("Add", ["a", "b"], ["c"], name="add"),
             helper.make_node("MatMul", ["c", "w3"], ["y"], name="mm3")]
    _model(nodes, inits, (4,), [1, 3], path=tmp_path / "res.onnx")
    network = load_onnx(tmp_path / "res.onnx")
    x = rng.uniform(0, 1, (100, 4))
    integer = quantize_network(network, x, alpha=1, gamma=0.0, asymmetric=True)
    assert [layer.pad for layer in integer.array_layers] == [0, 128, 128]
    scores = integer.run(integer.quantize_input(x)) * integer.output_scale
    floats = network.run(x)
    assert np.abs(scores - floats).max() < 0.05 * np.abs(floats).max()
    # So does one the add reads through a max pooling (which keeps the codes' zero point).
    inits = {"w1": rng.normal(0, 0.4, (3, 2, 3, 3)), "b1": np.full(3, 0.8),
             "w2": rng.normal(0, 0.4, (3, 3, 3, 3)), "w3": rng.normal(0, 0.4, (2, 3, 3, 3))}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], name="c1", pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["a"], ["p"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("Conv", ["p", "w2"], ["b"], name="c2", pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["p", "b"], ["s"], name="add"),
             helper.make_node("Conv", ["s", "w3"], ["y"], name="c3", pads=[1, 1, 1, 1])]
    _model(nodes, inits, (2, 6, 6), [1, 2, 3, 3], path=tmp_path / "pooled.onnx")
    network = load_onnx(tmp_path / "pooled.onnx")
    x = rng.uniform(0, 1, (50, 2, 6, 6))
    integer = quantize_network(network, x, alpha=1, gamma=0.0, asymmetric=True)
    assert [layer.pad for layer in integer.array_layers] == [0, 128, 128]


def test_asymmetric_zero_points_run_on_the_arrays_and_the_engine(tmp_path, capsys):
    # The zero point needs no new hardware: the arrays' RTL and the network engine's
    # program (checked against golden) take it as a layer's pad code and bias.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    path = _skewed_convolutions(rng, tmp_path / "skew.onnx", classes=2)
    np.savez(tmp_path / "d.npz", x=rng.uniform(0, 1, (12, 2, 5, 5)),
             y=rng.integers(0, 2, 12))
    capsys.readouterr()                     # the seed printed
    common = [str(path), "--data", str(tmp_path / "d.npz"), "--rows", "4", "--cols", "4",
              "--alpha", "2", "--calibration", "8", "--asymmetric"]
    code, out, err = _cli(capsys, "infer", *common, "--rtl", "1", "--json", "-o",
                          str(tmp_path / "r"))
    assert code == 0, err
    report = json.loads(out)
    assert report["signed_activations"] == "asymmetric"
    assert report["rtl"]["result"] == "pass" and report["rtl"]["cycles_equal_model"]
    code, out, err = _cli(capsys, "compile", *common, "--check", "2", "--json", "-o",
                          str(tmp_path / "c"))
    assert code == 0, err
    assert json.loads(out)["checked_inputs"] == 2
    program = json.loads((tmp_path / "c" / "program.json").read_text())
    pads = [step["pad"] for step in program["steps"] if step.get("op") == "layer"]
    assert pads[0] == 0 and 0 < pads[1] < 64, pads


def test_signed_activations_on_the_tq_array_are_values(tmp_path):
    # On the TQ array a layer reading signed codes takes the values (code - 64) as its
    # sign-magnitude data: truncation applies to the value, the bias keeps no offset term,
    # and padded positions are the value 0. With every term kept the integer network
    # follows the float one; with one term per value the accumulators are the revealed
    # weights times the truncated values, which truncating the codes would not give.
    from codnn.golden.network import TermQuantization
    from codnn.golden.term_quant import group, reveal, truncate, ungroup
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    network, x = _padded_convolutions(rng, tmp_path)
    floats = network.run(x)
    exact = TermQuantization(g=2, alpha=8, beta=4)          # NAF: at most 4 terms of 7 bits
    integer = quantize_network(network, x, alpha=1, gamma=0.0, tq=exact)
    first, second = integer.array_layers
    assert [first.pad, second.pad] == [0, 64]
    tensors = integer.run(integer.quantize_input(x), keep=True)
    X, _ = second.columns(tensors["a"])
    assert X.min() < -20 and X.max() > 20 and X.min() >= -64 and X.max() <= 63
    np.testing.assert_array_equal(second.accumulate(X, 32),
                                  second.packed.dense() @ X + second.bias[:, None])
    scores = tensors["y"] * integer.output_scale
    assert np.abs(scores - floats).max() < 0.05 * np.abs(floats).max()
    short = TermQuantization(g=2, alpha=3, beta=1)
    integer = quantize_network(network, x, alpha=1, gamma=0.0, tq=short)
    second = integer.array_layers[1]
    codes = integer.run(integer.quantize_input(x), keep=True)["a"]
    X, _ = second.columns(codes)
    F = second.packed.dense()
    revealed = ungroup(reveal(group(F, 2), 3, "naf", 7), F.shape[1])
    want = revealed @ truncate(X, 1, "naf", 7) + second.bias[:, None]
    np.testing.assert_array_equal(second.accumulate(X, 32), want)
    wrong = revealed @ (truncate(X + 64, 1, "naf", 7) - 64) + second.bias[:, None]
    assert not np.array_equal(want, wrong)


def test_fixed_point_multipliers_are_the_factor_to_a_part_in_two_to_the_fifteen():
    # m / 2**shift within a part in 2**15 of the factor, m's top bit set, over factors
    # from 2**-32 to 2**15; the edges: 0, a factor past the multiplier's range, one so
    # small that the largest shift leaves a small multiplier.
    factors = np.exp2(np.linspace(-32, 15, 997))
    m, shift = fixed_point(factors, 32)
    assert np.all((m >= 1 << 15) & (m < 1 << 16)) and np.all((shift >= 0) & (shift <= 47))
    assert np.abs(m / np.exp2(shift) / factors - 1).max() < 2.0 ** -15
    m, shift = fixed_point([0.0, 2.0 ** 20, 2.0 ** -45, 0.99999999], 32)
    assert m.tolist() == [0, 65535, 4, 32768] and shift.tolist() == [15, 0, 47, 15]


def test_clip_peaks_by_max_percentile_and_least_squared_error():
    # A tensor of small values and a few outliers: max keeps the outliers, the 99.99th
    # percentile and the least-squared-error clip cut them; a tensor of zeros keeps 0.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    values = np.concatenate([rng.uniform(0, 1, 100_000), [40.0, 50.0]])
    assert clip_peak(values, "max", 255) == 50.0
    assert clip_peak(values, "percentile", 255) < 1.01
    mse = clip_peak(values, "mse", 255)
    assert 5.0 <= mse < 50.0
    assert clip_peak(np.zeros(10), "mse", 255) == 0.0


def test_a_multiplier_stage_requantizes_at_the_weights_own_scale(tmp_path, capsys):
    # With --requant multiplier each channel's weights reach 127 whatever the output
    # scale wants (the shift stage leaves them up to 2x coarser), the stage's m / 2**shift
    # is the factor from the accumulators' scale to the output's, and the outputs keep
    # within two activation steps of the float ones (half a step RMS; the inputs' own
    # rounding takes most of it). infer reports what it used and runs it on an array
    # whose output stage multiplies (the RTL equal to golden in the model's cycles);
    # compile builds it for an engine whose output stage multiplies, its program equal
    # to the integer network.
    rng = np.random.default_rng(SEED)
    weights = rng.normal(0, 1, (6, 5)) * np.exp2(rng.uniform(-6, 0, 6))[:, None]
    layer = Layer("fc1", "x", "h", weights, rng.normal(0, 0.1, 6), np.inf)
    head = Layer("fc2", "h", "y", rng.normal(0, 1, (3, 6)), np.zeros(3), None)
    network = FloatNetwork((layer, head), "x", "y", (5,))
    x = rng.uniform(0, 1, (400, 5))
    h = network.run(x, keep=True)["h"]
    s_x, s_y = x.max() / 255, h.max() / 255
    for per_channel in (False, True):
        integer = quantize_network(network, x, alpha=1, gamma=0.0, per_channel=per_channel,
                                   requant="multiplier")
        fc1 = integer.array_layers[0]
        peaks = np.abs(fc1.packed.dense()).max(1)
        assert (np.all(peaks == 127) if per_channel else peaks.max() == 127), peaks
        s_w = (np.abs(weights).max(1) if per_channel else np.abs(weights).max()) / 127
        factor = np.asarray(fc1.multiplier) / np.exp2(fc1.shift)
        np.testing.assert_allclose(factor, s_x * s_w / s_y, rtol=2.0 ** -15)
        error = integer.run(integer.quantize_input(x), keep=True)["h"] * s_y - h
        assert np.abs(error).max() <= 2 * s_y and np.sqrt(np.mean(error ** 2)) <= 0.6 * s_y
        assert integer.array_layers[1].multiplier is None
    path = tmp_path / "m.onnx"
    _conv_net(rng, path)
    np.savez(tmp_path / "d.npz", x=rng.uniform(0, 1, (12, 2, 6, 6)), y=rng.integers(0, 10, 12))
    common = [str(path), "--data", str(tmp_path / "d.npz"), "--rows", "4", "--cols", "4",
              "--calibration", "8", "--requant", "multiplier"]
    code, out, err = _cli(capsys, "infer", *common, "--calibrate", "mse", "--json", "-o",
                          str(tmp_path / "i"))
    assert code == 0, err
    report = json.loads(out)
    assert (report["requantization"], report["activation_scales"]) == ("multiplier", "mse")
    code, out, err = _cli(capsys, "infer", *common, "--rtl", "1", "--json", "-o",
                          str(tmp_path / "r"))
    assert code == 0, err
    rtl = json.loads(out)["rtl"]
    assert rtl["result"] == "pass" and rtl["cycles_equal_model"], rtl
    code, out, err = _cli(capsys, "compile", *common, "--check", "2", "--json", "-o",
                          str(tmp_path / "c"))
    assert code == 0, err
    report = json.loads(out)
    assert report["engine"]["requant"] == "multiplier" and report["checked_inputs"] == 2


def test_per_channel_scales_keep_small_filters():
    # Filters whose sizes differ by up to 2**12 (as batch norm folding leaves them): with
    # one scale per layer the small filters round to a few levels or to zero; with a shift
    # per output channel every filter's largest weight lands in 64..127, its weights
    # within 1 % of the float ones, and the outputs keep within an activation step.
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    sizes = 2.0 ** -np.arange(0, 13, 2)
    weights = np.abs(rng.normal(0, 1, (len(sizes), 4))) * sizes[:, None]
    layer = Layer("dw", "x", "h", weights, np.zeros(len(sizes)), np.inf)
    head = Layer("fc", "h", "y", np.eye(len(sizes)), np.zeros(len(sizes)), None)
    network = FloatNetwork((layer, head), "x", "y", (4,))
    x = rng.uniform(0, 1, (300, 4))
    h = network.run(x, keep=True)["h"]
    s_x, s_y = x.max() / 255, h.max() / 255              # the quantizer's scales
    errors = {}
    for per_channel in (False, True):
        integer = quantize_network(network, x, alpha=1, gamma=0.0, per_channel=per_channel)
        dw = integer.array_layers[0]
        shift = np.broadcast_to(dw.shift, len(sizes))
        effective = dw.packed.dense() * (s_y / (s_x * 2.0 ** shift))[:, None]
        errors[per_channel] = np.abs(effective - weights).max(1) / weights.max(1)
        q = integer.run(integer.quantize_input(x), keep=True)["h"]
        assert np.abs(q * s_y - h).max() <= 1.5 * s_y
        if per_channel:
            peaks = np.abs(dw.packed.dense()).max(1)
            assert np.all((peaks >= 64) & (peaks <= 127)), peaks
            assert np.all(np.diff(dw.shift) > 0) and dw.shift[-1] - dw.shift[0] >= 11
            assert integer.array_layers[1].shift is None
        else:
            assert np.ndim(dw.shift) == 0
    print(errors)
    assert errors[True].max() < 0.01 and errors[False][-3:].min() > 0.1


def test_batched_im2col_is_images_side_by_side():
    x = np.random.default_rng(SEED).integers(0, 9, (3, 2, 5, 6))
    batched = im2col(x, 3, 2, 1)
    each = np.concatenate([im2col(image, 3, 2, 1) for image in x], axis=1)
    np.testing.assert_array_equal(batched, each)


def test_integer_pooling_and_add_round_half_up():
    x = np.array([[[[1, 2], [2, 2]]]])                  # sum 7 over 4: 1.75 -> 2
    assert pool(x, "avg", 2, 2, 0, False, integer=True).item() == 2
    x = np.array([[[[1, 2], [1, 2]]]])                  # 1.5 -> 2 (half up)
    assert pool(x, "avg", 0, 1, 0, False, integer=True).item() == 2
    add = Add("add", "a", "a", "y", ma=1 << FRACTION, mb=(1 << FRACTION) // 2)
    network = IntegerNetwork((add,), "a", "y", (2,), 1.0, 1.0)
    assert network.run(np.array([[3, 250]])).tolist() == [[5, 255]]   # 4.5 -> 5; clamped
    # docs/semantics.md section 7, signed activations: a signed, b not, a signed result
    for ma, want in ((65536, 205), (196608, 255)):
        add = Add("add", "a", "b", "y", ma=ma, mb=32768, signed_a=True, signed_out=True)
        assert residual_add(np.array([200]), np.array([10]), add, 8).tolist() == [want]
    add = Add("add", "a", "b", "y", ma=65536, mb=65536, signed_a=True, signed_b=True,
              signed_out=True)
    assert residual_add(np.array([0, 255]), np.array([0, 255]), add, 8).tolist() == [0, 255]


def test_fixed_groups_repack_keeps_groups_and_weights():
    rng = np.random.default_rng(SEED)
    F = np.where(rng.random((12, 40)) < 0.2, rng.integers(-127, 128, (12, 40)), 0)
    first = pack(F, 4, 0.5)
    again = pack(first.dense(), 4, 0.5, groups=first.groups)
    assert again.groups == first.groups and again.pruned == 0
    np.testing.assert_array_equal(again.dense(), first.dense())
    with pytest.raises(ValueError, match="distinct columns"):
        pack(F, 4, 0.5, groups=[[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="distinct columns"):
        pack(F, 2, 0.5, groups=[[0, 1, 2]])


@pytest.fixture(scope="module")
def lenet():
    data = load_dataset("mnist")
    networks = {name: load_onnx(MODELS / f"{name}.onnx")
                for name in ("lenet5_mnist", "lenet5_mnist_cc")}
    return data, networks


def test_lenet_integer_accuracy_and_tiles(lenet):
    """The targets: integer within 0.5 points of float; the column-combined model's tiles
    at most 0.35 of a dense array's at most 1 point below the dense model."""
    data, networks = lenet
    accuracy, tiles = {}, {}
    for name, network in networks.items():
        integer = quantize_network(network, data.train_x[:500], alpha=8, gamma=0.5)
        float_acc = (network.run(data.test_x).argmax(1) == data.test_y).mean()
        int_acc = (integer.run(integer.quantize_input(data.test_x)).argmax(1)
                   == data.test_y).mean()
        layers, _ = schedule_network(integer, rows=16, cols=16, alpha=8)
        tiles[name] = (sum(la.tiles for la in layers), sum(la.dense_tiles for la in layers))
        accuracy[name] = float_acc, int_acc
        print(name, f"float {float_acc:.3f} integer {int_acc:.3f} tiles {tiles[name]}")
        assert abs(float_acc - int_acc) <= 0.005
    packed, dense = tiles["lenet5_mnist_cc"]
    assert packed / dense <= 0.35
    assert accuracy["lenet5_mnist"][0] - accuracy["lenet5_mnist_cc"][1] <= 0.01


def test_network_layers_equal_golden_tiled_runs_and_cycle_model(lenet):
    data, networks = lenet
    integer = quantize_network(networks["lenet5_mnist_cc"], data.train_x[:200], alpha=8,
                               gamma=0.5)
    tensors = integer.run(integer.quantize_input(data.test_x[:3]), keep=True)
    layers, host = schedule_network(integer, rows=16, cols=16, alpha=8, batch=3)
    assert [kind for _, kind in host] == ["Pool", "Pool", "Flatten"]
    for layer, scheduled in zip(integer.array_layers, layers):
        X, _ = layer.columns(tensors[layer.source])
        _, acc = run_layer(layer.packed, X, rows=16, cols=16, bias=layer.bias, alpha=8)
        np.testing.assert_array_equal(acc, layer.accumulate(X, 32))
        tiles = make_tiles(layer.packed, 16, 16, 8)
        model = cycle_model([X.shape[1]] * len(tiles), rows=16, cols=16,
                            out_stage=True, used_cells=[t.used_cells for t in tiles],
                            **mac_timing("parallel", data_bits=8, weight_bits=8, cols=16,
                                         acc_bits=32))
        assert (scheduled.tiles, scheduled.cycles, scheduled.vectors) == \
            (len(tiles), model.cycles, X.shape[1])
        np.testing.assert_array_equal(dense_layer(layer.packed).dense(), layer.packed.dense())


def _cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_infer_reports_and_runs_the_rtl(tmp_path, capsys):
    rng = np.random.default_rng(SEED)
    _conv_net(rng, tmp_path / "m.onnx")
    np.savez(tmp_path / "d.npz", x=rng.uniform(0, 1, (12, 2, 6, 6)), y=rng.integers(0, 10, 12))
    code, out, err = _cli(capsys, "infer", str(tmp_path / "m.onnx"), "--data",
                          str(tmp_path / "d.npz"), "--rows", "4", "--cols", "4", "--alpha",
                          "4", "--rtl", "2", "--calibration", "8", "--fmax-mhz", "50",
                          "-o", str(tmp_path / "out"), "--build-dir", str(tmp_path / "b"),
                          "--per-channel", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["weight_scales"] == "per channel"     # a shift per row on the RTL
    assert report["rtl"]["result"] == "pass" and report["rtl"]["cycles_equal_model"]
    assert all(r["cycles"] == r["model_cycles"] == r["scheduled_cycles"]
               for r in report["rtl"]["layers"])
    assert [r["vectors"] for r in report["rtl"]["layers"]] == [2 * 36, 2]
    assert [layer["kind"] for layer in report["layers"]] == ["conv", "dense"]
    assert report["images_per_second"] == round(50e6 / report["cycles_per_image"], 1)
    assert json.loads((tmp_path / "out" / "report.json").read_text())["tiles"] == \
        report["tiles"]
    assert all(Path(p).stat().st_size > 0 for p in report["plots"])
    assert "RTL layer 2/2" in err


@pytest.mark.parametrize("case,message", [
    ("junk", "not a valid ONNX model"),
    ("suffix", "reads ONNX models"),
    ("shape", "inputs have shape (2, 5, 5) per item; the model takes (2, 6, 6)"),
    ("nan", "NaN"),
    ("no_x", "has no array 'x'"),
    ("labels", "labels y must be"),
    ("op", "unsupported operator Sigmoid"),
    ("array", "larger than codnn models"),
])
def test_infer_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, case, message):
    rng = np.random.default_rng(SEED)
    model = _conv_net(rng, tmp_path / "m.onnx")
    x = rng.uniform(0, 1, (4, 2, 6, 6))
    arrays = {"x": x}
    if case == "junk":
        (tmp_path / "m.onnx").write_text("hello")
    elif case == "suffix":
        (tmp_path / "m.onnx").rename(tmp_path / "m.npz")
    elif case == "shape":
        arrays["x"] = x[:, :, :5, :5]
    elif case == "nan":
        arrays["x"] = np.where(x > 0.9, np.nan, x)
    elif case == "no_x":
        arrays = {"inputs": x}
    elif case == "labels":
        arrays["y"] = np.zeros(3)
    elif case == "op":
        model.graph.node[2].op_type = "Sigmoid"
        onnx.save(model, str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "d.npz", **arrays)
    path = tmp_path / ("m.npz" if case == "suffix" else "m.onnx")
    size = ["--rows", "1000", "--cols", "1000"] if case == "array" else []
    code, out, err = _cli(capsys, "infer", str(path), "--data", str(tmp_path / "d.npz"),
                          *size, "-o", str(tmp_path / "out"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.long
def test_infer_on_the_simulated_board_chains_the_devices_results(tmp_path, capsys):
    """The board top in Amaranth's simulator over the simulated UART: each layer's
    accumulators from the device, the next layer fed from them, all equal to golden."""
    _tiny_mlp(tmp_path, np.random.default_rng(SEED))
    code, out, err = _cli(capsys, "infer", str(tmp_path / "m.onnx"), "--data",
                          str(tmp_path / "d.npz"), "--rows", "2", "--cols", "2", "--alpha", "2",
                          "--board-sim", "4", "--device-images", "3", "--calibration", "6",
                          "-o", str(tmp_path / "out"), "--json")
    assert code == 0, err
    device = json.loads(out)["device"]
    assert device["result"] == "pass" and device["images"] == 3
    assert [layer["vectors"] for layer in device["layers"]] == [3, 3]
    code, _, err = _cli(capsys, "infer", str(tmp_path / "m.onnx"), "--data",
                        str(tmp_path / "d.npz"), "--rows", "2", "--cols", "2", "--alpha", "2",
                        "--board-sim", "4", "--port", "/dev/null", "-o", str(tmp_path / "o2"))
    assert code == 2 and "--port or --board-sim, not both" in err


def test_tq_network_layers_equal_golden_tiled_runs(lenet):
    from codnn.golden.network import TermQuantization
    from codnn.golden.tq_array import run_tq_layer
    data, networks = lenet
    tq = TermQuantization(g=8, alpha=12, beta=3)
    integer = quantize_network(networks["lenet5_mnist"], data.train_x[:200], alpha=8,
                               gamma=0.5, tq=tq)
    assert integer.out_bits == 7
    q = integer.quantize_input(data.test_x[:200])
    assert q.max() <= 127
    tensors = integer.run(q, keep=True)
    accuracy = (tensors[integer.output].argmax(1) == data.test_y[:200]).mean()
    float_accuracy = (networks["lenet5_mnist"].run(data.test_x[:200]).argmax(1)
                      == data.test_y[:200]).mean()
    print(f"float {float_accuracy:.3f}, TQ integer {accuracy:.3f}")
    assert float_accuracy - accuracy <= 0.02
    for layer in integer.array_layers:
        X, _ = layer.columns(tensors[layer.source][:2])
        _, acc = run_tq_layer(layer.packed.dense(), X, g=8, alpha=12, beta=3, rows=16,
                              cols=16, bias=layer.bias)
        np.testing.assert_array_equal(acc, layer.accumulate(X, 32))


def _tiny_mlp(tmp_path, rng):
    inits = {"w1": rng.normal(0, 0.5, (6, 5)), "b1": rng.normal(0, 0.1, 5),
             "w2": rng.normal(0, 0.5, (5, 3))}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["a"], name="fc1"),
             helper.make_node("Add", ["a", "b1"], ["ab"], name="bias"),
             helper.make_node("Relu", ["ab"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    _model(nodes, inits, (6,), [1, 3], path=tmp_path / "m.onnx")
    np.savez(tmp_path / "d.npz", x=rng.uniform(0, 1, (6, 6)), y=rng.integers(0, 3, 6))


@pytest.mark.long
def test_infer_on_the_tq_array_rtl_and_board(tmp_path, capsys):
    rng = np.random.default_rng(SEED)
    _tiny_mlp(tmp_path, rng)
    tq = ["--engine", "tq", "--group", "4", "--budget", "5", "--beta", "2", "--rows", "2",
          "--cols", "2", "--calibration", "6"]
    code, out, err = _cli(capsys, "infer", str(tmp_path / "m.onnx"), "--data",
                          str(tmp_path / "d.npz"), *tq, "--rtl", "2", "--board-sim", "4",
                          "--device-images", "2", "-o", str(tmp_path / "out"), "--build-dir",
                          str(tmp_path / "b"), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["array"]["engine"] == "tq"
    assert report["rtl"]["result"] == "pass" and report["rtl"]["cycles_equal_model"]
    assert report["device"]["result"] == "pass"


def test_column_combined_tq_array_in_the_integer_network(tmp_path, capsys):
    # The column-combined TQ array (semantics section 3, --engine cc-tq): a layer whose
    # columns all conflict packs nothing together, and then its groups of g packed columns
    # are the TQ array's groups of g columns: the same integer network, bit for bit, and
    # the same cycles. A sparse layer packs, and its schedule counts the packed groups.
    from codnn.golden.network import TermQuantization
    from codnn.golden.tq_array import packed_tq_products
    rng = np.random.default_rng(SEED)
    print(f"seed={SEED}")
    _tiny_mlp(tmp_path, rng)
    network = load_onnx(tmp_path / "m.onnx")
    x = rng.uniform(0, 1, (40, 6))
    tq = TermQuantization(g=4, alpha=5, beta=2)
    plain = quantize_network(network, x, alpha=1, gamma=0.0, tq=tq)
    combined = quantize_network(network, x, alpha=4, gamma=0.0, tq=tq)
    assert all(layer.packed.alpha == 4 and len(layer.packed.groups) == layer.packed.columns
               for layer in combined.array_layers)               # dense: nothing combines
    q = plain.quantize_input(x)
    np.testing.assert_array_equal(combined.run(q), plain.run(q))
    cycles = [[layer.cycles for layer in schedule_network(n, rows=2, cols=2, alpha=1)[0]]
              for n in (plain, combined)]
    assert cycles[0] == cycles[1]
    # A sparse layer: packed, each group of 4 packed columns revealed to 5 terms.
    first = plain.array_layers[0]
    sparse = first.packed.dense() * (rng.random(first.packed.dense().shape) < 0.3)
    layer = dataclasses.replace(first, packed=pack(sparse, 4, 1.0))
    assert len(layer.packed.groups) < layer.packed.columns                # it combined
    X = rng.integers(-127, 128, (sparse.shape[1], 5))
    np.testing.assert_array_equal(layer.accumulate(X, 32), packed_tq_products(
        layer.packed, X, g=4, budget=5, beta=2) + layer.bias[:, None])
    net = dataclasses.replace(plain, steps=(layer, *plain.steps[1:]))
    scheduled = schedule_network(net, rows=2, cols=2, alpha=1)[0][0]
    assert scheduled.groups == -(-len(layer.packed.groups) // 4)
    # The command line: --engine cc-tq runs golden and its schedule, and refuses --rtl.
    common = [str(tmp_path / "m.onnx"), "--data", str(tmp_path / "d.npz"), "--engine",
              "cc-tq", "--alpha", "4", "--group", "4", "--budget", "5", "--beta", "2",
              "--rows", "2", "--cols", "2", "--calibration", "6"]
    capsys.readouterr()
    code, out, err = _cli(capsys, "infer", *common, "--json", "-o", str(tmp_path / "o"))
    assert code == 0, err
    report = json.loads(out)
    assert report["array"]["engine"] == "cc-tq" and report["array"]["alpha"] == 4
    code, _, err = _cli(capsys, "infer", *common, "--rtl", "1", "-o", str(tmp_path / "r"))
    assert code == 2 and "the column-combined TQ array has no gateware yet" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("setting, message", [
    (("--group", "2", "--budget", "9"), "budget 9: a group of 2 values has at most 8 terms"),
    (("--encoding", "binary", "--group", "1", "--budget", "8"),
     "budget 8: a group of 1 values has at most 7 terms in binary"),
])
def test_infer_refuses_a_tq_budget_no_data_can_fill(tmp_path, capsys, setting, message):
    _tiny_mlp(tmp_path, np.random.default_rng(SEED))
    code, _, err = _cli(capsys, "infer", str(tmp_path / "m.onnx"), "--data",
                        str(tmp_path / "d.npz"), "--engine", "tq", *setting,
                        "-o", str(tmp_path / "out"))
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.long
def test_demo_compares_the_two_lenet_models(tmp_path, capsys):
    """``codnn demo`` without its RTL sample (the RTL path is tested above on a small
    array): both models, a folder per model under -o."""
    code, out, err = _cli(capsys, "demo", "--rtl", "0", "--calibration", "100", "-o",
                          str(tmp_path))
    assert code == 0, err
    assert "codnn demo: LeNet-5 on MNIST" in out
    reports = {name: json.loads((tmp_path / name / "report.json").read_text())
               for name in ("lenet5_mnist", "lenet5_mnist_cc")}
    assert reports["lenet5_mnist_cc"]["tile_ratio"] <= 0.35
    assert reports["lenet5_mnist"]["tile_ratio"] == 1


def _onnx_operator_cases():
    """ONNX's own test cases (shipped with the installed ``onnx``) of every operator the
    importer maps, each as a model file's ``(name, model, input, expected output)``: every
    input after the first an initializer, and, where the operator is no array layer, a
    1 x 1 identity convolution (a 2-D input: an identity MatMul) in front of it so that
    the model has a layer and the operator under test is reached."""
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    mapped = set(OPERATORS) - {"Identity", "Dropout", "Constant"}
    found = {}
    for case in cases:
        node = case.model.graph.node[0] if case.kind == "node" else None
        inputs, outputs = case.data_sets[0]
        if node is None or node.op_type not in mapped or case.name in found \
                or len(case.model.graph.node) != 1 \
                or not all(np.asarray(v).dtype.kind in "biuf" for v in inputs):
            continue        # an expanded case (a function's body), or of strings
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        graph = model.graph
        x = np.asarray(inputs[0])
        for name, value in zip([i.name for i in graph.input][1:], inputs[1:]):
            graph.initializer.append(numpy_helper.from_array(np.asarray(value), name))
        del graph.input[1:]
        if node.op_type not in ("Conv", "Gemm", "MatMul") and x.ndim in (2, 4) \
                and x.dtype == np.float32:
            first, c = graph.input[0].name, x.shape[1]
            eye = np.eye(c, dtype=np.float32)
            graph.initializer.append(numpy_helper.from_array(
                eye.reshape(c, c, 1, 1) if x.ndim == 4 else eye, "identity_weights"))
            for reader in graph.node:
                reader.input[:] = ["identity_out" if n == first else n for n in reader.input]
            graph.node.insert(0, helper.make_node("Conv" if x.ndim == 4 else "MatMul",
                                                  [first, "identity_weights"],
                                                  ["identity_out"], name="identity"))
        found[case.name] = (model, x, outputs[0], node.op_type)
    return found


def test_onnx_operator_cases_run_or_are_refused_in_one_line(tmp_path, capsys):
    # Each case of each mapped operator is equal to ONNX's expected output (float path,
    # 1e-4) or refused with a ModelError in one line; none crashes. The forms other
    # exporters write run: a Gemm bias of shape (1, N), (N,), a scalar or none, transB and
    # alpha/beta (they crashed with a ValueError before), auto_pad SAME_UPPER and
    # SAME_LOWER, pads that differ on each side (TensorFlow's [1, 0, 1, 0]), ceil_mode
    # pooling, Flatten by a negative axis; the command line refuses a refused one in one
    # line.
    results = {}
    for name, (model, x, expected, op) in _onnx_operator_cases().items():
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, str(path))
        try:
            got = load_onnx(path).run(x.astype(np.float64))
        except ModelError as error:
            assert "\n" not in str(error), error
            results[name] = "refused"
            continue
        if op == "Softmax":         # passed through: the outputs are the logits
            got = np.exp(got - got.max(axis=1, keepdims=True))
            got /= got.sum(axis=1, keepdims=True)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg=name)
        results[name] = "equal"
    print(results)
    assert len(results) >= 120
    for name in ("test_gemm_default_zero_bias", "test_gemm_default_vector_bias",
                 "test_gemm_transposeB", "test_gemm_alpha", "test_gemm_beta",
                 "test_conv_with_strides_padding", "test_matmul_2d",
                 "test_conv_with_autopad_same", "test_averagepool_2d_same_upper",
                 "test_averagepool_2d_same_lower", "test_averagepool_2d_precomputed_same_upper",
                 "test_averagepool_2d_ceil", "test_averagepool_2d_ceil_last_window_starts_on_pad",
                 "test_maxpool_2d_ceil_output_size_reduce_by_one",
                 "test_averagepool_2d_pads_count_include_pad", "test_flatten_negative_axis3",
                 "test_batchnorm_example", "test_globalaveragepool", "test_softmax_example",
                 "test_conv_with_strides_and_asymmetric_padding"):
        assert results[name] == "equal", name
    for name in ("test_gemm_default_matrix_bias", "test_gemm_transposeA",
                 "test_flatten_axis2",
                 "test_maxpool_2d_same_upper", "test_averagepool_2d_dilations",
                 "test_argmax_default_axis_example"):
        assert results[name] == "refused", name
    code = main(["infer", str(tmp_path / "test_gemm_default_matrix_bias.onnx"), "--data",
                 "digits"])
    err = capsys.readouterr().err
    assert code == 2 and "a bias C of shape (3, 4)" in err and err.count("\n") == 1, err


def _compiles_on_the_engine_rtl(capsys, path, folder):
    """``codnn compile`` of the model at ``path`` for a 4 x 4, alpha-2 engine, calibrated
    on the digits: four inputs checked against golden, one through the engine's RTL with
    its cycles equal to the model."""
    code, out, err = _cli(capsys, "compile", str(path), "--data", "digits", "--rows", "4",
                          "--cols", "4", "--alpha", "2", "--check", "4", "--rtl", "1",
                          "--json", "-o", str(folder))
    assert code == 0, err
    report = json.loads(out)
    assert report["checked_inputs"] == 4 and report["rtl"]["cycles_equal_model"]


def test_a_scikit_learn_mlp_through_its_own_exporter_end_to_end(tmp_path, capsys):
    # A network built and trained outside PyTorch: scikit-learn's MLPClassifier on the
    # digits, exported by skl2onnx (a Cast of the input, MatMul + Add of a bias, Relu,
    # Softmax, and a label output by ArgMax). Its float outputs equal scikit-learn's
    # probabilities; infer's float accuracy is scikit-learn's; compile runs it on the
    # engine's RTL, equal to golden with cycles equal to the model.
    from skl2onnx import to_onnx
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    data = load_dataset("digits")
    x, x_test = data.train_x.reshape(-1, 64), data.test_x.reshape(-1, 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp = MLPClassifier(hidden_layer_sizes=(24,), max_iter=150, random_state=SEED)
        mlp.fit(x, data.train_y)
    path = tmp_path / "mlp.onnx"
    onnx.save(to_onnx(mlp, x[:1].astype(np.float32),
                      options={id(mlp): {"zipmap": False}}, target_opset=17), str(path))
    network = load_onnx(path)
    logits = network.run(x_test.astype(np.float32))
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(probabilities, mlp.predict_proba(x_test), rtol=1e-4,
                               atol=1e-5)
    code, out, err = _cli(capsys, "infer", str(path), "--data", "digits", "--rows", "4",
                          "--cols", "4", "--alpha", "2", "--json",
                          "-o", str(tmp_path / "infer"))
    assert code == 0, err
    report = json.loads(out)
    assert report["float_accuracy"] == mlp.score(x_test, data.test_y)
    assert report["integer_accuracy"] >= report["float_accuracy"] - 0.02
    _compiles_on_the_engine_rtl(capsys, path, tmp_path / "compiled")


def test_same_padding_and_ceil_pooling_through_infer_and_compile(tmp_path, capsys):
    # TensorFlow's SAME padding (a stride-2 convolution padded 0 before and 1 after the
    # map) and ceil_mode max pooling, as an ONNX file: the integer network, the arrays'
    # schedule, the compiler and the engine's RTL take the padding as (before, after).
    rng = np.random.default_rng(SEED)
    path = tmp_path / "same.onnx"
    _model([helper.make_node("Conv", ["x", "w"], ["c"], name="same", auto_pad="SAME_UPPER",
                             strides=[2, 2], kernel_shape=[3, 3]),
            helper.make_node("Relu", ["c"], ["r"], name="relu"),
            helper.make_node("MaxPool", ["r"], ["p"], name="ceil", kernel_shape=[3, 3],
                             strides=[2, 2], ceil_mode=1),
            helper.make_node("Flatten", ["p"], ["f"], name="flat"),
            helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc", transB=1)],
           {"w": rng.normal(0, 0.3, (6, 1, 3, 3)), "fc": rng.normal(0, 0.3, (10, 6 * 2 * 2))},
           (1, 8, 8), [None, 10], path=path, batch=None)
    network = load_onnx(path)
    assert [getattr(s, "padding", None) for s in network.steps[:2]] == [(0, 1), (0, 1)]
    x = load_dataset("digits").test_x[:20]
    expected = ReferenceEvaluator(str(path)).run(None, {"x": x.astype(np.float32)})[0]
    np.testing.assert_allclose(network.run(x), expected, rtol=1e-4, atol=1e-5)
    code, out, err = _cli(capsys, "infer", str(path), "--data", "digits", "--rows", "4",
                          "--cols", "4", "--alpha", "2", "--json", "-o", str(tmp_path / "i"))
    assert code == 0, err
    assert json.loads(out)["integer_agrees_with_float"] >= 0.9
    _compiles_on_the_engine_rtl(capsys, path, tmp_path / "c")


def test_squeeze_without_axes_of_a_pooled_map_is_a_flatten(tmp_path):
    # Squeeze with no axes of the C x 1 x 1 map a global average leaves (the batch kept),
    # as some exporters write it: equal to ONNX's reference; of a 1 x 1 x 1 map (which
    # squeezes the channels too) refused in one line.
    rng = np.random.default_rng(SEED)
    for channels, refused in ((4, False), (1, True)):
        path = tmp_path / f"squeeze{channels}.onnx"
        _model([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                helper.make_node("Relu", ["c"], ["r"], name="relu"),
                helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
                helper.make_node("Squeeze", ["p"], ["s"], name="squeeze"),
                helper.make_node("Gemm", ["s", "fc"], ["y"], name="fc", transB=1)],
               {"w": rng.normal(size=(channels, 2, 3, 3)), "fc": rng.normal(size=(3, channels))},
               (2, 5, 5), [None, 3], path=path, batch=None)
        if refused:
            with pytest.raises(ModelError, match="Squeeze node 'squeeze': only a Squeeze"):
                load_onnx(path)
            continue
        x = rng.uniform(size=(3, 2, 5, 5)).astype(np.float32)
        np.testing.assert_allclose(load_onnx(path).run(x),
                                   ReferenceEvaluator(str(path)).run(None, {"x": x})[0],
                                   rtol=1e-4, atol=1e-5)
