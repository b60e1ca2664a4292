"""Compares megatron's GPT dataset indices with megatron-core's own GPTDataset.

Reads every .gptidx cache file megatron left in a cache directory (format: docs/datasets.md),
builds the same splits with megatron-core (PyPI `megatron-core`, its prebuilt C++ helpers) from
the same indexed dataset, split string, sequence length, sample counts and seed, and checks that
the split's document range, document index, sample index and shuffle index are equal, and that
every sample's tokens equal megatron-core's __getitem__ tokens (and labels). Prints one line per
split; exits 1 on any difference.

    python megatron_core_gpt_indices.py --prefix DATA_text_document --cache DIR --split 969,30,1
"""
import argparse
import pathlib
import struct
import sys
import tempfile

import numpy

from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
from megatron.core.datasets.megatron_tokenizer import MegatronLegacyTokenizer

SPLITS = ("train", "valid", "test")


class IdsOnly(MegatronLegacyTokenizer):
    """What megatron-core's GPTDataset asks of a tokenizer: a vocabulary size, eod and pad."""

    def __init__(self, vocab_size, eod):
        super().__init__(None, "ids only")
        self._size, self._eod = vocab_size, eod

    def tokenize(self, text):
        raise NotImplementedError

    @property
    def vocab(self):
        return {}

    @property
    def inv_vocab(self):
        return {}

    @property
    def vocab_size(self):
        return self._size

    @property
    def eod(self):
        return self._eod

    @property
    def pad(self):
        return -1


def read_gptidx(path):
    """(description dict, [plan, document_index, sample_index, shuffle_index])."""
    raw = path.read_bytes()
    magic, version, desc_len, count = struct.unpack_from("<8sQQQ", raw, 0)
    if magic != b"MGTNIDXC":
        raise ValueError(f"{path}: not a megatron index cache")
    lengths = struct.unpack_from(f"<{count}Q", raw, 32)
    at = 32 + 8 * count
    text = raw[at:at + desc_len].decode()
    at += (desc_len + 7) // 8 * 8
    arrays = []
    for n in lengths:
        arrays.append(numpy.frombuffer(raw, dtype="<i8", count=n, offset=at))
        at += 8 * n
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(": ")
        fields[key] = value
    return fields, arrays


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--cache", required=True, type=pathlib.Path)
    ap.add_argument("--split", required=True)
    ap.add_argument("--vocab-size", type=int, default=50257)
    ap.add_argument("--eod", type=int, default=50256)
    ap.add_argument("--samples-checked", type=int, default=0,
                    help="check the tokens of this many samples per split (0: all)")
    args = ap.parse_args()

    ours = {}
    for path in sorted(args.cache.glob("*.gptidx")):
        fields, arrays = read_gptidx(path)
        if fields["dataset"] != str(pathlib.Path(args.prefix).resolve()):
            continue
        ours[fields["split"]] = (fields, arrays)
    if not ours:
        sys.exit(f"no .gptidx files for {args.prefix} in {args.cache}")
    seeds = {f["seed"] for f, _ in ours.values()}
    lengths = {f["seq_length"] for f, _ in ours.values()}
    if len(seeds) != 1 or len(lengths) != 1:
        sys.exit("the cache files disagree on seed or sequence length")
    sizes = []
    for name in SPLITS:
        fields = ours[name][0] if name in ours else {"num_samples": "one epoch", "documents": "[0, 0)"}
        if fields["documents"].startswith("[") and len(set(fields["documents"].strip("[)").split(", "))) == 1:
            # No documents: megatron-core would look for the samples forever (_get_num_epochs);
            # ask it for one (empty) epoch and compare nothing.
            ours.pop(name, None)
            sizes.append(None)
            continue
        samples = fields["num_samples"]
        sizes.append(None if samples == "one epoch" else int(samples))

    with tempfile.TemporaryDirectory() as cache:
        config = GPTDatasetConfig(
            random_seed=int(seeds.pop()), sequence_length=int(lengths.pop()),
            blend=([args.prefix], None), split=args.split, path_to_cache=cache,
            tokenizer=IdsOnly(args.vocab_size, args.eod), reset_position_ids=False,
            reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False)
        theirs = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()

        failed = False
        for name, dataset in zip(SPLITS, theirs):
            if name not in ours:
                continue
            fields, (plan, doc_idx, sample_idx, shuffle_idx) = ours[name]
            problems = []
            begin, end = (int(x) for x in fields["documents"].strip("[)").split(", "))
            if not numpy.array_equal(numpy.arange(begin, end), dataset.indices):
                problems.append(f"documents [{begin}, {end}) vs megatron-core's "
                                f"[{dataset.indices[0]}, {dataset.indices[-1] + 1})")
            for what, a, b in (("document index", doc_idx, dataset.document_index),
                               ("sample index", sample_idx, numpy.asarray(dataset.sample_index).reshape(-1)),
                               ("shuffle index", shuffle_idx, dataset.shuffle_index)):
                if a.shape != b.shape or not numpy.array_equal(a, b.astype(numpy.int64)):
                    first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), None)
                    problems.append(f"{what}: {len(a)} vs {len(b)} entries, first difference at {first}")
            checked = len(shuffle_idx) if args.samples_checked == 0 else min(args.samples_checked, len(shuffle_idx))
            if not problems:
                for i in range(checked):
                    tokens = tokens_of(dataset.dataset, doc_idx, sample_idx, int(shuffle_idx[i]))
                    got = dataset[i]
                    if not (numpy.array_equal(tokens[:-1], got["tokens"].numpy())
                            and numpy.array_equal(tokens[1:], got["labels"].numpy())):
                        problems.append(f"sample {i}: tokens differ")
                        break
            status = "equal" if not problems else "DIFFERENT: " + "; ".join(problems)
            print(f"{name:5}  documents [{begin}, {end})  epochs {plan[1]}  separate final epoch "
                  f"{bool(plan[2])}  samples {len(shuffle_idx)}  tokens checked for {checked}  {status}")
            failed |= bool(problems)
    sys.exit(1 if failed else 0)


def tokens_of(indexed, doc_idx, sample_idx, k):
    """Sample k's S + 1 tokens, read from the dataset through megatron's own index arrays."""
    (p0, o0), (p1, o1) = sample_idx[2 * k:2 * k + 2], sample_idx[2 * k + 2:2 * k + 4]
    if p0 == p1:
        return indexed.get(int(doc_idx[p0]), offset=int(o0), length=int(o1 - o0 + 1)).astype(numpy.int64)
    parts = [indexed.get(int(doc_idx[p0]), offset=int(o0))]
    parts += [indexed.get(int(doc_idx[p])) for p in range(p0 + 1, p1)]
    parts.append(indexed.get(int(doc_idx[p1]), length=int(o1 + 1)))
    return numpy.concatenate(parts).astype(numpy.int64)


if __name__ == "__main__":
    main()
