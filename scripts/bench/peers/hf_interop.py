#!/usr/bin/python3
"""The transformers side of scripts/bench/hf_interop.sh: makes small random Hugging Face models
and checks what came back from megatron against them.

  hf_interop.py make --arch gpt2|llama --out DIR [--seed N]
      a small random GPT2LMHeadModel / LlamaForCausalLM (GQA) saved with save_pretrained
      (safetensors); every weight, norms included, drawn at random so no mapping hides
      behind ones or zeros.
  hf_interop.py compare ORIGINAL RETURNED
      (a) every tensor of ORIGINAL's safetensors equals RETURNED's bitwise (same names, shapes,
      dtypes); (b) transformers loads both and their logits on random tokens are identical.
prints one JSON line per command; exits 1 when a check fails.
Needs torch, transformers and safetensors (the venv hf_interop.sh makes).
"""
import argparse
import glob
import json
import os
import sys

import torch
from safetensors import safe_open


def make(args):
    import transformers
    torch.manual_seed(args.seed)
    if args.arch == "gpt2":
        config = transformers.GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2,
                                         n_head=4, activation_function="gelu_new",
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(config)
    else:
        config = transformers.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=172,
                                          num_hidden_layers=2, num_attention_heads=8,
                                          num_key_value_heads=2, max_position_embeddings=128,
                                          rms_norm_eps=1e-6, rope_theta=10000.0,
                                          tie_word_embeddings=False)
        model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            # Norm scales near 1, everything else small: random, yet a sane network.
            scale = 1.0 if p.dim() == 1 and ("ln" in name or "norm" in name) and name.endswith("weight") else 0.0
            p.copy_(torch.randn_like(p) * 0.1 + scale)
    model.save_pretrained(args.out, safe_serialization=True)
    print(json.dumps({"made": args.arch, "dir": args.out, "transformers": transformers.__version__,
                      "params": sum(p.numel() for p in model.parameters())}))
    return 0


def tensors(directory):
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.safetensors"))):
        with safe_open(path, framework="pt") as f:
            for name in f.keys():
                out[name] = f.get_tensor(name)
    return out


def compare(args):
    import transformers
    a, b = tensors(args.original), tensors(args.returned)
    problems, tensor_problems = [], []
    if set(a) != set(b):
        tensor_problems.append(f"names differ: only original {sorted(set(a) - set(b))}, "
                        f"only returned {sorted(set(b) - set(a))}")
    for name in sorted(set(a) & set(b)):
        x, y = a[name], b[name]
        if x.dtype != y.dtype or x.shape != y.shape:
            tensor_problems.append(f"{name}: {x.dtype} {tuple(x.shape)} vs {y.dtype} {tuple(y.shape)}")
        elif not torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)):
            tensor_problems.append(f"{name}: values differ (max |diff| "
                            f"{(x.float() - y.float()).abs().max().item():g})")
    torch.manual_seed(1)
    m1 = transformers.AutoModelForCausalLM.from_pretrained(args.original).eval()
    m2 = transformers.AutoModelForCausalLM.from_pretrained(args.returned).eval()
    tokens = torch.randint(0, m1.config.vocab_size, (2, 24))
    with torch.no_grad():
        l1, l2 = m1(tokens).logits, m2(tokens).logits
    logits_equal = torch.equal(l1, l2)
    problems += tensor_problems
    if not logits_equal:
        problems.append(f"logits differ: max |diff| {(l1 - l2).abs().max().item():g}")
    print(json.dumps({"original": args.original, "returned": args.returned, "tensors": len(a),
                      "bitwise_equal_tensors": not tensor_problems,
                      "logits_identical": logits_equal, "architecture": type(m2).__name__,
                      "problems": problems}))
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("make")
    p.add_argument("--arch", choices=["gpt2", "llama"], required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("compare")
    p.add_argument("original")
    p.add_argument("returned")
    args = parser.parse_args()
    return make(args) if args.command == "make" else compare(args)


if __name__ == "__main__":
    sys.exit(main())
