#!/usr/bin/python3
"""Independent reference for `megatron run`'s T5 samples: Megatron-Core's T5 dataset
(helpers.cpp build_mapping, masked_dataset.py _create_masked_lm_predictions with geometric span
lengths, t5_dataset.py __getitem__) written again in Python with NumPy's legacy RandomState;
the sample index and file reading are shared with reference_bert_samples.py, nothing is imported
from the project.

usage: /usr/bin/python3 tests/data/reference_t5_samples.py DUMP.json

DUMP.json (written by the C++ test): {"prefix", "vocab": [token texts by id], "cls", "sep",
"mask", "pad", "bos", "eos", "sentinels", "encoder_length", "decoder_length", "seed",
"short_seq_prob", "mask_prob", "max_ngram", "documents": [begin, end], "max_samples",
"index", "samples": [{"i", "text_enc", "text_dec", "labels" (-1 unscored), "loss_mask",
"enc_valid"}]}. Exit status 0 when the index and every sample agree, 1 otherwise.
"""
from collections import deque
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_bert_samples import build_mapping, compare, read_dataset  # noqa: E402


def masked_spans(d, token_ids, target_len, rs, vocab):
    """_create_masked_lm_predictions with masking_do_full_word, geometric spans, no permutation,
    T5's _get_token_mask (always [MASK], no draw)."""
    candidates = []
    for i, t in enumerate(token_ids):
        if t == d["cls"] or t == d["sep"]:
            continue
        if vocab[t].startswith("##") and candidates:
            candidates[-1].append(i)
        else:
            candidates.append([i])
    n_maskings = min(d["mask_prob"] * target_len,
                     max(1, int(round(len(token_ids) * d["mask_prob"]))))
    nvals = np.arange(d["max_ngram"], dtype=np.int64) + 1
    ngrams = [[candidates[idx:idx + n] for n in nvals] for idx in range(len(candidates))]
    rs.shuffle(ngrams)
    masked_ids = list(token_ids)
    count, spans, taken = 0, [], set()
    for grams in ngrams:
        if count >= n_maskings:
            break
        if not grams:
            continue
        n = min(rs.geometric(0.2), d["max_ngram"])
        while True:
            span = sum(grams[n - 1], [])
            n -= 1
            if n_maskings >= count + len(span):
                skip = False
                break
            if n == 0:
                skip = True
                break
        if skip or any(i in taken for i in span):
            continue
        for i in span:
            taken.add(i)
            masked_ids[i] = d["mask"]
            count += 1
        spans.append((span, [token_ids[i] for i in span]))
    spans.sort(key=lambda x: x[0][0])
    return masked_ids, spans


def sample(d, data, index, idx, vocab):
    first, end, target = index[idx]
    tokens = [t for s in range(first, end) for t in data(s)]
    rs = np.random.RandomState(seed=(d["seed"] + idx) % 2 ** 32)
    tokens = tokens[:target]
    tokens_masked, spans = masked_spans(d, tokens, target, rs, vocab)
    sentinels = deque(d["sentinels"])
    enc, dec, out = [], [d["bos"]], []
    beg = 0
    for indices, labels in spans:
        sentinel = sentinels.popleft()
        enc.extend(tokens_masked[beg:indices[0]])
        enc.append(sentinel)
        dec.append(sentinel)
        dec.extend(labels)
        out.append(sentinel)
        out.extend(labels)
        beg = indices[-1] + 1
    enc.extend(tokens_masked[beg:])
    out.append(d["eos"])
    S, Sd, pad = d["encoder_length"], d["decoder_length"], d["pad"]
    enc_valid = sum(1 for t in enc if t != pad)
    n_dec = len(dec)
    enc = [0 if t == pad else t for t in enc + [pad] * (S - len(enc))]
    dec = [0 if t == pad else t for t in dec + [pad] * (Sd - len(dec))]
    out = [0 if t == pad else t for t in out] + [-1] * (Sd - len(out))
    loss_mask = [1] * n_dec + [0] * (Sd - n_dec)
    return {"text_enc": enc, "text_dec": dec, "labels": out, "loss_mask": loss_mask,
            "enc_valid": enc_valid}


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    d = json.load(open(sys.argv[1]))
    data, lengths, docs = read_dataset(d["prefix"])
    begin, end = d["documents"]
    index = build_mapping(docs[begin:end + 1], lengths, d["max_samples"], d["encoder_length"] - 2,
                          d["short_seq_prob"], d["seed"], 1)
    return compare(d, index, lambda i: sample(d, data, index, i, d["vocab"]),
                   ("text_enc", "text_dec", "labels", "loss_mask", "enc_valid"))

if __name__ == "__main__":
    sys.exit(main())
