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


def checkpoint():
    # Edit sequences for checkpoint_fuzz.cpp, whose header describes the encoding; each seed
    # names the check it should reach. The empty input is the untouched checkpoint.
    objects = ["/", "/model", "/model/w", "/model/b", "/optimizer", "/optimizer/exp_avg",
               "/optimizer/exp_avg/w", "/model/x", "/optimizer/master/w", "/optimizer/momentum/w"]
    attributes = ["format", "format_version", "iteration", "consumed_samples", "skipped_iterations",
                  "optimizer_steps", "loss_scale", "loss_scale_growth_tracker",
                  "loss_scale_hysteresis_tracker", "world_size", "tensor_parallel",
                  "pipeline_parallel", "data_parallel", "virtual_pipeline", "sequence_parallel",
                  "distributed_optimizer", "dtype", "optimizer", "seed", "model_keys",
                  "model_values", "recipe", "recipe_original", "overrides", "created",
                  "megatron_version", "global_shape", "split", "parts", "tp_rank", "tp_size",
                  "shard_offset", "crc32", "rank"]
    tensors = ["/model/w", "/model/b", "/optimizer/exp_avg/w"]
    index, rank0, rank1 = 0, 1, 2

    def integer(v):
        return bytes([v + 16]) if -16 <= v < 0xE0 - 16 else b"\xf0" + struct.pack("<q", v)

    def text(s):
        s = s.encode() if isinstance(s, str) else s
        return bytes([len(s)]) + s

    def where(file, obj, attr):
        return bytes([file, objects.index(obj), attributes.index(attr)])

    def set_int(file, obj, attr, v):
        return bytes([0]) + where(file, obj, attr) + integer(v)

    def set_text(file, obj, attr, s):
        return bytes([1]) + where(file, obj, attr) + text(s)

    def set_ints(file, obj, attr, values):
        return bytes([2]) + where(file, obj, attr) + bytes([len(values)]) + b"".join(map(integer, values))

    def set_double(file, obj, attr, v, how=0):  # how: 0 the value, 1 NaN, 2 infinity
        return bytes([3]) + where(file, obj, attr) + integer(v) + bytes([how])

    def set_odd(file, obj, attr, kind, v=0):  # kind: 0 variable-length string, 1 uint64, ...
        return bytes([4]) + where(file, obj, attr) + bytes([kind]) + integer(v)

    def delete_object(file, obj):
        return bytes([6, file, objects.index(obj)])

    def rewrite_piece(file, tensor, numel, dtype, flags):
        # dtype: 0 f32, 1 bf16, 2 f16, 3 f32 BE; flags: 1 fix the CRC, << 1: 1-D, 2-D, scalar,
        # << 3: contiguous, chunked, compact, external
        return bytes([7, file, tensors.index(tensor)]) + integer(numel) + bytes([dtype, flags])

    def edit_mapping(tensor, which, field, value=b""):
        return bytes([8, index, tensors.index(tensor), which, field]) + value

    def reshape(file, tensor, dims, dtype=0, flags=0):  # flags: 1 keep type, 2 keep shape, 4 plain
        return bytes([9, file, tensors.index(tensor), dtype, len(dims), flags]) + b"".join(map(integer, dims))

    def add_link(file, path, target, kind, other=0):  # kind: 0 soft, 1 external, 2 hard, 3 copy
        return bytes([10, file, objects.index(path), objects.index(target), kind, other])

    def file_op(file, kind, arg=0):  # kind: 0 remove, 1 copy from, 2 truncate to arg/256, 3 a directory
        return bytes([12, file, kind, arg])

    seeds = {
        "untouched": b"",
        "largest-counts": set_int(index, "/", "iteration", 10**12) +
            set_int(index, "/", "consumed_samples", 10**15) +
            set_text(index, "/", "created", "\x1b[31m\n") + set_text(index, "/", "recipe", ""),
        "piece-rewritten-alike": rewrite_piece(rank1, "/model/b", 5, 1, 1),
        "iteration-negative": set_int(index, "/", "iteration", -1),
        "consumed-samples-huge": set_int(index, "/", "consumed_samples", 1 << 62),
        "iteration-array": set_ints(index, "/", "iteration", [1, 2, 3]),
        "iteration-string": set_odd(index, "/", "iteration", 0),
        "iteration-uint64": set_odd(index, "/", "iteration", 1, -1),
        "loss-scale-nan": set_double(index, "/", "loss_scale", 0, 1),
        "dtype-unknown": set_text(index, "/", "dtype", b"f64\x01"),
        "dtype-other": set_text(index, "/", "dtype", "f16"),
        "layout-not-dividing": set_int(index, "/", "tensor_parallel", 3),
        "world-without-rank-file": set_int(index, "/", "world_size", 4) + set_int(index, "/", "data_parallel", 2),
        "split-unknown": set_text(index, "/model/w", "split", "diagonal"),
        "parts-not-dividing": set_int(index, "/model/w", "parts", 3),
        "piece-short-crc-fixed": rewrite_piece(rank1, "/model/w", 3, 1, 1),
        "piece-other-dtype": rewrite_piece(rank0, "/model/w", 6, 0, 1),
        "piece-chunked": rewrite_piece(rank1, "/model/b", 5, 1, 1 | 1 << 3),
        "piece-2d": rewrite_piece(rank1, "/model/b", 5, 1, 1 | 1 << 1),
        "piece-external": rewrite_piece(rank0, "/optimizer/exp_avg/w", 4, 0, 1 | 3 << 3),
        "piece-huge-extent": reshape(rank1, "/model/b", [1 << 40], flags=1),
        "piece-bad-crc": set_int(rank0, "/optimizer/exp_avg/w", "crc32", 12345),
        "piece-outside-shard": set_int(rank1, "/optimizer/exp_avg/w", "shard_offset", 20),
        "piece-other-global-shape": set_ints(rank0, "/model/w", "global_shape", [4, 4]),
        "piece-tp-size-zero": set_int(rank1, "/model/w", "tp_size", 0),
        "piece-missing": delete_object(rank1, "/model/b"),
        "piece-not-in-index": add_link(rank0, "/model/x", "/model/w", 3),
        "mapping-outside-checkpoint": edit_mapping("/model/w", 0, 0, text("../rank_00000.h5")),
        "mapping-rank-past-world": edit_mapping("/model/w", 2, 0, text("rank_00002.h5")),
        "mapping-other-dataset": edit_mapping("/model/w", 1, 1, text("/model/b")),
        "mapping-removed": edit_mapping("/model/w", 0, 10),
        "mapping-twice": edit_mapping("/optimizer/exp_avg/w", 3, 9),
        "mapping-strided": edit_mapping("/model/w", 0, 11),
        "mapping-past-piece": edit_mapping("/model/w", 1, 8, integer(7)) + edit_mapping("/model/w", 1, 6, integer(4)),
        "tensor-reshaped": reshape(index, "/model/b", [6], flags=1),
        "tensor-3d": reshape(index, "/model/b", [5, 1, 1], flags=1),
        "tensor-not-virtual": reshape(index, "/model/b", [5], flags=1 | 4),
        "tensor-big-endian": reshape(index, "/optimizer/exp_avg/w", [], dtype=3, flags=2),
        "tensor-external-link": add_link(index, "/model/x", "/model/w", 1, rank0),
        "tensor-soft-link": add_link(index, "/model/x", "/model/w", 0),
        "rank-file-missing": file_op(rank1, 0),
        "rank-file-truncated": file_op(rank0, 2, 128),
        "rank-file-is-index": file_op(rank1, 1, index),
        "rank-file-directory": file_op(rank0, 3),
        "index-missing": file_op(index, 0),
    }
    for name, data in seeds.items():
        put("checkpoint", name, data)


if __name__ == "__main__":
    recipes()
    overrides()
    corpus()
    indexed_dataset()
    safetensors()
    hf_config()
    checkpoint()
