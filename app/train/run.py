"""A training run (``codnn train``): dense training (or block floating point training),
then column-combining prune points with retraining or term-quantization-aware
fine-tuning; a checkpoint after every epoch, the ONNX model and a per-phase report at the
end.

Phases, each with a fresh Adam optimizer and the batch order drawn from ``seed``, the phase
and the epoch (so a resumed run is the same run):

- ``dense``: ``epochs`` epochs at ``lr``.
- ``prunetrain`` (in place of ``dense``; ``codnn.train.prunetrain``): the same epochs with
  the channel group lasso added to the loss, its weight fixed at the first step so that
  it is ``penalty`` of the objective; every ``interval`` epochs and after the last, the
  network is rebuilt without the channels it zeroed, and a fresh optimizer goes on.
- column combining, ``joint`` schedule: prune points ``1..points``, the rate of point ``i``
  ``codnn.golden.joint_optimization.prune_rate(i, sparsity, points)`` (a cubic ramp reaching
  ``sparsity``); at each, every layer is pruned and packed (``codnn.train.column_combine``)
  and retrained ``retrain_epochs`` (the last point ``final_epochs``) at ``lr / 2`` with its
  zeros fixed. ``oneshot``: one point at ``sparsity``, retrained as many epochs in all
  (the plain prune, pack, retrain baseline).
- term quantization: batch normalization folded into the convolutions (as the ONNX import
  folds it, so the weights revealed are those the TQ array computes with), then
  ``tq_epochs`` epochs at ``lr / 10`` with the forward pass of ``codnn.train.term_quant``,
  its grids calibrated (``calibrate``: max, percentile or mse, as ``codnn infer
  --calibrate``) on the training inputs before each epoch.
- block floating point (FAST): the dense phase itself computes in block floating point
  (``codnn.train.block_float``), from the first step.
"""

import copy
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from codnn.golden.column_combining import dense_tiles
from codnn.golden.joint_optimization import prune_rate
from codnn.golden.network import TermQuantization
from codnn.golden.term_quant import ENCODINGS, unfillable_budget
from codnn.model.datasets import DATASETS, as_dataset, load_dataset
from codnn.model.quantize import CALIBRATIONS

from . import TrainError, block_float, term_quant
from .arithmetic import detach
from .column_combine import apply_masks, packing_rows, prune_and_pack
from .export import export_onnx
from .models import (
    array_layers,
    build_model,
    check_model_name,
    check_module,
    fold_batch_norm,
    named_array_layers,
)
from .prunetrain import Lasso, PruneTrain, channel_spaces, channels, reconfigure, shrink, \
    training_flops

__all__ = ["SEED", "SCHEDULES", "TrainError", "ColumnCombine", "PruneTrain", "TrainSpec",
           "Phase", "train"]

SEED = 20261125
SCHEDULES = ("joint", "oneshot")
CHECKPOINT = "checkpoint.pt"


@dataclass(frozen=True)
class ColumnCombine:
    """Column-combining training: ``alpha`` columns per group, ``gamma`` conflicts per row,
    ``sparsity`` the final rate of zeros."""

    alpha: int = 8
    gamma: float = 0.5
    sparsity: float = 0.8
    points: int = 5
    retrain_epochs: int = 3
    final_epochs: int = 15
    schedule: str = "joint"


@dataclass(frozen=True)
class Phase:
    name: str
    epochs: int
    lr: float
    rate: float | None = None
    tq: bool = False
    bfp: bool = False
    prunetrain: bool = False


@dataclass(frozen=True)
class TrainSpec:
    """Everything that determines a run (and must match to resume it). ``rows x cols``:
    the array the report counts tiles on."""

    model: str
    data: str = "mnist"
    epochs: int = 15
    lr: float = 1e-3
    batch: int = 64
    seed: int = SEED
    column_combine: ColumnCombine | None = None
    tq: TermQuantization | None = None
    tq_epochs: int = 5
    calibrate: str = "max"
    bfp: block_float.BlockFloat | None = None
    prunetrain: PruneTrain | None = None
    rows: int = 16
    cols: int = 16

    def check(self, model_named=True, data_named=True):
        """Raise ``TrainError`` (one line) for settings no run can have; ``model_named``,
        ``data_named``: the spec's model and data set are names (not objects given to
        ``train``, which the spec's strings only label)."""
        try:
            if model_named:
                check_model_name(self.model)
        except ValueError as error:
            raise TrainError(str(error)) from None
        if data_named and self.data not in DATASETS and not (str(self.data).endswith(".npz")
                                                        and Path(self.data).is_file()):
            raise TrainError(f"unknown data set {self.data!r}: one of {', '.join(DATASETS)}, "
                             f"or an existing .npz of x and y")
        if min(self.epochs, self.batch, self.rows, self.cols, self.tq_epochs) < 1:
            raise TrainError("epochs, batch, tq epochs, rows and cols must be at least 1")
        if self.calibrate not in CALIBRATIONS:
            raise TrainError(f"calibrate must be one of {', '.join(CALIBRATIONS)}, not "
                             f"{self.calibrate!r}")
        if self.calibrate != "max" and not self.tq:
            raise TrainError("--calibrate chooses the scales of --tq's integer grids: "
                             "give it with --tq")
        if not 0 < self.lr < 1:
            raise TrainError(f"learning rate must lie in (0, 1), not {self.lr}")
        cc, tq, bfp = self.column_combine, self.tq, self.bfp
        if bfp and (cc or tq):
            raise TrainError("block floating point training is a run of its own: not with "
                             "column combining or term quantization")
        if bfp:
            widths = tuple(bfp.widths)
            if not widths or min(widths) < 1 or max(widths) > 21 or any(
                    b != a + 2 for a, b in zip(widths, widths[1:])):
                raise TrainError(f"block floating point widths must lie in 1..21 and rise "
                                 f"by 2, not {widths}")
            if bfp.g < 1 or bfp.every < 1 or not 0 <= bfp.seed < 1 << 32:
                raise TrainError("block floating point needs g >= 1, every >= 1 and a "
                                 "seed in 0..2**32-1")
        pt = self.prunetrain
        if pt:
            if bfp:
                raise TrainError("block floating point training is a run of its own: not "
                                 "with PruneTrain")
            if not 0 < pt.penalty < 1:
                raise TrainError(f"the PruneTrain penalty must lie in (0, 1), not "
                                 f"{pt.penalty}")
            if isinstance(pt.interval, bool) or not isinstance(pt.interval, int) \
                    or pt.interval < 1:
                raise TrainError(f"the PruneTrain interval must be a positive number of "
                                 f"epochs, not {pt.interval}")
            if not pt.threshold > 0:
                raise TrainError(f"the PruneTrain threshold must be positive, not "
                                 f"{pt.threshold}")
        if cc:
            if cc.alpha < 1 or cc.points < 1 or cc.retrain_epochs < 0 or cc.final_epochs < 1:
                raise TrainError("column combining needs alpha >= 1, points >= 1, "
                                 "retrain epochs >= 0 and final epochs >= 1")
            if not 0 < cc.sparsity < 1:
                raise TrainError(f"sparsity must lie in (0, 1), not {cc.sparsity}")
            if not 0 <= cc.gamma < 1:
                raise TrainError(f"gamma must lie in [0, 1), not {cc.gamma}")
            if cc.schedule not in SCHEDULES:
                raise TrainError(f"unknown schedule {cc.schedule!r}: one of "
                                 f"{', '.join(SCHEDULES)}")
        if tq:
            if min(tq.g, tq.alpha, tq.beta) < 1 or not 1 <= tq.mag_bits <= 15:
                raise TrainError("term quantization needs g, alpha, beta >= 1 and mag_bits "
                                 "in 1..15")
            if tq.encoding not in ENCODINGS:
                raise TrainError(f"unknown encoding {tq.encoding!r}: one of "
                                 f"{', '.join(ENCODINGS)}")
            unfillable = unfillable_budget(tq.g, tq.alpha, tq.encoding, tq.mag_bits)
            if unfillable:
                raise TrainError(f"--tq {unfillable}: the TQ array would spend cycles on "
                                 f"slots no data can fill")

    def phases(self):
        first = ("block floating point" if self.bfp else
                 "prunetrain" if self.prunetrain else "dense")
        phases = [Phase(first, self.epochs, self.lr, bfp=bool(self.bfp),
                        prunetrain=bool(self.prunetrain))]
        cc = self.column_combine
        if cc and cc.schedule == "joint":
            phases += [Phase(f"prune {i}/{cc.points}",
                             cc.final_epochs if i == cc.points else cc.retrain_epochs,
                             self.lr / 2, prune_rate(i, cc.sparsity, cc.points))
                       for i in range(1, cc.points + 1)]
        elif cc:
            total = cc.retrain_epochs * (cc.points - 1) + cc.final_epochs
            phases.append(Phase("prune 1/1", total, self.lr / 2, cc.sparsity))
        if self.tq:
            phases.append(Phase("term quantization", self.tq_epochs, self.lr / 10, tq=True))
        return phases


def _tensors(data):
    return (torch.tensor(data.train_x, dtype=torch.float32), torch.tensor(data.train_y),
            torch.tensor(data.test_x, dtype=torch.float32), torch.tensor(data.test_y))


def accuracy(model, x, y, chunk=500):
    """Top-1 accuracy of ``model`` on ``x``, ``y``."""
    model.eval()
    with torch.no_grad():
        hits = sum(int((model(x[i:i + chunk]).argmax(1) == y[i:i + chunk]).sum())
                   for i in range(0, len(x), chunk))
    return hits / len(x)


def _epoch(model, x, y, optimizer, batch, generator, after_step, penalty=None):
    """One pass over the training set, ``after_step()`` after every optimizer step; the
    mean loss (the cross entropy; ``penalty(loss)``, when given, is added to what is
    minimized)."""
    model.train()
    order = torch.randperm(len(x), generator=generator)
    total = 0.0
    for start in range(0, len(x), batch):
        chosen = order[start:start + batch]
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[chosen]), y[chosen])
        (loss + penalty(loss) if penalty else loss).backward()
        optimizer.step()
        after_step()
        total += loss.item() * len(chosen)
    return total / len(x)


def _plain_state(model):
    """The model's state under the names it has without the parametrizations of
    ``term_quant`` and ``block_float`` (a checkpoint loads into a plain model)."""
    return {k.replace("parametrizations.", "").replace(".original", ""): v
            for k, v in model.state_dict().items()}


def _layer_rows(model, spec, groups):
    if groups is None:
        rows = []
        for layer in array_layers(model):
            shape = (layer.weight.shape[0], layer.weight[0].numel())
            zeros = float((layer.weight == 0).double().mean())
            tiles = dense_tiles(shape, spec.rows, spec.cols)
            rows.append({"shape": list(shape), "sparsity": zeros, "groups": shape[1],
                         "tiles": tiles, "dense_tiles": tiles})
        return rows
    cc = spec.column_combine
    return packing_rows(model, groups, cc.alpha, cc.gamma, spec.rows, spec.cols)


def _summary(layers):
    weights = sum(r["shape"][0] * r["shape"][1] for r in layers)
    tiles, dense = sum(r["tiles"] for r in layers), sum(r["dense_tiles"] for r in layers)
    return {"sparsity": sum(r["sparsity"] * r["shape"][0] * r["shape"][1] for r in layers)
            / weights, "groups": sum(r["groups"] for r in layers), "tiles": tiles,
            "dense_tiles": dense, "tile_ratio": tiles / dense}


def _arithmetic(phase, spec, model, steps, step, counted, calibration, groups):
    """Attach the phase's arithmetic to ``model``: ``(block floating point state or None,
    what to run before each epoch, the function that detaches it)``. ``step``: the steps
    already run; ``counted``: the block floating point state saved by then;
    ``calibration``: the inputs term quantization calibrates its grids on before each
    epoch (as ``codnn infer`` will); ``groups``: column combining's (term quantization
    then reveals the packed columns: the column-combined TQ array), or None."""
    if phase.tq:
        if not step:
            fold_batch_norm(model)
        hooks = term_quant.attach(model, spec.tq, packing=groups)

        def recalibrate():
            try:
                term_quant.calibrate(model, spec.tq, calibration.shape[1:], calibration,
                                     clip=spec.calibrate)
            except ValueError as error:
                raise TrainError(f"--tq calibrates on the integer network: {error}") \
                    from None
        return None, recalibrate, lambda: detach(model, hooks)
    if phase.bfp:
        counter, hooks = block_float.attach(model, spec.bfp, steps)
        counter.step = step
        if step and counted:
            counter.restore(counted)
        return counter, lambda: None, lambda: detach(model, hooks)
    return None, lambda: None, lambda: None


def _costs(counter):
    """A block floating point phase's training cost, against fp32 (24-bit significands)
    and fixed 8-bit mantissas on the same multiply-accumulates."""
    macs = counter.macs
    return {"bit_ops": counter.bit_ops, "macs": macs,
            "bits_per_mac": counter.bit_ops / max(macs, 1),
            "fp32_bit_ops": 3 * 24 ** 2 * macs, "bfp8_bit_ops": 3 * 8 ** 2 * macs,
            "final_widths": {f"{layer}/{kind}": m
                             for (layer, kind), m in sorted(counter.chosen.items())}}


def _batch(spec, pt, model, shape, dense_per_sample):
    """The mini-batch of an epoch: ``spec.batch``, or with PruneTrain's ``grow`` that
    times the dense network's training FLOPs per sample over the current network's."""
    if not (pt and pt.grow):
        return spec.batch
    return max(spec.batch, int(spec.batch * dense_per_sample / training_flops(model, shape)))


def _epoch_costs(epochs, dense_flops):
    """The first phase's training FLOPs and the time of its training passes, and the
    FLOPs of as many epochs on the network as it was built (dense)."""
    flops = sum(e["train_flops"] for e in epochs)
    return {"train_flops": flops, "dense_train_flops": dense_flops * len(epochs),
            "flops_ratio": flops / (dense_flops * len(epochs)),
            "train_seconds": sum(e["seconds"] for e in epochs)}


def _load_checkpoint(path, spec):
    """The checkpoint at ``path``, checked to belong to ``spec``."""
    if not path.is_file():
        raise TrainError(f"no checkpoint to resume in {path.parent} (the run finished, or "
                         f"never started)")
    try:
        saved = torch.load(path, weights_only=True)
        stored = saved["spec"]
        if not isinstance(stored, dict):
            raise TypeError("its settings are not a record")
    except Exception as error:                      # torch raises many kinds
        raise TrainError(f"{path} is not a codnn training checkpoint ({error})") from None
    current = asdict(spec)
    if stored != current:
        differ = sorted(k for k in stored.keys() | current.keys()
                        if stored.get(k) != current.get(k))
        raise TrainError(f"{path} belongs to another run (it differs in "
                         f"{', '.join(differ)}): give the same settings, or another folder")
    return saved


def _save_checkpoint(path, state):
    temporary = path.with_suffix(".tmp")
    torch.save(state, temporary)
    os.replace(temporary, path)


def train(spec, out, *, resume=False, progress=None, model=None, data=None):
    """Run ``spec``, writing ``model.onnx`` and ``report.json`` into ``out`` (and
    ``checkpoint.pt`` while it runs); return the report.

    From Python, ``model`` (a ``torch.nn.Module``, trained in place) and ``data``
    (anything ``codnn.model.datasets.as_dataset`` takes: ``(x, y)`` arrays or tensors,
    with ``x_test, y_test`` or not, a ``DataLoader``, an ``.npz`` path) replace the spec's
    named model and data set; ``spec.model`` and ``spec.data`` then only label the run.

    Raises
    ------
    TrainError
        For bad settings, a model or data that do not fit, a checkpoint left in ``out``
        without ``resume``, or one that does not belong to ``spec``.
    """
    spec.check(model_named=model is None, data_named=data is None)
    progress = progress or (lambda text: None)
    out = Path(out)
    path = out / CHECKPOINT
    if not resume and path.exists():
        raise TrainError(f"{out} holds an unfinished run: --resume to continue it, or "
                         f"choose another folder")
    model, data, shape = _model_and_data(spec, model, data)
    phases = spec.phases()
    state = {"phase": 0, "epoch": 0, "masks": None, "groups": None, "rows": [],
             "optimizer": None, "reconfigured": [], "epoch_rows": [], "lasso": None}
    dense_flops = training_flops(model, shape) * len(data.train_x)
    if resume:
        _resume(path, spec, model, shape, state)
        progress(f"resuming after {phases[state['phase']].name}, epoch {state['epoch']}")
    out.mkdir(parents=True, exist_ok=True)
    x, y, test_x, test_y = _tensors(data)
    masks, groups, rows = state["masks"], state["groups"], state["rows"]
    cc = spec.column_combine
    batches = -(-len(x) // spec.batch)
    for k in range(state["phase"], len(phases)):
        phase = phases[k]
        start = state["epoch"] if k == state["phase"] else 0
        counter, before_epoch, undo = _arithmetic(
            phase, spec, model, phase.epochs * batches, start * batches, state.get("bfp"),
            data.train_x[:term_quant.CALIBRATION], groups)
        began = time.perf_counter()
        if phase.rate is not None and start == 0:
            masks, groups = prune_and_pack(model, phase.rate, cc.alpha, cc.gamma, groups)
        optimizer = torch.optim.Adam(model.parameters(), lr=phase.lr)
        if start:
            optimizer.load_state_dict(state["optimizer"])
        pt = spec.prunetrain if phase.prunetrain else None
        lasso = Lasso(model, shape, pt.penalty, state["lasso"]) if pt else None
        measured = k == 0 and not phase.bfp          # each epoch's FLOPs and time
        batch = _batch(spec, pt, model, shape, dense_flops / len(x))

        def after_step():
            if masks:
                apply_masks(model, masks)
            if counter:
                counter.step += 1
        for epoch in range(start, phase.epochs):
            generator = torch.Generator().manual_seed(spec.seed + 7919 * k + epoch)
            before_epoch()
            flops = training_flops(model, shape) * len(x) if measured else None
            timer, used = time.perf_counter(), batch
            loss = _epoch(model, x, y, optimizer, batch, generator, after_step, lasso)
            seconds = time.perf_counter() - timer
            rebuilt = pt and ((epoch + 1) % pt.interval == 0 or epoch == phase.epochs - 1)
            if rebuilt:
                state["reconfigured"].append(reconfigure(model, shape, pt.threshold))
                lasso.refresh()
                batch = _batch(spec, pt, model, shape, dense_flops / len(x))
                optimizer = torch.optim.Adam(model.parameters(),
                                             lr=phase.lr * batch / spec.batch)
            score = accuracy(model, test_x, test_y)
            width = channels(model, shape) if pt else None     # a trace: once an epoch
            if pt:
                state["lasso"] = lasso.weight
            if measured:
                state["epoch_rows"].append({
                    "epoch": epoch + 1, "channels": width,
                    "batch": used,
                    "train_flops": flops, "seconds": seconds, "loss": loss,
                    "accuracy": score, "rebuilt": bool(rebuilt)})
            progress(f"{phase.name}: epoch {epoch + 1}/{phase.epochs}, loss {loss:.4f}, "
                     f"test accuracy {score:.2%}"
                     + (f", {width} channels" if pt else ""))
            if epoch == phase.epochs - 1:
                row = {"phase": phase.name, "epochs": phase.epochs, "rate": phase.rate,
                       **_summary(_layer_rows(model, spec, groups)), "accuracy": score,
                       "loss": loss, "seconds": time.perf_counter() - began,
                       **(_costs(counter) if counter else {}),
                       **(_epoch_costs(state["epoch_rows"], dense_flops) if measured else {}),
                       **({"channels": width} if pt else {})}
                rows.append(row)
            _save_checkpoint(path, _run_state(spec, k, epoch + 1, model, optimizer, masks,
                                              groups, rows, counter, state))
        undo()
    report = _write_results(out, spec, model, shape, groups, rows, state["epoch_rows"],
                            (len(x), len(test_x)))
    path.unlink()
    return report


def _run_state(spec, phase, epoch, model, optimizer, masks, groups, rows, counter, state):
    """What a checkpoint holds after ``epoch`` of ``phase`` (``_resume`` reads it)."""
    return {"spec": asdict(spec), "phase": phase, "epoch": epoch,
            "model": _plain_state(model), "optimizer": optimizer.state_dict(),
            "masks": masks, "groups": groups, "rows": rows,
            "bfp": counter.saved() if counter else None,
            **{key: state[key] for key in ("reconfigured", "epoch_rows", "lasso")}}


def _model_and_data(spec, model, data):
    """The run's data set, its model (the spec's named one, built under the spec's seed, or
    the caller's, checked against the data) and the shape of an input; refuses now a model
    that ``--tq`` or PruneTrain could not train, not after a dense phase."""
    try:
        data = load_dataset(spec.data) if data is None else as_dataset(data, spec.data)
    except ValueError as error:
        raise TrainError(str(error)) from None
    shape = data.train_x.shape[1:]
    torch.manual_seed(spec.seed)
    try:
        model = build_model(spec.model, shape, data.classes) if model is None else \
            check_module(model, shape, data.classes, spec.model)
        if spec.tq:
            folded = copy.deepcopy(model)
            fold_batch_norm(folded)
            try:
                term_quant.imported(folded, shape)
            except ValueError as error:
                raise TrainError(f"--tq calibrates on the integer network: {error}") \
                    from None
        if spec.prunetrain:
            channel_spaces(model, shape)
    except ValueError as error:
        raise TrainError(f"--tq trains the folded weights: {error}" if spec.tq and
                         "batch normalization" in str(error) else str(error)) from None
    return model, data, shape


def _resume(path, spec, model, shape, state):
    """Load the checkpoint at ``path`` into ``state`` and ``model``: PruneTrain's smaller
    networks replayed, the batch normalization folded if fine-tuning had begun."""
    state.update(_load_checkpoint(path, spec))
    for keep in state["reconfigured"]:
        shrink(model, channel_spaces(model, shape), keep)
    if spec.phases()[state["phase"]].tq:
        fold_batch_norm(model)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as error:
        raise TrainError(f"{path} does not match model {spec.model!r} "
                         f"({str(error).splitlines()[0]})") from None


def _write_results(out, spec, model, shape, groups, rows, epoch_rows, images):
    """Export the trained ``model`` to ``out/model.onnx`` and write ``out/report.json``
    (the phases' ``rows``, the first phase's ``epoch_rows``, the layers, and the
    (train, test) ``images`` counts); return the report."""
    import json

    cc = spec.column_combine
    layers = _layer_rows(model, spec, groups)
    for (name, _), row in zip(named_array_layers(model), layers):
        row["name"] = name
    model_path = out / "model.onnx"
    export_onnx(model, model_path, shape, (cc.alpha, cc.gamma, groups) if cc else None)
    report = {"spec": asdict(spec), "torch": torch.__version__, "phases": rows,
              "epochs": epoch_rows, "layers": layers, "accuracy": rows[-1]["accuracy"],
              "train_images": images[0], "test_images": images[1], "model": str(model_path),
              "seconds": sum(r["seconds"] for r in rows)}
    (out / "report.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    return report
