#!/usr/bin/env python3
"""Raw GPT-2 tokenization speed of Hugging Face `tokenizers` (Rust) on a JSONL corpus's text.
Threads come from RAYON_NUM_THREADS. JSON parsing and file reading are excluded from the time.

usage: hf_tokenizers.py INPUT.jsonl VOCAB MERGES
prints one JSON line: {"seconds": ..., "tokens": ..., "bytes": ...}
"""
import json
import sys
import time

from tokenizers import ByteLevelBPETokenizer


def main():
    path, vocab, merges = sys.argv[1:4]
    texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8")]
    tokenizer = ByteLevelBPETokenizer(vocab, merges)
    start = time.perf_counter()
    encodings = tokenizer.encode_batch(texts)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "tokens": sum(len(e.ids) for e in encodings),
                      "bytes": sum(len(t.encode()) for t in texts)}))


if __name__ == "__main__":
    main()
