#!/usr/bin/python3
"""T5's relative position buckets as Hugging Face's T5Attention._relative_position_bucket (and
Megatron-Core's RelativePositionEmbedding) compute them, in PyTorch, written again here.

usage: /usr/bin/python3 tests/model/reference_buckets.py OUT.txt
Writes one line per (bidirectional, buckets, max_distance) case in the order of CASES: the
buckets of relative positions -1100..1099, space-separated.
"""
import math
import sys

import torch

CASES = [(b, nb, md) for b in (True, False) for nb, md in ((32, 128), (16, 64), (8, 20), (64, 1000))]


def bucket(rp, bidirectional, num_buckets, max_distance):
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (rp > 0).to(torch.long) * num_buckets
        rp = torch.abs(rp)
    else:
        rp = -torch.min(rp, torch.zeros_like(rp))
    max_exact = num_buckets // 2
    is_small = rp < max_exact
    large = max_exact + (torch.log(rp.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return relative_buckets + torch.where(is_small, rp, large)


def main():
    rp = torch.arange(-1100, 1100)
    with open(sys.argv[1], "w") as f:
        for b, nb, md in CASES:
            f.write(" ".join(str(int(x)) for x in bucket(rp, b, nb, md)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
