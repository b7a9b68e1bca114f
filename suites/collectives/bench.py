"""A collective benchmark for zlops campaigns: one case on P devices, the seed's ``results.json``.

One process per rank (forked from this one before any device is touched), torch.distributed over
NCCL on GPUs or gloo on CPUs. Cases:

- ``allreduce``: every rank holds ``size`` bytes of float32; an out-of-place all-reduce (copy the
  input, then reduce in place) to every rank.

Stacks (implementations of the same collective):

- ``nccl``: the library collective, ``torch.distributed.all_reduce`` (NCCL on GPUs, gloo on CPUs).
- ``ring``: a hand-written ring all-reduce over point-to-point send/recv: P-1 reduce-scatter steps,
  then P-1 all-gather steps, on P chunks of the buffer.

Variants set the library's algorithm: ``ring`` -> ``NCCL_ALGO=Ring``, ``tree`` -> ``NCCL_ALGO=Tree``,
``default`` leaves it to NCCL (gloo ignores it).

Timing: ``--warmup`` untimed rounds, then ``--timed`` rounds of ``--iters`` back-to-back operations
each, timed with CUDA events on GPUs (``perf_counter`` on CPUs); a round's ``execute_s`` is the
slowest rank's seconds per operation (a collective completes when its last rank does).
``setup_s`` is the process-group set-up plus the first (communicator-creating) operation.
Correctness: the result must equal the sum over ranks of their inputs (the golden).

Writes ``--out`` in the pypto-tooling collectives ``results.json`` schema (zlops format
``collectives``) and the per-round list to ``--rounds-out`` when given.

    python bench.py --case allreduce --size 67108864 --p 2 --devices 0,1 --variant ring --stack nccl \\
        --out results.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import statistics
import sys
import time
from datetime import datetime, timezone

#: keep NVLink multicast (NVLS) off: the lent machines do not support it (see docs/campaigns.md)
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
ALGO = {"ring": "Ring", "tree": "Tree"}
CASES = ("allreduce",)
STACKS = ("nccl", "ring")


def _args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="allreduce", choices=CASES)
    ap.add_argument("--size", type=int, required=True, help="bytes per rank (float32 elements x 4)")
    ap.add_argument("--p", type=int, required=True, help="ranks, one per device")
    ap.add_argument("--devices", default="", help="the devices zlops leased (comma list); informational: "
                    "the visibility variable already pins them")
    ap.add_argument("--variant", default="default", choices=("default", *ALGO))
    ap.add_argument("--stack", default="nccl", choices=STACKS)
    ap.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timed", type=int, default=10)
    ap.add_argument("--iters", type=int, default=10, help="operations per timed round")
    ap.add_argument("--campaign", default="zlops")
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds-out", default=None)
    a = ap.parse_args(argv)
    if a.size < 4 or a.size % 4:
        ap.error("--size must be a positive multiple of 4 (float32)")
    if a.p < 1:
        ap.error("--p must be >= 1")
    if a.devices and len(a.devices.split(",")) != a.p:
        ap.error(f"--devices {a.devices!r} names {len(a.devices.split(','))} devices, --p is {a.p}")
    return a


def _has_cuda_devices() -> bool:
    """Whether CUDA devices are visible, without creating a CUDA context in this process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return any(os.path.exists(f"/dev/nvidia{i}") for i in range(64))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ring_allreduce(dist, buf, rank: int, world: int) -> None:  # noqa: ANN001
    """Reduce-scatter then all-gather around the ring, P-1 steps each, on P chunks."""
    if world == 1:
        return
    chunks = list(buf.chunk(world))
    recv = [c.clone() for c in chunks]
    right, left = (rank + 1) % world, (rank - 1) % world
    for step in range(world - 1):  # reduce-scatter: after it, rank r owns the sum of chunk (r+1) % P
        send_i, recv_i = (rank - step) % world, (rank - step - 1) % world
        ops = [dist.P2POp(dist.isend, chunks[send_i], right), dist.P2POp(dist.irecv, recv[recv_i], left)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        chunks[recv_i].add_(recv[recv_i])
    for step in range(world - 1):  # all-gather the reduced chunks
        send_i, recv_i = (rank + 1 - step) % world, (rank - step) % world
        ops = [dist.P2POp(dist.isend, chunks[send_i], right), dist.P2POp(dist.irecv, chunks[recv_i], left)]
        for req in dist.batch_isend_irecv(ops):
            req.wait()


def _worker(rank: int, a: argparse.Namespace, port: int, backend: str, queue) -> None:  # noqa: ANN001
    import torch
    import torch.distributed as dist

    t0 = time.perf_counter()
    on_gpu = backend == "nccl"
    device = torch.device("cuda", rank) if on_gpu else torch.device("cpu")
    if on_gpu:
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.p,
                            **({"device_id": device} if on_gpu else {}))
    n = a.size // 4
    src = torch.full((n,), float(rank + 1), dtype=torch.float32, device=device)
    out = torch.empty_like(src)
    golden = float(a.p * (a.p + 1) // 2)

    def op() -> None:
        out.copy_(src)
        if a.stack == "nccl":
            dist.all_reduce(out)
        else:
            _ring_allreduce(dist, out, rank, a.p)

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    op()
    sync()
    dist.barrier()
    setup_s = time.perf_counter() - t0
    ok = bool(torch.all(out == golden).item())
    rounds = []
    for r in range(a.warmup + a.timed):
        timed = r >= a.warmup
        iters = a.iters if timed else 1
        dist.barrier()
        w0 = time.perf_counter()
        if on_gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                op()
            end.record()
            end.synchronize()
            mine = start.elapsed_time(end) / 1e3 / iters
        else:
            for _ in range(iters):
                op()
            mine = (time.perf_counter() - w0) / iters
        wall = (time.perf_counter() - w0) / iters
        good = bool(torch.all(out == golden).item())
        stat = torch.tensor([mine, wall, 0.0 if good else 1.0], dtype=torch.float64, device=device)
        dist.all_reduce(stat, op=dist.ReduceOp.MAX)
        per_rank = [torch.zeros(1, dtype=torch.float64, device=device) for _ in range(a.p)]
        dist.all_gather(per_rank, torch.tensor([mine], dtype=torch.float64, device=device))
        rounds.append({"round": r, "phase": f"timed-{r - a.warmup}" if timed else f"warmup-{r}",
                       "execute_s": round(float(stat[0]), 9), "wall_s": round(float(stat[1]), 9),
                       "ok": stat[2].item() == 0.0, "per_rank_execute_s": [round(float(t), 9) for t in per_rank]})
        ok = ok and good
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        queue.put({"setup_s": setup_s, "ok": ok, "rounds": rounds,
                   "platform": torch.cuda.get_device_name(0) if on_gpu else "cpu", "torch": torch.__version__})


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    for k, v in SAFE_ENV.items():
        os.environ.setdefault(k, v)
    if a.variant in ALGO:
        os.environ["NCCL_ALGO"] = ALGO[a.variant]
    import multiprocessing as mp
    import queue as queue_mod

    # this process never touches CUDA: "auto" is decided by NVML-free means (a CUDA context made here
    # would be unusable in forked ranks, which then die while rank 0's report never comes); the ranks
    # are spawned (fresh interpreters), not forked
    backend = a.backend if a.backend != "auto" else ("nccl" if _has_cuda_devices() else "gloo")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, a, port, backend, queue)) for r in range(a.p)]
    for p in procs:
        p.start()
    report = None
    deadline = time.monotonic() + 600
    while report is None and time.monotonic() < deadline:
        try:
            report = queue.get(timeout=1.0)
        except queue_mod.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):  # a rank died: fail now, not in 600 s
                break
    for p in procs:
        p.join(timeout=60 if report is not None else 5)
        if p.exitcode is None:
            p.kill()
            p.join(timeout=5)
    codes = [p.exitcode for p in procs]
    if report is None or any(c != 0 for c in codes):
        print(f"collective benchmark failed: rank exit codes {codes}", file=sys.stderr)
        return 1
    timed = [r for r in report["rounds"] if r["phase"].startswith("timed")]
    for r in report["rounds"]:
        r["bw_execute_mb_s"] = round(a.size / r["execute_s"] / 1e6, 3) if r["execute_s"] > 0 else 0.0
    execs = [r["execute_s"] for r in timed]
    walls = [r["wall_s"] for r in timed]
    case = {"variant": a.variant, "p": a.p, "count": a.size // 4, "dtype": "fp32",
            "device_ids": [int(d) for d in a.devices.split(",")] if a.devices else list(range(a.p)),
            "platform": report["platform"], "runtime": f"torch {report['torch']} {backend}", "n_bytes": a.size,
            "measure": "execute", "warmup_rounds": a.warmup, "timed_rounds": a.timed, "iters_per_round": a.iters}
    case_id = f"{a.case}_{a.variant}_p{a.p}_n{a.size // 4}_fp32"
    run = {"case_id": case_id, "stack": a.stack,
           "equivalence_hash": hashlib.sha1(json.dumps(case, sort_keys=True).encode()).hexdigest()[:16],
           "variant": a.variant, "p": a.p, "count": a.size // 4, "dtype": "fp32", "platform": report["platform"],
           "correctness": "pass" if report["ok"] else "fail",
           "execute_s_mean": round(statistics.fmean(execs), 9),
           "execute_s_stdev": round(statistics.stdev(execs), 9) if len(execs) > 1 else 0.0,
           "execute_s_median": round(statistics.median(execs), 9), "device_wall_s_mean": None,
           "device_wall_s_median": None, "setup_s": round(report["setup_s"], 6),
           "bw_execute_mb_s": round(statistics.fmean(r["bw_execute_mb_s"] for r in timed), 3),
           "wall_s_mean": round(statistics.fmean(walls), 9),
           "wall_s_stdev": round(statistics.stdev(walls), 9) if len(walls) > 1 else 0.0,
           "phase_means": {"setup": round(report["setup_s"], 6), "execute": round(statistics.fmean(execs), 9)},
           "compile_profile_means": {}, "n_warmup": a.warmup, "n_timed": a.timed,
           "artifact_bundle": os.path.dirname(os.path.abspath(a.out))}
    doc = {"campaign": a.campaign, "timestamp": datetime.now(timezone.utc).isoformat(), "case": case, "runs": [run]}
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
    if a.rounds_out:
        with open(a.rounds_out, "w", encoding="utf-8") as fh:
            json.dump(report["rounds"], fh, indent=2)
    print(f"{case_id} {a.stack}: execute_s median {run['execute_s_median']:.6g} s, "
          f"bw {run['bw_execute_mb_s']:.1f} MB/s, setup {run['setup_s']:.3f} s, correctness {run['correctness']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
