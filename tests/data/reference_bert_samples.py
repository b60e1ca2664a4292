#!/usr/bin/python3
"""Independent reference for `megatron run`'s BERT samples: Megatron-Core's BERT dataset
(helpers.cpp build_mapping, masked_dataset.py _create_masked_lm_predictions and
bert_dataset.py __getitem__) written again in Python with NumPy's legacy RandomState, nothing
imported from the project.

usage: /usr/bin/python3 tests/data/reference_bert_samples.py DUMP.json

DUMP.json (written by the C++ test): {"prefix", "vocab": [token texts by id], "cls", "sep",
"mask", "pad", "seq_length", "seed", "short_seq_prob", "mask_prob", "max_ngram", "full_word",
"binary_head", "documents": [begin, end], "max_samples", "index": [[first, end, target], ...],
"samples": [{"i", "tokens", "types", "labels" (-1 unscored), "is_random", "valid_length"}]}.
Exit status 0 when the index and every sample agree, 1 otherwise, 2 for bad input.
"""
import json
import sys

import numpy as np

LONG_SENTENCE_LEN = 512


class MT19937:
    """std::mt19937 / std::mt19937_64 (the two generators build_mapping uses)."""

    def __init__(self, seed, bits):
        if bits == 32:
            self.w, self.n, self.m, self.r = 32, 624, 397, 31
            self.a, self.u, self.d, self.s, self.b = 0x9908B0DF, 11, 0xFFFFFFFF, 7, 0x9D2C5680
            self.t, self.c, self.l, self.f = 15, 0xEFC60000, 18, 1812433253
        else:
            self.w, self.n, self.m, self.r = 64, 312, 156, 31
            self.a, self.u, self.d = 0xB5026F5AA96619E9, 29, 0x5555555555555555
            self.s, self.b, self.t = 17, 0x71D67FFFEDA60000, 37
            self.c, self.l, self.f = 0xFFF7EEE000000000, 43, 6364136223846793005
        self.mask = (1 << self.w) - 1
        self.lower = (1 << self.r) - 1
        self.upper = (~self.lower) & self.mask
        self.x = [seed & self.mask]
        for i in range(1, self.n):
            prev = self.x[-1]
            self.x.append((self.f * (prev ^ (prev >> (self.w - 2))) + i) & self.mask)
        self.i = self.n

    def __call__(self):
        if self.i >= self.n:
            for k in range(self.n):
                y = (self.x[k] & self.upper) | (self.x[(k + 1) % self.n] & self.lower)
                v = self.x[(k + self.m) % self.n] ^ (y >> 1)
                if y & 1:
                    v ^= self.a
                self.x[k] = v
            self.i = 0
        y = self.x[self.i]
        self.i += 1
        y ^= (y >> self.u) & self.d
        y ^= (y << self.s) & self.b
        y ^= (y << self.t) & self.c
        y ^= y >> self.l
        return y & self.mask


def build_mapping(docs, sizes, max_samples, max_len, short_prob, seed, min_sent):
    ratio = int(round(1.0 / short_prob)) if short_prob > 0 else 0
    gen = MT19937(seed, 32)

    def target():
        if ratio == 0:
            return max_len
        r = gen()
        return 2 + r % (max_len - 1) if r % ratio == 0 else max_len

    out = []
    while True:
        before = len(out)
        for d in range(len(docs) - 1):
            first, last = docs[d], docs[d + 1]
            remain = last - first
            if remain > 1 and any(sizes[s] > LONG_SENTENCE_LEN for s in range(first, last)):
                continue
            if remain < min_sent:
                continue
            start, seq_len, num = first, 0, 0
            t = target()
            for s in range(first, last):
                seq_len += sizes[s]
                num += 1
                remain -= 1
                if (seq_len >= t and remain > 1 and num >= min_sent) or remain == 0:
                    out.append([start, s + 1, t])
                    start, seq_len, num = s + 1, 0, 0
                    t = target()
        if len(out) == before:
            raise SystemExit("reference: no samples")
        if len(out) >= max_samples:
            break
    shuffle = MT19937(seed + 1, 64)
    for i in range(len(out) - 1, 0, -1):
        j = shuffle() % (i + 1)
        out[i], out[j] = out[j], out[i]
    return out


def masked_lm(d, tokens, target_len, rs, vocab):
    candidates = []
    for i, t in enumerate(tokens):
        if t == d["cls"] or t == d["sep"]:
            continue
        if vocab[t].startswith("##") and d["full_word"] and candidates:
            candidates[-1].append(i)
        else:
            candidates.append([i])
    n_mask = min(d["mask_prob"] * target_len, max(1, int(round(len(tokens) * d["mask_prob"]))))
    nvals = np.arange(d["max_ngram"], dtype=np.int64) + 1
    nprobs = 1.0 / nvals
    nprobs = nprobs / nprobs.sum(keepdims=True)
    ngrams = [[candidates[idx:idx + n] for n in nvals] for idx in range(len(candidates))]
    rs.shuffle(ngrams)
    out = list(tokens)
    masked, taken = [], set()
    for grams in ngrams:
        if len(masked) >= n_mask:
            break
        p = nprobs[:len(grams)] / nprobs[:len(grams)].sum(keepdims=True)
        n = rs.choice(nvals[:len(grams)], p=p)
        while True:
            span = sum(grams[n - 1], [])
            n -= 1
            if n_mask >= len(masked) + len(span):
                skip = False
                break
            if n == 0:
                skip = True
                break
        if skip or any(i in taken for i in span):
            continue
        for i in span:
            taken.add(i)
            if rs.random() < 0.8:
                out[i] = d["mask"]
            elif rs.random() >= 0.5:
                # Megatron's BERT tokenizer adds [BOS] and [EOS] to the vocabulary it draws from.
                lookup = len(vocab) + sum(t not in vocab for t in ("[BOS]", "[EOS]"))
                out[i] = int(rs.randint(0, lookup))
            masked.append((i, tokens[i]))
    masked.sort()
    return out, masked


def sample(d, data, index, idx, vocab):
    first, end, target = index[idx]
    sents = [list(data(s)) for s in range(first, end)]
    rs = np.random.RandomState(seed=(d["seed"] + idx) % 2 ** 32)
    pivot, swapped = len(sents), False
    if d["binary_head"]:
        pivot = 1
        if len(sents) >= 3:
            pivot = rs.randint(low=1, high=len(sents))
        swapped = rs.random() < 0.5
    a = sum(sents[:pivot], [])
    b = sum(sents[pivot:], [])
    if swapped:
        a, b = b, a
    while len(a) + len(b) > target:
        longer = a if len(a) > len(b) else b
        if rs.random() < 0.5:
            del longer[0]
        else:
            del longer[-1]
    tokens = [d["cls"], *a, d["sep"]]
    types = [0] * len(tokens)
    if b:
        tokens += [*b, d["sep"]]
        types += [1] * (len(b) + 1)
    tokens, masked = masked_lm(d, tokens, target, rs, vocab)
    S = d["seq_length"]
    labels = [-1] * S
    for i, label in masked:
        labels[i] = label
    return {"tokens": tokens + [d["pad"]] * (S - len(tokens)), "types": types + [0] * (S - len(types)),
            "labels": labels, "is_random": int(swapped), "valid_length": len(tokens)}


def read_dataset(prefix):
    idx = open(prefix + ".idx", "rb").read()
    if idx[:9] != b"MMIDIDX\x00\x00":
        raise SystemExit(2)
    dtype = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 8: np.uint16}[idx[17]]
    count = int(np.frombuffer(idx, np.uint64, 1, 18)[0])
    docs_count = int(np.frombuffer(idx, np.uint64, 1, 26)[0])
    lengths = np.frombuffer(idx, np.int32, count, 34)
    offsets = np.frombuffer(idx, np.int64, count, 34 + 4 * count)
    docs = np.frombuffer(idx, np.int64, docs_count, 34 + 12 * count)
    bin_ = np.fromfile(prefix + ".bin", dtype=dtype)
    width = np.dtype(dtype).itemsize
    return (lambda s: bin_[offsets[s] // width: offsets[s] // width + lengths[s]].tolist(),
            lengths.tolist(), docs.tolist())


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    d = json.load(open(sys.argv[1]))
    data, lengths, docs = read_dataset(d["prefix"])
    begin, end = d["documents"]
    index = build_mapping(docs[begin:end + 1], lengths, d["max_samples"], d["seq_length"] - 3,
                          d["short_seq_prob"], d["seed"], 2 if d["binary_head"] else 1)
    return compare(d, index, lambda i: sample(d, data, index, i, d["vocab"]),
                   ("tokens", "types", "labels", "is_random", "valid_length"))


def compare(d, index, reference_sample, keys):
    """The engine's index and samples in dump `d` against the reference's; prints each
    difference and a summary, returns the exit status (0 when all agree)."""
    failures = 0
    if index != d["index"]:
        print("sample index differs: reference %d samples, engine %d; first entries %s vs %s"
              % (len(index), len(d["index"]), index[:3], d["index"][:3]))
        failures += 1
    for got in d["samples"]:
        want = reference_sample(got["i"])
        for key in keys:
            if got[key] != want[key]:
                print("sample %d: %s differs\n  engine    %s\n  reference %s"
                      % (got["i"], key, got[key], want[key]))
                failures += 1
    print("%d samples compared, index of %d samples: %s"
          % (len(d["samples"]), len(index), "ok" if failures == 0 else "%d differences" % failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
