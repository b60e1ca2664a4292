#!/usr/bin/env python3
"""Reads a TensorBoard event directory for the CLI tests and prints JSON
{"reader": ..., "scalars": {tag: [[step, value], ...]}, "text": {tag: text}}.

With the `tensorboard` package installed it uses tensorboard's own EventAccumulator (the
reader TensorBoard itself runs); without it, an independent decoder from the standard library:
TFRecord framing with every masked CRC-32C checked, and the protobuf fields of Event, Summary,
Value and TensorProto that scalars and text use.
"""
import glob
import json
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fields(buf):
    """Yields (field, wire, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError(f"wire type {wire}")
        yield field, wire, v


def varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def stdlib(path):
    scalars, text = {}, {}
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        header = data[i:i + 8]
        (length,) = struct.unpack("<Q", header)
        assert struct.unpack("<I", data[i + 8:i + 12])[0] == masked(header), "length CRC"
        body = data[i + 12:i + 12 + length]
        assert struct.unpack("<I", data[i + 12 + length:i + 16 + length])[0] == masked(body), "data CRC"
        i += 16 + length
        step = 0
        for f, _, v in fields(body):
            if f == 2:
                step = v
            if f == 5:
                for vf, _, value in fields(v):
                    if vf != 1:
                        continue
                    tag = None
                    for tf, _, tv in fields(value):
                        if tf == 1:
                            tag = tv.decode()
                        elif tf == 2:
                            scalars.setdefault(tag, []).append([step, struct.unpack("<f", tv)[0]])
                        elif tf == 8:
                            for pf, _, pv in fields(tv):
                                if pf == 8:
                                    text[tag] = pv.decode()
    return scalars, text


def main():
    directory = sys.argv[1]
    files = glob.glob(os.path.join(directory, "events.out.tfevents.*"))
    assert len(files) == 1, files
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    except ImportError:
        scalars, text = stdlib(files[0])
        print(json.dumps({"reader": "stdlib", "scalars": scalars, "text": text}))
        return
    acc = EventAccumulator(directory, size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    scalars = {t: [[e.step, e.value] for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}
    text = {}
    for t in acc.Tags().get("tensors", []):
        event = acc.Tensors(t)[0]
        text[t] = event.tensor_proto.string_val[0].decode()
    print(json.dumps({"reader": "tensorboard", "scalars": scalars, "text": text}))


if __name__ == "__main__":
    main()
