"""The DDP communication hooks (codnn.distributed.hooks) in real processes over gloo: every
rank ends with the same weights, bit for bit; each step's averaged gradient is golden's:
for ``allgather`` the mean, in rank order, of what the golden codec decodes from each
rank's golden message, for ``ring`` and ``aggregator`` what ``codnn.golden.exchange`` gives for
the ranks' gradients; the bytes sent are the golden messages' bytes; NaN gradients cross
the INCEPTIONN-style codec raw and are counted; bad settings are refused."""

import gc
import os
import socket
from datetime import timedelta

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from codnn.distributed.hooks import _hook, comm_hook, inceptionn_hook, terngrad_hook
from codnn.golden import exchange as golden_exchange
from codnn.golden import inceptionn, terngrad

STEPS, SEED = 3, 20261125


def _worker(rank, port, codec, how, world, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    torch.manual_seed(SEED)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(20, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)))
    if codec == "terngrad":
        state, hook = terngrad_hook(SEED, "clip", exchange=how)
    elif codec == "rice":
        state, hook = comm_hook("rice", exchange=how, bound_bits=7)
    else:
        state, hook = inceptionn_hook(7, exchange=how,
                                      error_feedback=codec == "inceptionn+feedback")
    seen = {"local": [], "averaged": [], "index": []}

    def recording(state, bucket):
        seen["local"].append(bucket.buffer().detach().clone().numpy())
        seen["index"].append([bucket.index(), [g.numel() for g in bucket.gradients()]])
        future = hook(state, bucket)
        seen["averaged"].append(future.value().numpy().copy())
        return future
    model.register_comm_hook(state, recording)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(SEED + rank)
    for step in range(STEPS):
        x, y = torch.randn(32, 20, generator=generator), torch.randint(0, 4, (32,),
                                                                        generator=generator)
        if codec == "inceptionn" and rank == 0 and step == STEPS - 1:
            x[0, 0] = float("nan")                 # its gradients turn NaN: sent raw
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    np.savez(os.path.join(out, f"rank{rank}.npz"),
             weights=np.concatenate([p.detach().numpy().ravel() for p in model.parameters()]),
             local=np.stack(seen["local"]), averaged=np.stack(seen["averaged"]),
             buckets=np.array([index for index, _ in seen["index"]]),
             sizes=np.array([sizes for _, sizes in seen["index"]]), sent=state.sent_bytes,
             nonfinite=state.nonfinite)
    # DDP's reducer holds the process group: free it first, and let no rank leave (taking
    # the store down) before all are done; otherwise C++ teardown at exit can abort a rank.
    del model, optimizer
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _golden_messages(codec, local, rank, step, bucket, sizes):
    """The messages the hook's docstring says a rank sends: one per parameter for
    TernGrad, seeded ``seed + 1_000_003 t + 7919 r + 101 b + k``."""
    if codec.startswith("inceptionn"):
        return [inceptionn.compress(local, 7)]
    starts = np.cumsum([0, *sizes])
    return [terngrad.compress(
        local[starts[k]:starts[k + 1]],
        (SEED + 1_000_003 * step + 7919 * rank + 101 * bucket + k) % (1 << 32),
        clip=terngrad.CLIP_SIGMAS) for k in range(len(sizes))]


def _golden_decode(codec, messages):
    if codec.startswith("inceptionn"):
        return inceptionn.decompress(messages[0], 7)
    return np.concatenate([terngrad.decompress(m) for m in messages]).astype(np.float32)


def _spawn(tmp_path, codec, how, world):
    mp.spawn(_worker, args=(_free_port(), codec, how, world, str(tmp_path)), nprocs=world,
             join=True)
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in range(world)]
    for saved in ranks[1:]:
        assert np.array_equal(ranks[0]["weights"], saved["weights"], equal_nan=True)
    return ranks


@pytest.mark.long
@pytest.mark.parametrize("codec", ["terngrad", "inceptionn+feedback"])
def test_all_gather_sends_golden_messages(tmp_path, codec):
    """TernGrad's per-parameter messages, and the INCEPTIONN-style codec with error
    feedback (its NaN crossing is the ring test's)."""
    world = 2
    ranks = _spawn(tmp_path, codec, "allgather", world)
    sent, residual = [0] * world, [0] * world
    for step in range(STEPS):
        total = np.zeros_like(ranks[0]["local"][step])
        for rank, saved in enumerate(ranks):
            local = saved["local"][step] + residual[rank]    # error feedback: what was lost
            messages = _golden_messages(codec, local, rank, step,
                                        int(saved["buckets"][step]), saved["sizes"][step])
            sent[rank] += sum(len(m) for m in messages)
            decoded = _golden_decode(codec, messages)
            if codec == "inceptionn+feedback":
                residual[rank] = local - decoded
            total += decoded
        expected = total / np.float32(world)
        for saved in ranks:
            assert np.array_equal(saved["averaged"][step], expected, equal_nan=True), step
    assert [int(saved["sent"]) for saved in ranks] == sent


@pytest.mark.parametrize("codec,how", [
    pytest.param("inceptionn", "ring", marks=pytest.mark.long), ("terngrad", "aggregator"),
    pytest.param("rice", "ring", marks=pytest.mark.long)])
def test_ring_and_aggregator_equal_golden(tmp_path, codec, how):
    """Three ranks: every step's averaged gradient and every rank's bytes are golden's."""
    ranks = _spawn(tmp_path, codec, how, 3)
    golden = golden_exchange.Codec(codec, 7, terngrad.CLIP_SIGMAS)
    reduce = {"ring": golden_exchange.ring_allreduce,
              "aggregator": golden_exchange.aggregator_allreduce}[how]
    sent = [0] * 3
    for step in range(STEPS):
        results, hop_bytes = reduce([saved["local"][step] for saved in ranks], golden,
                                    seed=SEED if codec == "terngrad" else 0, step=step,
                                    bucket=int(ranks[0]["buckets"][step]))
        sent = [a + b for a, b in zip(sent, hop_bytes)]
        for saved, result in zip(ranks, results):
            assert np.array_equal(saved["averaged"][step], result, equal_nan=True), step
    assert [int(saved["sent"]) for saved in ranks] == sent
    if codec == "inceptionn":                      # rank 0's NaN gradients crossed raw
        assert np.isnan(ranks[2]["averaged"][-1]).any() and int(ranks[0]["nonfinite"]) > 0
        assert int(ranks[1]["nonfinite"]) == int(ranks[2]["nonfinite"]) == 0


def test_bad_settings():
    with pytest.raises(ValueError, match="7..15"):
        inceptionn_hook(3)
    with pytest.raises(ValueError, match="scaler must be one of max, clip"):
        terngrad_hook(0, "mean")
    with pytest.raises(ValueError, match="Seed"):
        terngrad_hook(-1)
    with pytest.raises(ValueError, match="Unknown exchange 'tree'"):
        comm_hook("none", exchange="tree")
    with pytest.raises(ValueError, match="Unknown codec 'gzip'"):
        comm_hook("gzip")
    with pytest.raises(ValueError, match="allgather"):
        inceptionn_hook(10, error_feedback=True)
    assert _hook is inceptionn_hook()[1]
