#!/usr/bin/python3
"""Training throughput of a plain PyTorch GPT: the peer of `megatron run` in
scripts/bench/train.sh (CPU, f32) and scripts/gpu-check.sh (CUDA, bf16). Written as a user would: nn.Embedding, nn.LayerNorm, nn.Linear, GPT-2
shape (learned positions, pre-LayerNorm, exact-GeLU MLP of width 4h, biases, tied LM head),
causal attention through F.scaled_dot_product_attention where PyTorch has it (>= 2.0), else
matmul-softmax-matmul with a causal mask; AdamW (lr 3e-4, weight decay 0.01 on the matrices),
gradient clipping at 1.0, random tokens from a fixed seed. f32, or with --dtype bf16 the
weights, gradients and optimizer in f32 and the forward and backward under torch.autocast(bf16),
which is what Megatron's bf16 keeps and computes (f32 main weights, bf16 matrix products).

usage: /usr/bin/python3 scripts/bench/peers/torch_gpt.py --layers 12 --hidden 768 --heads 12 \
           --seq 256 --batch 4 [--vocab 50304] [--iters 10] [--warmup 2] [--threads N]
           [--device cpu|cuda] [--dtype f32|bf16] [--microbatches K]
prints one JSON line: {"peer": "pytorch", "torch", "device", "dtype", "threads", "tokens_per_s",
"ms_per_iter", "params", "loss_first", "loss_last", "rss_peak_bytes", "gpu_peak_bytes"}, timed
over the iterations after warmup. An iteration is K micro-batches of --batch sequences whose
gradients accumulate, then one optimizer step (megatron's global batch = K x micro batch).
Needs torch (Debian's python3-torch on the CPU: run it with /usr/bin/python3).
"""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden, heads, seq):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.sdpa = hasattr(F, "scaled_dot_product_attention")
        if not self.sdpa:
            self.register_buffer("future", torch.ones(seq, seq, dtype=torch.bool).triu(1),
                                 persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
            scores = scores.masked_fill(self.future[:T, :T], float("-inf"))
            y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, hidden, heads, seq):
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = CausalSelfAttention(hidden, heads, seq)
        self.ln2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(),
                                 nn.Linear(4 * hidden, hidden))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.wte.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "2.weight")) \
                    else 0.02
                nn.init.normal_(p, std=std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens, labels):
        T = tokens.size(1)
        x = self.wte(tokens) + self.wpe(torch.arange(T, device=tokens.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.reshape(-1))


def make_optimizer(model):
    """AdamW as megatron's recipes use it: weight decay 0.01 on the matrices only."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                              {"params": no_decay, "weight_decay": 0.0}], lr=3e-4)


def train_step(model, optimizer, samples, autocast):
    """One iteration over `samples` (micro-batches [batch, seq + 1]): seconds and mean loss."""
    cuda = samples[0].is_cuda
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for sample in samples:
        with autocast():
            loss = model(sample[:, :-1], sample[:, 1:]) / len(samples)
        loss.backward()
        total += loss.detach()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    total = float(total)  # waits for the device
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start, total


def main():
    parser = argparse.ArgumentParser(description="PyTorch GPT training throughput")
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--iters", type=int, default=10, help="timed iterations")
    parser.add_argument("--warmup", type=int, default=2, help="untimed iterations first")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--microbatches", type=int, default=1,
                        help="micro-batches per iteration (gradient accumulation)")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(1234)
    device = torch.device(args.device)
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True  # megatron's f32 GEMMs use TF32 on GPUs
    model = GPT(args.layers, args.hidden, args.heads, args.seq, args.vocab).to(device)
    optimizer = make_optimizer(model)
    data = torch.Generator().manual_seed(1234)

    def autocast():
        return torch.autocast(device_type=args.device, dtype=torch.bfloat16,
                              enabled=args.dtype == "bf16")

    losses, seconds = [], 0.0
    for it in range(args.warmup + args.iters):
        samples = [torch.randint(args.vocab, (args.batch, args.seq + 1), generator=data).to(device)
                   for _ in range(args.microbatches)]
        elapsed, loss = train_step(model, optimizer, samples, autocast)
        losses.append(loss)
        if it >= args.warmup:
            seconds += elapsed

    print(json.dumps({
        "peer": "pytorch",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "tokens_per_s": args.microbatches * args.batch * args.seq * args.iters / seconds
        if seconds else None,
        "ms_per_iter": 1000.0 * seconds / args.iters if args.iters else None,
        "params": sum(p.numel() for p in model.parameters()),
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "gpu_peak_bytes": torch.cuda.max_memory_allocated() if args.device == "cuda" else None,
    }))


if __name__ == "__main__":
    main()
