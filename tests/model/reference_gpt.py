#!/usr/bin/python3
"""Independent float64 PyTorch reference for the engine's GPT and BERT losses and gradients.

The C++ model test dumps one micro-batch (config, weights, inputs, the engine's loss and every
parameter's gradient of the reported loss) into a directory; this script rebuilds the same model
from scratch in PyTorch (nothing is imported from the project), recomputes the loss and the
gradients with autograd in float64, and compares them with the engine's.

usage:
  /usr/bin/python3 tests/model/reference_gpt.py DUMP_DIR [--rtol 1e-4] [--atol 1e-6]
                                                          [--write-reference]
  /usr/bin/python3 tests/model/reference_gpt.py --self-test

A tensor passes when max|engine - ref| <= atol + rtol * max|ref| over that tensor (the loss
likewise, as a one-element tensor). Exit status: 0 all pass, 1 some mismatch, 2 bad input.
--write-reference also writes the reference loss and gradients into DUMP_DIR (reference.json
and ref_grad_<i>.f32 files, in the manifest's parameter order).
--self-test writes random dumps with numpy into a temporary directory, using this reference to
play the engine, checks that they pass and that a perturbed gradient or loss fails.

Dump layout (DUMP_DIR/manifest.json):
  {"config": {"num_layers", "hidden", "heads", "groups", "head_dim", "ffn", "vocab",
              "padded_vocab", "seq_length", "max_positions", "position": learned|rotary,
              "rotary_base", "rotary_dim", "norm": layernorm|rmsnorm, "norm_eps",
              "activation": gelu|gelu_tanh|swiglu, "tie_embeddings", "linear_bias", "qkv_bias"},
   "batch": B, "seq": T, "loss": engine's loss,
   "parameters": [{"name", "shape", "value": "file.f32", "grad": "file.f32"}, ...],
   "inputs": {"tokens": "*.i32", "labels": "*.i32", "positions": "*.i32", "loss_mask": "*.f32"}}
Binary files are raw little-endian; token rows are batch-major (row b*T + t).
Optional BERT config keys (defaults give GPT): "causal" (true), "token_types" (0),
"lm_head_transform" (false), "output_bias" (false), "binary_head" (false); with them the inputs
may hold "token_types" (*.i32, B*T), "key_lengths" (*.i32, B: keys each sequence attends to)
and "sentence_order" (*.i32, B: the binary head's targets, -1 for none).

The model (pre-norm GPT, Megatron layout):
  x = wte[tokens] (+ wpe[positions] when learned)
  per layer: qkv = Norm1(x) @ Wqkv^T (+b); per group g: heads/groups query heads, 1 key head,
  1 value head; rotary (rotate-half, t = 0..T-1) on q and k; causal softmax attention scaled by
  1/sqrt(head_dim), query head h reads group h // (heads/groups); mid = x + attn @ Wproj^T (+b);
  y = mid + act(Norm2(mid) @ Wfc1^T (+b)) @ Wfc2^T (+b), act = gelu (erf) | gelu_tanh |
  swiglu (fc1 = [gate | up], silu(gate) * up) | geglu (gelu_tanh(gate) * up)
  logits = FinalNorm(x) @ W^T over padded_vocab (W = wte when tied, else output_layer.weight)
  loss = sum(mask * CE(logits, labels)) / max(sum(mask), 1)
BERT adds: x += tokentype[types]; attention bidirectional over keys < key_lengths[b]; before the
  output layer h = LN(gelu(Wd final + bd)) (lm_head.dense, lm_head.layer_norm, eps norm_eps);
  logits += output_layer.bias; pooled = tanh(Wp final[b, 0] + bp), s = Wb pooled + bb;
  loss += mean over sequences with a target of CE(s, sentence_order)
"""
import argparse
import json
import math
import os
import sys
import tempfile

import numpy as np
import torch

CONFIG_KEYS = ("num_layers", "hidden", "heads", "groups", "head_dim", "ffn", "vocab",
               "padded_vocab", "seq_length", "max_positions", "position", "rotary_base",
               "rotary_dim", "norm", "norm_eps", "activation", "tie_embeddings", "linear_bias",
               "qkv_bias")
DTYPE = torch.float64
BERT_DEFAULTS = {"causal": True, "token_types": 0, "lm_head_transform": False,
                 "output_bias": False, "binary_head": False}


class BadInput(Exception):
    """The dump is malformed or inconsistent: exit status 2."""


# ---------------------------------------------------------------------------------------------
# The model's parameters, in the engine's order
# ---------------------------------------------------------------------------------------------

def expected_parameters(c):
    """[(name, shape)] in the engine's order for config c."""
    c = dict(BERT_DEFAULTS, **c)
    h, d = c["hidden"], c["head_dim"]
    layernorm = c["norm"] == "layernorm"
    out = [("embedding.word_embeddings.weight", [c["padded_vocab"], h])]
    if c["position"] == "learned":
        out.append(("embedding.position_embeddings.weight", [c["max_positions"], h]))
    if c["token_types"]:
        out.append(("embedding.tokentype_embeddings.weight", [c["token_types"], h]))

    def add_norm(name):
        out.append((name + ".weight", [h]))
        if layernorm:
            out.append((name + ".bias", [h]))

    def add_linear(name, inputs, outputs, bias):
        out.append((name + ".weight", [outputs, inputs]))
        if bias:
            out.append((name + ".bias", [outputs]))

    fc1_out = 2 * c["ffn"] if c["activation"] in ("swiglu", "geglu") else c["ffn"]
    for layer in range(c["num_layers"]):
        p = "decoder.layers.%d." % layer
        add_norm(p + "input_layernorm")
        add_linear(p + "self_attention.linear_qkv", h, (c["heads"] + 2 * c["groups"]) * d,
               c["qkv_bias"])
        add_linear(p + "self_attention.linear_proj", c["heads"] * d, h, c["linear_bias"])
        add_norm(p + "pre_mlp_layernorm")
        add_linear(p + "mlp.linear_fc1", h, fc1_out, c["linear_bias"])
        add_linear(p + "mlp.linear_fc2", c["ffn"], h, c["linear_bias"])
    add_norm("decoder.final_layernorm")
    if not c["tie_embeddings"]:
        out.append(("output_layer.weight", [c["padded_vocab"], h]))
    if c["lm_head_transform"]:
        add_linear("lm_head.dense", h, h, True)
        out.append(("lm_head.layer_norm.weight", [h]))
        out.append(("lm_head.layer_norm.bias", [h]))
    if c["output_bias"]:
        out.append(("output_layer.bias", [c["padded_vocab"]]))
    if c["binary_head"]:
        add_linear("pooler.dense", h, h, True)
        add_linear("binary_head", h, 2, True)
    return out


def check_config(c):
    for k, v in BERT_DEFAULTS.items():
        c.setdefault(k, v)
    missing = [k for k in CONFIG_KEYS if k not in c]
    if missing:
        raise BadInput("config lacks " + ", ".join(missing))
    for k in ("num_layers", "hidden", "heads", "groups", "head_dim", "ffn", "vocab",
              "padded_vocab", "seq_length", "max_positions"):
        if not isinstance(c[k], int) or c[k] <= 0:
            raise BadInput("config.%s must be a positive integer, not %r" % (k, c[k]))
    if c["heads"] % c["groups"]:
        raise BadInput("config.heads (%d) is not a multiple of groups (%d)"
                       % (c["heads"], c["groups"]))
    if c["padded_vocab"] < c["vocab"]:
        raise BadInput("config.padded_vocab < vocab")
    choices = {"position": ("learned", "rotary"), "norm": ("layernorm", "rmsnorm"),
               "activation": ("gelu", "gelu_tanh", "swiglu", "geglu")}
    for k, allowed in choices.items():
        if c[k] not in allowed:
            raise BadInput("config.%s is %r, expected one of %s" % (k, c[k], ", ".join(allowed)))
    if c["position"] == "rotary":
        r = c["rotary_dim"]
        if not isinstance(r, int) or r <= 0 or r % 2 or r > c["head_dim"]:
            raise BadInput("config.rotary_dim must be even and in (0, head_dim], not %r" % (r,))


# ---------------------------------------------------------------------------------------------
# The reference model (float64, plain PyTorch ops)
# ---------------------------------------------------------------------------------------------

def norm(c, x, weight, bias):
    eps = float(c["norm_eps"])
    if c["norm"] == "layernorm":
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # biased, as LayerNorm
        return (x - mean) / torch.sqrt(var + eps) * weight + bias
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight


def linear(x, weight, bias):
    y = x @ weight.t()
    return y + bias if bias is not None else y


def activation(c, x):
    kind = c["activation"]
    if kind == "gelu":
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if kind == "gelu_tanh":
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    gate, up = x[:, :c["ffn"]], x[:, c["ffn"]:]
    if kind == "geglu":  # tanh-approximated GeLU gate (T5 v1.1's gated-gelu)
        gelu = 0.5 * gate * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (gate + 0.044715 * gate ** 3)))
        return gelu * up
    return gate * torch.sigmoid(gate) * up


def rotate(c, x):
    """Rotary embedding, rotate-half convention, on [B, T, n, head_dim] (t = 0..T-1)."""
    r = c["rotary_dim"]
    half = r // 2
    T = x.shape[1]
    inv_freq = float(c["rotary_base"]) ** (-2.0 * torch.arange(half, dtype=DTYPE) / r)
    angle = torch.arange(T, dtype=DTYPE)[:, None] * inv_freq[None, :]  # [T, half]
    cos = torch.cos(angle)[None, :, None, :]
    sin = torch.sin(angle)[None, :, None, :]
    x1, x2, rest = x[..., :half], x[..., half:r], x[..., r:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def attention(c, qkv, B, T, key_lengths=None):
    """Self-attention over Megatron's fused QKV rows [B*T, (heads + 2 groups) * d]: causal, or
    bidirectional over the first key_lengths[b] keys of sequence b."""
    heads, groups, d = c["heads"], c["groups"], c["head_dim"]
    per = heads // groups
    rows = qkv.view(B, T, groups, per + 2, d)
    q = rows[:, :, :, :per, :].reshape(B, T, heads, d)  # head h = g * per + j
    k = rows[:, :, :, per, :]                           # [B, T, groups, d]
    v = rows[:, :, :, per + 1, :]
    if c["position"] == "rotary":
        q, k = rotate(c, q), rotate(c, k)
    group_of_head = torch.arange(heads) // per
    k = k[:, :, group_of_head, :]  # [B, T, heads, d]: each query head's key/value group
    v = v[:, :, group_of_head, :]
    q, k, v = (t.permute(0, 2, 1, 3) for t in (q, k, v))  # [B, heads, T, d]
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)     # [B, heads, Tq, Tk]
    if c.get("causal", True):
        future = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    if key_lengths is not None:
        padding = torch.arange(T)[None, :] >= key_lengths[:, None]  # [B, Tk]
        scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = probs @ v                                       # [B, heads, T, d]
    return out.permute(0, 2, 1, 3).reshape(B * T, heads * d)


def layer_norm(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def reference_loss(c, P, tokens, labels, positions, mask, B, T, extra=None):
    """The reported loss; P maps parameter names to float64 tensors; extra holds the BERT
    inputs (token_types, key_lengths, sentence_order) when the config uses them."""
    extra = extra or {}
    get = P.get
    x = P["embedding.word_embeddings.weight"][tokens]
    if c["position"] == "learned":
        x = x + P["embedding.position_embeddings.weight"][positions]
    if c.get("token_types"):
        x = x + P["embedding.tokentype_embeddings.weight"][extra["token_types"]]
    for layer in range(c["num_layers"]):
        p = "decoder.layers.%d." % layer
        ln1 = norm(c, x, P[p + "input_layernorm.weight"], get(p + "input_layernorm.bias"))
        qkv = linear(ln1, P[p + "self_attention.linear_qkv.weight"],
                     get(p + "self_attention.linear_qkv.bias"))
        attn = attention(c, qkv, B, T, extra.get("key_lengths"))
        mid = x + linear(attn, P[p + "self_attention.linear_proj.weight"],
                         get(p + "self_attention.linear_proj.bias"))
        ln2 = norm(c, mid, P[p + "pre_mlp_layernorm.weight"], get(p + "pre_mlp_layernorm.bias"))
        fc1 = linear(ln2, P[p + "mlp.linear_fc1.weight"], get(p + "mlp.linear_fc1.bias"))
        x = mid + linear(activation(c, fc1), P[p + "mlp.linear_fc2.weight"],
                         get(p + "mlp.linear_fc2.bias"))
    final = norm(c, x, P["decoder.final_layernorm.weight"], get("decoder.final_layernorm.bias"))
    out = P["embedding.word_embeddings.weight" if c["tie_embeddings"] else "output_layer.weight"]
    features = final
    if c.get("lm_head_transform"):
        dense = linear(final, P["lm_head.dense.weight"], P["lm_head.dense.bias"])
        gelu = 0.5 * dense * (1.0 + torch.erf(dense / math.sqrt(2.0)))
        features = layer_norm(gelu, P["lm_head.layer_norm.weight"], P["lm_head.layer_norm.bias"],
                              float(c["norm_eps"]))
    logits = features @ out.t()  # [B*T, padded_vocab]
    if c.get("output_bias"):
        logits = logits + P["output_layer.bias"]
    per_token = torch.logsumexp(logits, dim=-1) - logits.gather(1, labels[:, None])[:, 0]
    loss = (mask * per_token).sum() / torch.clamp(mask.sum(), min=1.0)
    if c.get("binary_head"):
        first = final.view(B, T, -1)[:, 0, :]
        pooled = torch.tanh(linear(first, P["pooler.dense.weight"], P["pooler.dense.bias"]))
        scores = linear(pooled, P["binary_head.weight"], P["binary_head.bias"])  # [B, 2]
        target = extra["sentence_order"]
        keep = target >= 0
        per_seq = torch.logsumexp(scores, dim=-1) - scores.gather(
            1, torch.clamp(target, min=0)[:, None])[:, 0]
        loss = loss + (per_seq * keep).sum() / max(int(keep.sum()), 1)
    return loss


def reference(c, values, tokens, labels, positions, mask, B, T, extra=None):
    """(loss, {name: grad}) in float64 from numpy inputs."""
    P = {n: torch.tensor(v, dtype=DTYPE, requires_grad=True) for n, v in values.items()}
    extra = {k: torch.from_numpy(v.astype(np.int64)) for k, v in (extra or {}).items()}
    loss = reference_loss(c, P, torch.from_numpy(tokens.astype(np.int64)),
                          torch.from_numpy(labels.astype(np.int64)),
                          torch.from_numpy(positions.astype(np.int64)),
                          torch.tensor(mask, dtype=DTYPE), B, T, extra)
    loss.backward()
    return loss.item(), {n: t.grad.numpy() for n, t in P.items()}


# ---------------------------------------------------------------------------------------------
# Reading a dump and comparing
# ---------------------------------------------------------------------------------------------

def read_raw(directory, file, dtype, count, what):
    path = os.path.join(directory, file)
    if not os.path.isfile(path):
        raise BadInput("%s: %s is missing" % (what, path))
    data = np.fromfile(path, dtype=dtype)
    if data.size != count:
        raise BadInput("%s: %s holds %d values, expected %d" % (what, file, data.size, count))
    return data


def load_dump(directory):
    path = os.path.join(directory, "manifest.json")
    try:
        with open(path) as f:
            m = json.load(f)
    except (OSError, ValueError) as e:
        raise BadInput("cannot read %s: %s" % (path, e))
    for k in ("config", "batch", "seq", "loss", "parameters", "inputs"):
        if k not in m:
            raise BadInput("manifest.json lacks %r" % k)
    c = m["config"]
    check_config(c)
    B, T = m["batch"], m["seq"]
    if not (isinstance(B, int) and isinstance(T, int) and B > 0 and T > 0):
        raise BadInput("batch and seq must be positive integers")
    if T != c["seq_length"]:
        raise BadInput("seq (%d) differs from config.seq_length (%d): the engine's attention "
                       "runs over seq_length" % (T, c["seq_length"]))
    n = B * T
    inputs = m["inputs"]
    for k in ("tokens", "labels", "positions", "loss_mask"):
        if k not in inputs:
            raise BadInput("inputs lacks %r" % k)
    tokens = read_raw(directory, inputs["tokens"], "<i4", n, "tokens")
    labels = read_raw(directory, inputs["labels"], "<i4", n, "labels")
    positions = read_raw(directory, inputs["positions"], "<i4", n, "positions")
    mask = read_raw(directory, inputs["loss_mask"], "<f4", n, "loss_mask").astype(np.float64)
    extra = {}
    for k, count, limit in (("token_types", n, max(c["token_types"], 1)), ("key_lengths", B, T + 1),
                            ("sentence_order", B, 2)):
        if k in inputs:
            extra[k] = read_raw(directory, inputs[k], "<i4", count, k)
            low = 1 if k == "key_lengths" else (-1 if k == "sentence_order" else 0)
            if extra[k].min() < low or extra[k].max() >= limit:
                raise BadInput("%s out of range [%d, %d)" % (k, low, limit))
    if c["token_types"] and "token_types" not in extra:
        raise BadInput("config.token_types needs inputs.token_types")
    if c["binary_head"] and "sentence_order" not in extra:
        raise BadInput("config.binary_head needs inputs.sentence_order")
    for what, ids, limit in (("tokens", tokens, c["padded_vocab"]),
                             ("labels", labels, c["padded_vocab"]),
                             ("positions", positions, c["max_positions"])):
        if ids.min() < 0 or ids.max() >= limit:
            raise BadInput("%s out of range [0, %d)" % (what, limit))

    expected = expected_parameters(c)
    names = [p.get("name") for p in m["parameters"]]
    if len(set(names)) != len(names):
        raise BadInput("duplicate parameter names in the manifest")
    if set(names) != {n_ for n_, _ in expected}:
        want = {n_ for n_, _ in expected}
        extra, lacking = sorted(set(names) - want), sorted(want - set(names))
        raise BadInput("parameters differ from the config's: unexpected %s; missing %s"
                       % (extra or "none", lacking or "none"))
    if names != [n_ for n_, _ in expected]:
        print("note: the manifest's parameter order differs from the engine's", file=sys.stderr)
    shapes = dict(expected)
    values, grads, order = {}, {}, []
    for p in m["parameters"]:
        name = p["name"]
        if list(p.get("shape", [])) != shapes[name]:
            raise BadInput("%s: shape %s, expected %s" % (name, p.get("shape"), shapes[name]))
        count = int(np.prod(shapes[name]))
        values[name] = read_raw(directory, p["value"], "<f4", count, name).reshape(shapes[name])
        grads[name] = read_raw(directory, p["grad"], "<f4", count, name + " grad").reshape(
            shapes[name])
        order.append(name)
    return {"config": c, "B": B, "T": T, "loss": float(m["loss"]), "values": values,
            "grads": grads, "order": order, "tokens": tokens, "labels": labels,
            "positions": positions, "mask": mask, "extra": extra}


def compare(engine, ref, rtol, atol):
    """(ok, max abs err, max|ref|) with the tolerance atol + rtol * max|ref|."""
    engine = np.asarray(engine, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if not np.all(np.isfinite(engine)):
        return False, float("nan"), float(np.max(np.abs(ref)))
    err = float(np.max(np.abs(engine - ref))) if ref.size else 0.0
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return err <= atol + rtol * scale, err, scale


def check(directory, rtol, atol, write_reference=False, out=sys.stdout):
    """Compares one dump; returns the exit status (0 pass, 1 mismatch, 2 bad input)."""
    try:
        d = load_dump(directory)
    except BadInput as e:
        print("bad input: %s" % e, file=out)
        return 2
    c = d["config"]
    ref_loss, ref_grads = reference(c, d["values"], d["tokens"], d["labels"], d["positions"],
                                    d["mask"], d["B"], d["T"], d["extra"])
    rows = []
    ok, err, scale = compare([d["loss"]], [ref_loss], rtol, atol)
    rows.append(("loss", "[]", err, scale, ok))
    for name in d["order"]:
        ok, err, scale = compare(d["grads"][name], ref_grads[name], rtol, atol)
        rows.append((name, "[" + ",".join(str(s) for s in d["grads"][name].shape) + "]",
                     err, scale, ok))
    width = max(len(r[0]) for r in rows)
    print("%-*s %-14s %12s %12s  %s" % (width, "tensor", "shape", "max abs err", "max|ref|",
                                         "ok"), file=out)
    for name, shape, err, scale, ok in rows:
        print("%-*s %-14s %12.4e %12.4e  %s" % (width, name, shape, err, scale,
                                                "ok" if ok else "FAIL"), file=out)
    failed = [r[0] for r in rows if not r[4]]
    print("engine loss %.9g, reference loss %.9g" % (d["loss"], ref_loss), file=out)
    print("%d of %d tensors pass (rtol %g, atol %g)%s"
          % (len(rows) - len(failed), len(rows), rtol, atol,
             "; failed: " + ", ".join(failed) if failed else ""), file=out)
    if write_reference:
        entries = []
        for i, name in enumerate(d["order"]):
            file = "ref_grad_%03d.f32" % i
            ref_grads[name].astype("<f4").tofile(os.path.join(directory, file))
            entries.append({"name": name, "shape": list(ref_grads[name].shape), "grad": file})
        with open(os.path.join(directory, "reference.json"), "w") as f:
            json.dump({"loss": ref_loss, "parameters": entries}, f, indent=1)
        print("wrote the reference into %s" % os.path.join(directory, "reference.json"), file=out)
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# Self-test
# ---------------------------------------------------------------------------------------------

def write_random_dump(directory, c, B, seed):
    """A random dump whose 'engine' loss and gradients come from this reference (in f32)."""
    rng = np.random.default_rng(seed)
    T = c["seq_length"]
    values = {}
    for name, shape in expected_parameters(c):
        if name.endswith("layernorm.weight"):
            v = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            v = 0.1 * rng.standard_normal(shape)
        else:
            v = 0.3 * rng.standard_normal(shape)  # large enough that every part matters
        values[name] = v.astype(np.float32)
    tokens = rng.integers(0, c["vocab"], B * T).astype(np.int32)
    labels = rng.integers(0, c["vocab"], B * T).astype(np.int32)
    positions = np.tile(np.arange(T, dtype=np.int32), B)
    mask = (rng.random(B * T) < 0.8).astype(np.float32)
    extra = {}
    if c.get("token_types"):
        extra["token_types"] = rng.integers(0, c["token_types"], B * T).astype(np.int32)
    if not c.get("causal", True):
        extra["key_lengths"] = rng.integers(1, T + 1, B).astype(np.int32)
    if c.get("binary_head"):
        extra["sentence_order"] = rng.integers(0, 2, B).astype(np.int32)
    loss, grads = reference(c, {n: v.astype(np.float64) for n, v in values.items()}, tokens,
                            labels, positions, mask.astype(np.float64), B, T, extra)
    params = []
    for i, (name, shape) in enumerate(expected_parameters(c)):
        values[name].astype("<f4").tofile(os.path.join(directory, "p%03d.f32" % i))
        grads[name].astype("<f4").tofile(os.path.join(directory, "g%03d.f32" % i))
        params.append({"name": name, "shape": shape, "value": "p%03d.f32" % i,
                       "grad": "g%03d.f32" % i})
    for file, array in (("tokens.i32", tokens), ("labels.i32", labels),
                        ("positions.i32", positions), ("loss_mask.f32", mask)):
        array.tofile(os.path.join(directory, file))
    inputs = {"tokens": "tokens.i32", "labels": "labels.i32", "positions": "positions.i32",
              "loss_mask": "loss_mask.f32"}
    for k, array in extra.items():
        array.tofile(os.path.join(directory, k + ".i32"))
        inputs[k] = k + ".i32"
    manifest = {"config": c, "batch": B, "seq": T, "loss": float(np.float32(loss)),
                "parameters": params, "inputs": inputs}
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return manifest


def sanity_checks():
    """The hand-written pieces against PyTorch's own implementations."""
    torch.manual_seed(0)
    x = torch.randn(7, 16, dtype=DTYPE)
    w, b = torch.randn(16, dtype=DTYPE), torch.randn(16, dtype=DTYPE)
    c = {"norm_eps": 1e-5, "norm": "layernorm", "ffn": 8}
    assert torch.allclose(norm(c, x, w, b), torch.nn.functional.layer_norm(x, (16,), w, b, 1e-5))
    c["activation"] = "gelu"
    assert torch.allclose(activation(c, x), torch.nn.functional.gelu(x))
    c["activation"] = "gelu_tanh"
    assert torch.allclose(activation(c, x), torch.nn.functional.gelu(x, approximate="tanh"))
    c["activation"] = "swiglu"
    assert torch.allclose(activation(c, x), torch.nn.functional.silu(x[:, :8]) * x[:, 8:])
    # Attention with one group per head against PyTorch's multi-head attention (causal).
    B, T, heads, d = 2, 5, 3, 4
    c = {"heads": heads, "groups": heads, "head_dim": d, "position": "learned"}
    qkv = torch.randn(B * T, heads * 3 * d, dtype=DTYPE)
    rows = qkv.view(B, T, heads, 3, d)
    q, k, v = (rows[:, :, :, i, :].reshape(B, T, heads * d).transpose(0, 1) for i in range(3))
    mha = torch.nn.MultiheadAttention(heads * d, heads, bias=False, dtype=DTYPE)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.eye(heads * d, dtype=DTYPE).repeat(3, 1))
        mha.out_proj.weight.copy_(torch.eye(heads * d, dtype=DTYPE))
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    expected, _ = mha(q, k, v, attn_mask=causal, need_weights=False)
    got = attention(c, qkv, B, T).view(B, T, heads * d).transpose(0, 1)
    assert torch.allclose(got, expected), "attention differs from nn.MultiheadAttention"
    # Rotary: position 0 is the identity; the rotation preserves each pair's norm.
    c = {"rotary_dim": 4, "rotary_base": 10000.0}
    y = torch.randn(1, 3, 2, 6, dtype=DTYPE)
    r = rotate(c, y)
    assert torch.allclose(r[:, 0], y[:, 0]) and torch.allclose(r[..., 4:], y[..., 4:])
    assert torch.allclose(r[..., 0] ** 2 + r[..., 2] ** 2, y[..., 0] ** 2 + y[..., 2] ** 2)


def self_test():
    sanity_checks()
    print("sanity checks of norm, activations, attention and rotary: ok")
    base = {"num_layers": 2, "hidden": 32, "heads": 4, "groups": 4, "head_dim": 8, "ffn": 64,
            "vocab": 50, "padded_vocab": 64, "seq_length": 12, "max_positions": 16,
            "position": "learned", "rotary_base": 10000.0, "rotary_dim": 8, "norm": "layernorm",
            "norm_eps": 1e-5, "activation": "gelu", "tie_embeddings": True, "linear_bias": True,
            "qkv_bias": True}
    configs = [
        ("layernorm+gelu+learned+tied", dict(base)),
        ("rmsnorm+swiglu+rotary+GQA+untied+no-bias",
         dict(base, heads=4, groups=2, ffn=48, position="rotary", norm="rmsnorm",
              norm_eps=1e-6, activation="swiglu", tie_embeddings=False, linear_bias=False,
              qkv_bias=False)),
        ("rmsnorm+gelu_tanh+partial-rotary+MQA+qkv-bias-only",
         dict(base, heads=4, groups=1, position="rotary", rotary_dim=4, rotary_base=500.0,
              norm="rmsnorm", activation="gelu_tanh", linear_bias=False, qkv_bias=True)),
        ("bert: bidirectional+padding+token-types+lm-head+binary-head",
         dict(base, causal=False, token_types=2, lm_head_transform=True, output_bias=True,
              binary_head=True)),
    ]
    failures = 0

    def expect(what, status, wanted, log):
        nonlocal failures
        good = status == wanted
        failures += not good
        print("  %-56s exit %d (expected %d) %s" % (what, status, wanted, "ok" if good else
                                                    "SELF-TEST FAILURE"))
        if not good:
            print(log.getvalue())

    import io
    for label, c in configs:
        print(label + ":")
        with tempfile.TemporaryDirectory() as directory:
            manifest = write_random_dump(directory, c, B=2, seed=len(label))
            log = io.StringIO()
            expect("unchanged dump passes", check(directory, 1e-4, 1e-6, out=log), 0, log)
            print("    " + log.getvalue().strip().splitlines()[-1])
            # Perturb one element of one gradient by 1e-3 of that tensor's largest entry.
            p = next(p for p in manifest["parameters"]
                     if p["name"].endswith("linear_qkv.weight"))
            path = os.path.join(directory, p["grad"])
            g = np.fromfile(path, dtype="<f4")
            saved = g.copy()
            g[g.size // 3] += 1e-3 * np.max(np.abs(g))
            g.tofile(path)
            log = io.StringIO()
            expect("perturbed %s fails" % p["name"].split("decoder.")[-1],
                   check(directory, 1e-4, 1e-6, out=log), 1, log)
            saved.tofile(path)
            # Perturb the loss.
            loss = manifest["loss"]
            manifest["loss"] = loss * (1 + 1e-3)
            with open(os.path.join(directory, "manifest.json"), "w") as f:
                json.dump(manifest, f)
            log = io.StringIO()
            expect("perturbed loss fails", check(directory, 1e-4, 1e-6, out=log), 1, log)
            manifest["loss"] = loss
            # A missing gradient file is bad input.
            os.remove(path)
            log = io.StringIO()
            expect("missing gradient file is bad input", check(directory, 1e-4, 1e-6, out=log),
                   2, log)
    print("self-test %s" % ("passed" if failures == 0 else "FAILED (%d)" % failures))
    return 0 if failures == 0 else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dump", nargs="?", help="directory written by the C++ model test")
    parser.add_argument("--rtol", type=float, default=1e-4)
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument("--write-reference", action="store_true",
                        help="also write reference.json and ref_grad_*.f32 into the dump")
    parser.add_argument("--self-test", action="store_true",
                        help="check this script on random dumps it writes itself")
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    if args.self_test:
        return self_test()
    if not args.dump:
        parser.print_usage(sys.stderr)
        return 2
    return check(args.dump, args.rtol, args.atol, args.write_reference)


if __name__ == "__main__":
    sys.exit(main())
