#!/usr/bin/env python3
"""Writes the hand-made seed inputs of each fuzz target into corpus/<target>/seed-*.

The rest of each corpus is what libFuzzer found and `-merge=1` kept (README.md)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
DATA, ABRT, NUDG = 0x41544144, 0x54524241, 0x4744554E
IN_RUN = 1 << 31  # a DATA length's top bit: sent in a run (protocol version 5)
MAGIC, VERSION = 0x4C474E52, 1


def frame(kind, payload, length=None):
    return struct.pack("<II", kind, len(payload) if length is None else length) + payload


def receives(*pairs, close_both=False):  # (kind, size) ...: 0 recv, 1 recvInto, 2 read ahead, 3 send
    out = bytes([(len(pairs) - 1) | (0x80 if close_both else 0)])
    for kind, size in pairs:
        out += bytes([kind]) + struct.pack("<H", size)
    return out


seeds = {
    "frames": {
        "data": receives((0, 8)) + frame(DATA, bytes(range(8))),
        "data-into": receives((1, 100), (0, 3)) + frame(DATA, b"x" * 100) + frame(DATA, b"abc"),
        "abort": receives((0, 8)) + frame(ABRT, struct.pack("<i", 1) + b"out of memory"),
        # An ABORT frame too short for its origin, followed by the peer closing (was a crash).
        "abort-empty": receives((0, 8)) + frame(ABRT, b""),
        "abort-short": receives((0, 8)) + frame(DATA, b"12345678") + frame(ABRT, b"\x01\x00"),
        "abort-long": receives((0, 8)) + frame(ABRT, b"", length=1 << 31),
        "unknown-type": receives((0, 4)) + frame(0x12345678, b"abcd"),
        "size-mismatch": receives((1, 4)) + frame(DATA, b"abcdefgh"),
        # The peer's ABORT frame is too short, and it is found while a send fails (was a crash).
        "abort-empty-on-send": receives((2, 0), (3, 8), close_both=True)
        + frame(DATA, b"12345678") + frame(ABRT, b""),
        "truncated": receives((1, 40000)) + frame(DATA, b"y" * 100, length=40000),
        # Nudges are passed over; one with a payload is a corrupt stream.
        "nudges": receives((0, 8), (2, 0), (1, 3)) + frame(NUDG, b"") + frame(DATA, b"12345678")
        + frame(NUDG, b"") + frame(NUDG, b"") + frame(DATA, b"abc"),
        "nudge-payload": receives((0, 8)) + frame(NUDG, b"abc"),
        "data-in-run": receives((0, 8), (1, 4)) + frame(DATA, b"12345678", length=8 | IN_RUN)
        + frame(DATA, b"wxyz", length=4 | IN_RUN),
        "data-in-run-huge": receives((1, 8)) + frame(DATA, b"", length=0xFFFFFFFF),
    },
    "handshake": {
        "listener": b"\x00" + struct.pack("<IHHii", MAGIC, VERSION, 8, 2, 1) + b"fuzz-job" + bytes(32),
        "listener-long-id": b"\x00" + struct.pack("<IHHii", MAGIC, VERSION, 0xFFFF, 2, 1),
        "listener-bad-magic": b"\x00" + struct.pack("<IHHii", 1, VERSION, 8, 2, 1),
        "connector": b"\x01" + struct.pack("<IHH", MAGIC, VERSION, 0) + bytes(32)
        + struct.pack("<IHHi", MAGIC, VERSION, 0, 0) + bytes(32),
        "connector-short": b"\x01" + struct.pack("<IH", MAGIC, VERSION),
    },
    "store": {
        "set-get": b"\x00" + bytes([1]) + struct.pack("<IQ", 1, 1) + b"a" + b"1"
        + bytes([2]) + struct.pack("<IQ", 1, 8) + b"a" + struct.pack("<Q", 10),
        "add-check": b"\x00" + bytes([3]) + struct.pack("<IQ", 1, 8) + b"c" + struct.pack("<q", 5)
        + bytes([4]) + struct.pack("<IQ", 1, 0) + b"c",
        "get-missing": b"\x00" + bytes([2]) + struct.pack("<IQ", 1, 8) + b"z" + struct.pack("<Q", 1),
        "huge-lengths": b"\x00" + bytes([1]) + struct.pack("<IQ", 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF),
        "raw": b"\x01RGLSTOR9",
    },
    "sealed": {
        # Round trips: small writes read whole, a write across records read in small pieces.
        "round-trip": b"\x00" + struct.pack("<HHHHHH", 100, 100, 5, 1, 4000, 333),
        "across-records": b"\x00" + struct.pack("<HHHH", 0x8000 | 6000, 7, 0x8000, 65535),
        # Hostile: a record of a plausible length with a made-up tag, a length past the limit,
        # a record cut off by the end.
        "forged": b"\x01\x00" + struct.pack("<I", 8) + bytes(8) + bytes(16),
        "too-long": b"\x01\x05" + struct.pack("<I", 0x10001) + bytes(64),
        "cut-off": b"\x01\x00" + struct.pack("<I", 1000) + bytes(100),
    },
    "config": {
        "timeout-tiny": b"\x000.0001\n",
        "sizes-huge": b"\x039223372036854775808\n\x0a9223372036854775808\n",
        "debug-bogus": b"\x01bogus\n",
        "rank-huge": b"\x0c99999999999999999999\n\x0d2\n",
        "cost-model": b"\x05alpha=2e-6,beta=2.5e-10,gamma=1.2e-10,delta=6e-11\n",
        "store-addr": b"\x06[::1]:99999\n",
        "slurm": b"\x14" b"0\n\x15" b"4\n\x16" b"2(x3),1\n\x17" b"1\n",
    },
}

for target, inputs in seeds.items():
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    for name, data in inputs.items():
        with open(os.path.join(folder, "seed-" + name), "wb") as f:
            f.write(data)
