#!/usr/bin/env python3
"""The peer for `megatron preprocess`: Megatron-LM's tools/preprocess_data.py path, rebuilt
from public packages. Like that script it runs a multiprocessing pool (imap, chunksize 32)
whose workers json.loads each line, tokenize the text with GPT-2's Python BPE tokenizer
(transformers' slow GPT2Tokenizer: the same algorithm as Megatron's gpt2_tokenization.py),
append end-of-document, and a single writer feeds megatron-core's IndexedDatasetBuilder.

usage: megatron_preprocess.py INPUT.jsonl OUTPUT_PREFIX VOCAB MERGES WORKERS
prints one JSON line: {"seconds": ..., "documents": ..., "tokens": ...}
"""
import json
import multiprocessing
import sys
import time

import numpy as np
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
from transformers import GPT2Tokenizer

TOKENIZER = None


def init(vocab, merges):
    global TOKENIZER
    TOKENIZER = GPT2Tokenizer(vocab, merges)


def encode(line):
    text = json.loads(line)["text"]
    ids = TOKENIZER.encode(text) if text else []
    lengths = []
    if ids:
        ids.append(50256)  # <|endoftext|>, as --append-eod
        lengths.append(len(ids))
    return ids, lengths, len(line)


def main():
    path, prefix, vocab, merges, workers = sys.argv[1:6]
    start = time.perf_counter()
    builder = IndexedDatasetBuilder(prefix + "_text_document.bin", dtype=np.uint16)
    documents = tokens = 0
    with open(path, encoding="utf-8") as fin, multiprocessing.Pool(
        int(workers), initializer=init, initargs=(vocab, merges)
    ) as pool:
        for ids, lengths, _ in pool.imap(encode, fin, 32):
            builder.add_document(ids, lengths)
            documents += 1
            tokens += len(ids)
    builder.finalize(prefix + "_text_document.idx")
    print(json.dumps({"seconds": time.perf_counter() - start, "documents": documents, "tokens": tokens}))


if __name__ == "__main__":
    main()
