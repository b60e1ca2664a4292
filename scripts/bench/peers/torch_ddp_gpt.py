#!/usr/bin/python3
"""Data-parallel training throughput of the plain PyTorch GPT of torch_gpt.py under
DistributedDataParallel (gloo, CPU): the peer of `megatron run --nproc N` with data parallelism in
scripts/bench/parallel_speed.sh. Each of N processes trains batch / N samples per iteration;
DDP all-reduces the gradients in buckets during backward, as megatron does.

usage: /usr/bin/python3 scripts/bench/peers/torch_ddp_gpt.py --nproc 2 --layers 4 --hidden 256 \
           --heads 4 --seq 256 --batch 8 [--vocab 8192] [--iters 10] [--warmup 2] [--threads 1]
prints one JSON line from rank 0: {"peer": "pytorch-ddp", "torch", "nproc", "threads",
"tokens_per_s" (global), "ms_per_iter"}, timed over the iterations after warmup.
"""
import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import GPT, make_optimizer, train_step  # noqa: E402


def train(rank, args):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("gloo", rank=rank, world_size=args.nproc)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    gpt = GPT(args.layers, args.hidden, args.heads, args.seq, args.vocab)
    # The causal masks are constant bool buffers, which gloo cannot broadcast: every rank builds
    # them the same, so DDP leaves them alone (the parameters are synchronised as usual).
    DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        gpt, [name for name, b in gpt.named_buffers() if b.dtype == torch.bool])
    model = DistributedDataParallel(gpt, broadcast_buffers=False)
    optimizer = make_optimizer(model)
    data = torch.Generator().manual_seed(1234 + rank)
    local = args.batch // args.nproc
    seconds = 0.0
    for it in range(args.warmup + args.iters):
        sample = torch.randint(args.vocab, (local, args.seq + 1), generator=data)
        dist.barrier()
        elapsed, _ = train_step(model, optimizer, sample)
        if it >= args.warmup:
            seconds += elapsed
    if rank == 0:
        print(json.dumps({
            "peer": "pytorch-ddp",
            "torch": torch.__version__,
            "nproc": args.nproc,
            "threads": args.threads,
            "tokens_per_s": args.batch * args.seq * args.iters / seconds,
            "ms_per_iter": 1000.0 * seconds / args.iters,
        }), flush=True)
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description="PyTorch DDP GPT training throughput (CPU, gloo)")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True, help="global batch")
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="per process")
    args = parser.parse_args()
    mp.spawn(train, args=(args,), nprocs=args.nproc)


if __name__ == "__main__":
    main()
