"""One rank of a distributed training job (``python -m codnn.distributed.worker JOB RANK``,
started by ``codnn.distributed.launch``): data-parallel training of a ``codnn.train`` model
with the DDP hook of the job's codec and exchange, over gloo.

Every epoch the ranks draw one permutation of the training set from (seed, epoch); rank
``r`` takes every N-th image from ``r`` (the same number on every rank) and trains on
batches of ``batch``, so an iteration covers ``N * batch`` images. The loss is the batch's
sum, not its mean: Adam's steps do not change with the scale of the gradients, and summed
gradients sit where the INCEPTIONN-style codec's absolute error bound keeps most of them
(a mean divides them by the batch and truncates most to zero). With ``optimizer`` "sgd"
the job trains with momentum SGD (``momentum``) at a learning rate that falls along a
cosine from ``lr`` to 0 over the epochs; ``lr`` then applies to the summed gradient.

Each iteration's compute time (forward, backward and optimizer, without the hook),
communication time (the hook), the hook's time in the codec and on the wire, and the bytes
it sent are recorded. Rank 0 measures test accuracy after every epoch and prints one
progress line, while the others wait at a barrier (outside the timed iterations). At the
end every rank writes ``rank<r>.json`` (with a digest of its weights, so the launcher can
check they agree).

A job may carry a fault for drills: ``{"rank": r, "step": t, "kind": k}``; at step ``t``
rank ``r`` turns its input NaN (``nan``), exits at once (``exit``) or takes its link down
(``link``).
"""

import hashlib
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from codnn.model.datasets import load_dataset
from codnn.train.models import build_model
from codnn.train.run import accuracy

from .hooks import comm_hook


def _tx_bytes(interface):
    try:
        return int(Path(f"/sys/class/net/{interface}/statistics/tx_bytes").read_text())
    except OSError:
        return 0


def _fault(job, rank, step, x):
    fault = job.get("fault")
    if not fault or fault["rank"] != rank or fault["step"] != step:
        return x
    if fault["kind"] == "exit":
        os._exit(3)
    if fault["kind"] == "link":
        subprocess.run(["ip", "link", "set", job["interface"], "down"], check=True)
        return x
    x = x.clone()
    x[0, 0, 0, 0] = float("nan")
    return x


def run(job, rank):
    nodes = job["nodes"]
    os.environ.update(MASTER_ADDR=job["master"], MASTER_PORT=str(job["port"]),
                      GLOO_SOCKET_IFNAME=job["interface"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=nodes,
                            timeout=timedelta(seconds=job["timeout"]))
    data = load_dataset(job["data"])
    x, y = torch.tensor(data.train_x, dtype=torch.float32), torch.tensor(data.train_y)
    torch.manual_seed(job["seed"])
    model = torch.nn.parallel.DistributedDataParallel(
        build_model(job["model"], x.shape[1:], int(y.max()) + 1))
    state, hook = comm_hook(job["codec"], exchange=job["exchange"],
                            bound_bits=job["bound_bits"], seed=job["seed"],
                            scaler=job["scaler"])
    model.register_comm_hook(state, hook)
    if job["optimizer"] == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=job["lr"], momentum=job["momentum"])
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, job["epochs"])
    else:
        optimizer, schedule = torch.optim.Adam(model.parameters(), lr=job["lr"]), None
    test_x = torch.tensor(data.test_x, dtype=torch.float32)
    test_y = torch.tensor(data.test_y)
    iterations, accuracies, step = [], [], 0
    tx_start = _tx_bytes(job["interface"])
    share = len(x) // nodes                 # the same number of iterations on every rank
    if share < job["batch"]:
        raise ValueError(f"each rank gets {share} training images, fewer than one batch of "
                         f"{job['batch']}: use fewer nodes or a smaller batch")
    for epoch in range(job["epochs"]):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(
            job["seed"] * 1000 + epoch))[rank::nodes][:share]
        model.train()
        for start in range(0, len(order) - job["batch"] + 1, job["batch"]):
            chosen = order[start:start + job["batch"]]
            begin, hook_before = time.perf_counter(), state.seconds
            sent_before, codec_before = state.traffic.sent_bytes, state.traffic.codec_seconds
            wire_before = state.traffic.wire_seconds
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(
                model(_fault(job, rank, step, x[chosen])), y[chosen], reduction="sum")
            loss.backward()
            optimizer.step()
            total = time.perf_counter() - begin
            comm = state.seconds - hook_before
            iterations.append([total - comm, comm, state.traffic.codec_seconds - codec_before,
                               state.traffic.wire_seconds - wire_before,
                               state.traffic.sent_bytes - sent_before])
            step += 1
        if rank == 0:
            accuracies.append(accuracy(model.module, test_x, test_y))
            recent = np.array(iterations[-max(1, len(order) // job["batch"]):])
            print(f"epoch {epoch + 1}/{job['epochs']}: loss {loss.item() / job['batch']:.3f}, "
                  f"accuracy {100 * accuracies[-1]:.1f} %, iteration "
                  f"{1e3 * recent[:, :2].sum(1).mean():.1f} ms (compute "
                  f"{1e3 * recent[:, 0].mean():.1f}, communication "
                  f"{1e3 * recent[:, 1].mean():.1f}), {recent[:, 4].mean():.0f} bytes sent",
                  flush=True)
        dist.barrier()          # the others wait for the evaluation here, not in a hook
        if schedule is not None:
            schedule.step()
    weights = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
    record = {"rank": rank, "iterations": iterations, "accuracy": accuracies,
              "tx_bytes": _tx_bytes(job["interface"]) - tx_start, "raw_bytes": state.raw_bytes,
              "sent_bytes": state.sent_bytes, "nonfinite": state.nonfinite,
              "weights": hashlib.sha256(weights.tobytes()).hexdigest()}
    Path(job["out"], f"rank{rank}.json").write_text(json.dumps(record))
    del model, optimizer                   # DDP holds the process group: free it first
    dist.barrier()
    dist.destroy_process_group()


def main(argv):
    job, rank = json.loads(Path(argv[0]).read_text()), int(argv[1])
    try:
        run(job, rank)
    except Exception as error:              # the launcher reports this line, naming the rank
        print(f"rank {rank}: {type(error).__name__}: {str(error).splitlines()[0]}",
              file=sys.stderr, flush=True)
        raise SystemExit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
