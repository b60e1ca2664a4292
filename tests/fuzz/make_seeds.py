#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/): small valid inputs of
each format, made here from the bundled corpus and recipes so their provenance is this file.
Run from the repository root; it replaces the seeds it makes and leaves others alone."""
import gzip
import json
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(CORPUS, target, name), "wb") as f:
        f.write(data)


def recipes():
    # Whole recipes as `megatron recipe show` resolves them (base: files resolve next to the
    # recipe, which the target's scratch directory lacks), plus small hand-written ones.
    import subprocess
    binary = os.path.join(ROOT, "build", os.environ.get("PRESET", "cpu"), "bin", "megatron")
    for name in ("gpt-tiny", "llama-7b", "gpt-175b"):
        shown = subprocess.run([binary, "recipe", "show", os.path.join(ROOT, "recipes", name + ".yaml")],
                               capture_output=True, text=True, check=True).stdout
        put("recipe", name + ".yaml", shown)
    put("recipe", "references.yaml",
        "model:\n  arch: gpt\n  num_layers: 2\n  hidden_size: 64\n  num_attention_heads: 4\n"
        "  vocab_size: 1000\ndata:\n  seq_length: ${model.hidden_size}\n  mock: true\n"
        "training:\n  micro_batch_size: 2\n  global_batch_size: 8\n  train_iters: 10\n  lr: 1.0e-3\n"
        "cluster:\n  hardware: cpu\n")


def overrides():
    put("overrides", "layout", "parallel.tensor=8\nparallel.pipeline=16\ncluster.nodes=128\n")
    put("overrides", "model", "model.hidden_size=4096\nmodel.num_layers=32\nmodel.ffn_hidden_size=11008\n")
    put("overrides", "batch", "training.global_batch_size=2048\ntraining.micro_batch_size=2\n")
    put("overrides", "recompute", "training.recompute=selective\nprecision.dtype=bf16\n")
    put("overrides", "data", "data.seq_length=8192\nmodel.max_position_embeddings=8192\n")


def corpus():
    lines = open(os.path.join(ROOT, "data", "corpora", "austen.jsonl"), encoding="utf-8").read().splitlines()[:3]
    short = [json.dumps({"text": json.loads(l)["text"][:300], "title": "t"}) for l in lines]
    text = ("\n".join(short) + "\n").encode()
    put("corpus", "plain.jsonl", bytes([0]) + text)
    put("corpus", "plain-split.jsonl", bytes([0 | 4 | 8]) + text)
    put("corpus", "gzip.jsonl.gz", bytes([1]) + gzip.compress(text, mtime=0))
    put("corpus", "gzip-two-members.jsonl.gz", bytes([1 | 64]) + gzip.compress(text[:100], mtime=0) +
        gzip.compress(text[100:], mtime=0))
    import subprocess
    frame = subprocess.run(["zstd", "-q", "-c"], input=text, capture_output=True, check=True).stdout
    put("corpus", "zstd.jsonl.zst", bytes([2]) + frame)
    put("corpus", "list-of-sentences.jsonl", bytes([32]) + b'{"text": ["One.", "Two two."]}\nnot json\n')


def indexed_dataset():
    # Megatron's MMIDIDX: uint16 tokens, sequences of 3, 0 and 2 tokens in 2 documents.
    lengths = [3, 0, 2]
    offsets, at = [], 0
    for n in lengths:
        offsets.append(at)
        at += 2 * n
    docs = [0, 2, 3]
    idx = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(docs))
    idx += struct.pack("<%di" % len(lengths), *lengths) + struct.pack("<%dq" % len(offsets), *offsets)
    idx += struct.pack("<%dq" % len(docs), *docs)
    put("indexed_dataset", "uint16", struct.pack("<H", at) + idx)
    idx64 = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 5, 1, 2) + struct.pack("<i", 2) + \
        struct.pack("<q", 0) + struct.pack("<2q", 0, 1)
    put("indexed_dataset", "int64", struct.pack("<H", 16) + idx64)


def safetensors():
    def file(tensors, metadata=None):
        header, data = {}, b""
        for name, (dtype, shape, raw) in tensors.items():
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        if metadata:
            header["__metadata__"] = metadata
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        return struct.pack("<Q", len(h)) + h + data
    put("safetensors", "f32", file({"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))}, {"format": "pt"}))
    put("safetensors", "mixed", file({"a": ("BF16", [3], b"\x80\x3f" * 3), "b": ("F16", [1, 1], b"\x00\x3c"),
                                      "c": ("BOOL", [2], b"\x01\x00")}))


def hf_config():
    put("hf_config", "gpt2.json", json.dumps({
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 2, "n_embd": 64,
        "n_head": 4, "n_positions": 128, "vocab_size": 1000, "n_inner": None,
        "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}))
    put("hf_config", "llama.json", json.dumps({
        "model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 2,
        "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
        "intermediate_size": 172, "max_position_embeddings": 256, "vocab_size": 1000,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False}))


if __name__ == "__main__":
    recipes()
    overrides()
    corpus()
    indexed_dataset()
    safetensors()
    hf_config()
