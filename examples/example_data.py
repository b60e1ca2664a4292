"""What the examples' make_data.py scripts share: shuffling the rows with the script's generator and writing
the training rows and the held-out ones (the first 100 for validation, then the test rows) as
OUT/train.jsonl, valid.jsonl and test.jsonl."""
import json
import os


def write_splits(out, train, held_out, train_rows, test_rows, rng):
    """rng: a random.Random; returns (train, valid, test) as written."""
    rng.shuffle(train)
    rng.shuffle(held_out)
    splits = {"train": train[:train_rows], "valid": held_out[:100], "test": held_out[100 : 100 + test_rows]}
    os.makedirs(out, exist_ok=True)
    for name, rows in splits.items():
        with open(os.path.join(out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    return splits["train"], splits["valid"], splits["test"]
