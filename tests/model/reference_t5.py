#!/usr/bin/python3
"""Independent float64 PyTorch reference for the engine's T5 loss and gradients.

The C++ model test dumps one micro-batch of an encoder-decoder model (config, weights, inputs, the
engine's loss and every parameter's gradient) into a directory; this script rebuilds Megatron-
Core's T5 from scratch in PyTorch (the norm, linear, activation and rotary helpers are shared
with reference_gpt.py; nothing is imported from the project), recomputes the loss and the
gradients with autograd in float64, and compares them with the engine's.

usage: /usr/bin/python3 tests/model/reference_t5.py DUMP_DIR [--rtol 1e-4] [--atol 1e-6]

Dump layout (DUMP_DIR/manifest.json): as reference_gpt.py's, with config keys "num_layers"
(encoder), "decoder_layers", "decoder_seq_length", "output_bias" and inputs "tokens",
"positions", "key_lengths" (the encoder's: B*S, B*S, B), "decoder_tokens", "labels",
"loss_mask" (B*Sd). Exit status: 0 all pass, 1 some mismatch, 2 bad input.

The model (Megatron-Core T5Model, pre-norm):
  embed(t, pos) = wte[t] (+ wpe[pos] when learned), positions 0.. in each stack; with relative
    positions every self-attention score (i, j) of a stack adds its table's [bucket(j - i), h]
    (encoder bidirectional, decoder looking back: reference_buckets.py)
  encoder layer l ("encoder.layers.l."): x + attn(norm(x)) with bidirectional attention over the
    first key_lengths[b] keys; then + mlp(norm(.)); mem = norm(x) ("encoder.final_layernorm")
  decoder layer j ("decoder.layers.j."): y + attn(norm(y)) causal; mid2 = mid +
    proj(cross(q = linear_q(norm_x(mid)), kv = linear_kv(mem))) where kv's row holds per group
    [key | value], masked by key_lengths; then + mlp(norm(mid2))
  logits = norm(y) ("decoder.final_layernorm") @ W^T (+ output_layer.bias); loss = masked mean CE
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_buckets import bucket  # noqa: E402
from reference_gpt import DTYPE, activation, compare, linear, norm, read_raw, rotate  # noqa: E402


class BadInput(Exception):
    pass


def relative_bias(c, P, name, T, bidirectional):
    """[heads, T, T]: table[bucket(j - i), h] (Megatron-Core's RelativePositionEmbedding)."""
    rp = torch.arange(T)[None, :] - torch.arange(T)[:, None]
    ids = bucket(rp, bidirectional, c["relative_buckets"], c["relative_max_distance"])
    return P[name][ids].permute(2, 0, 1)


def self_attention(c, qkv, B, T, causal, key_lengths, bias=None):
    heads, groups, d = c["heads"], c["groups"], c["head_dim"]
    per = heads // groups
    rows = qkv.view(B, T, groups, per + 2, d)
    q = rows[:, :, :, :per, :].reshape(B, T, heads, d)
    k = rows[:, :, :, per, :]
    v = rows[:, :, :, per + 1, :]
    if c["position"] == "rotary":
        q, k = rotate(c, q), rotate(c, k)
    return core(c, q, k, v, B, T, T, causal, key_lengths, bias)


def core(c, q, k, v, B, Tq, Tk, causal, key_lengths, bias=None):
    """q [B, Tq, heads, d], k and v [B, Tk, groups, d] -> [B*Tq, heads*d]."""
    heads, groups, d = c["heads"], c["groups"], c["head_dim"]
    group_of_head = torch.arange(heads) // (heads // groups)
    k, v = k[:, :, group_of_head, :], v[:, :, group_of_head, :]
    q, k, v = (t.permute(0, 2, 1, 3) for t in (q, k, v))
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    if bias is not None:
        scores = scores + bias[None]
    if causal:
        scores = scores.masked_fill(torch.ones(Tq, Tk, dtype=torch.bool).triu(diagonal=1),
                                    float("-inf"))
    if key_lengths is not None:
        padding = torch.arange(Tk)[None, :] >= key_lengths[:, None]
        scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.permute(0, 2, 1, 3).reshape(B * Tq, heads * d)


def t5_loss(c, P, x_in, B, S, Sd):
    get = P.get

    def n(name, x):
        return norm(c, x, P[name + ".weight"], get(name + ".bias"))

    def lin(name, x):
        return linear(x, P[name + ".weight"], get(name + ".bias"))

    def embed(tokens, positions):
        x = P["embedding.word_embeddings.weight"][tokens]
        if c["position"] == "learned":
            x = x + P["embedding.position_embeddings.weight"][positions]
        return x

    def mlp(p, x):
        return lin(p + "mlp.linear_fc2", activation(c, lin(p + "mlp.linear_fc1", n(p + "pre_mlp_layernorm", x))))

    key_lengths = x_in["key_lengths"]
    relative = c["position"] == "relative"
    enc_bias = dec_bias = None
    if relative:
        enc_bias = relative_bias(c, P, "encoder_relative_pos_emb.relative_attention_bias.weight", S, True)
        dec_bias = relative_bias(c, P, "decoder_relative_pos_emb.relative_attention_bias.weight", Sd, False)
    x = embed(x_in["tokens"], x_in["positions"])
    for layer in range(c["num_layers"]):
        p = "encoder.layers.%d." % layer
        qkv = lin(p + "self_attention.linear_qkv", n(p + "input_layernorm", x))
        x = x + lin(p + "self_attention.linear_proj",
                    self_attention(c, qkv, B, S, False, key_lengths, enc_bias))
        x = x + mlp(p, x)
    mem = n("encoder.final_layernorm", x)
    y = embed(x_in["decoder_tokens"], torch.arange(Sd).repeat(B))
    heads, groups, d = c["heads"], c["groups"], c["head_dim"]
    for layer in range(c["decoder_layers"]):
        p = "decoder.layers.%d." % layer
        qkv = lin(p + "self_attention.linear_qkv", n(p + "input_layernorm", y))
        mid = y + lin(p + "self_attention.linear_proj",
                      self_attention(c, qkv, B, Sd, True, None, dec_bias))
        q = lin(p + "cross_attention.linear_q", n(p + "pre_cross_attn_layernorm", mid)).view(B, Sd, heads, d)
        kv = lin(p + "cross_attention.linear_kv", mem).view(B, S, groups, 2, d)
        cross = core(c, q, kv[:, :, :, 0, :], kv[:, :, :, 1, :], B, Sd, S, False, key_lengths)
        mid2 = mid + lin(p + "cross_attention.linear_proj", cross)
        y = mid2 + mlp(p, mid2)
    final = n("decoder.final_layernorm", y)
    out = P["embedding.word_embeddings.weight" if c["tie_embeddings"] else "output_layer.weight"]
    logits = final @ out.t()
    if c["output_bias"]:
        logits = logits + P["output_layer.bias"]
    labels, mask = x_in["labels"], x_in["loss_mask"]
    per_token = torch.logsumexp(logits, dim=-1) - logits.gather(1, labels[:, None])[:, 0]
    return (mask * per_token).sum() / torch.clamp(mask.sum(), min=1.0)


def load(directory):
    try:
        with open(os.path.join(directory, "manifest.json")) as f:
            m = json.load(f)
        c, B = m["config"], m["batch"]
        S, Sd = c["seq_length"], c["decoder_seq_length"]
        inputs = m["inputs"]
    except (OSError, ValueError, KeyError) as e:
        raise BadInput("cannot read the manifest: %s" % e)
    x_in = {}
    for k, count, dtype in (("tokens", B * S, "<i4"), ("positions", B * S, "<i4"),
                            ("key_lengths", B, "<i4"), ("decoder_tokens", B * Sd, "<i4"),
                            ("labels", B * Sd, "<i4"), ("loss_mask", B * Sd, "<f4")):
        data = read_raw(directory, inputs[k], dtype, count, k)
        x_in[k] = (torch.tensor(data.astype(np.float64), dtype=DTYPE) if dtype == "<f4"
                   else torch.from_numpy(data.astype(np.int64)))
    values, grads, order = {}, {}, []
    for p in m["parameters"]:
        count = int(np.prod(p["shape"]))
        values[p["name"]] = read_raw(directory, p["value"], "<f4", count, p["name"]).reshape(p["shape"])
        grads[p["name"]] = read_raw(directory, p["grad"], "<f4", count, p["name"]).reshape(p["shape"])
        order.append(p["name"])
    return c, B, S, Sd, x_in, values, grads, order, float(m["loss"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args()
    try:
        c, B, S, Sd, x_in, values, grads, order, engine_loss = load(args.directory)
    except BadInput as e:
        print("bad input: %s" % e)
        return 2
    P = {n: torch.tensor(v, dtype=DTYPE, requires_grad=True) for n, v in values.items()}
    loss = t5_loss(c, P, x_in, B, S, Sd)
    loss.backward()
    unused = [n for n in order if P[n].grad is None]
    if unused:
        print("bad input: the reference does not use %s" % ", ".join(unused))
        return 2
    rows = [("loss",) + compare([engine_loss], [loss.item()], args.rtol, args.atol)]
    for name in order:
        rows.append((name,) + compare(grads[name], P[name].grad.numpy(), args.rtol, args.atol))
    width = max(len(r[0]) for r in rows)
    for name, ok, err, scale in rows:
        print("%-*s %12.4e %12.4e  %s" % (width, name, err, scale, "ok" if ok else "FAIL"))
    failed = [r[0] for r in rows if not r[1]]
    print("engine loss %.9g, reference loss %.9g; %d of %d tensors pass (rtol %g, atol %g)"
          % (engine_loss, loss.item(), len(rows) - len(failed), len(rows), args.rtol, args.atol))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
