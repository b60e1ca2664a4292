#!/usr/bin/env python3
"""Hugging Face `tokenizers` (Rust) batch encoding of a JSONL corpus's text with a tokenizer.json,
the peer of `megatron preprocess --tokenizer huggingface`. Threads come from RAYON_NUM_THREADS.
JSON parsing and file reading are excluded from the time; truncation and padding are off, as
transformers turns them off. With IDS_OUT, every text's ids (no special tokens) are written there
concatenated, as little-endian int32, for an id-for-id comparison.

usage: hf_tokenizer_json.py INPUT.jsonl TOKENIZER.json [IDS_OUT]
prints one JSON line: {"seconds": ..., "tokens": ..., "bytes": ...}
"""
import json
import sys
import time
from array import array

from tokenizers import Tokenizer


def main():
    path, tokenizer_file = sys.argv[1:3]
    texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
    tokenizer = Tokenizer.from_file(tokenizer_file)
    tokenizer.no_truncation()
    tokenizer.no_padding()
    start = time.perf_counter()
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    seconds = time.perf_counter() - start
    if len(sys.argv) > 3:
        ids = array("i")
        for e in encodings:
            ids.extend(e.ids)
        with open(sys.argv[3], "wb") as out:
            ids.tofile(out)
    print(json.dumps({"seconds": seconds, "tokens": sum(len(e.ids) for e in encodings),
                      "bytes": sum(len(t.encode()) for t in texts)}))


if __name__ == "__main__":
    main()
