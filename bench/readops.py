#!/usr/bin/env python3
"""Latency-sensitive reads, timed inside one process (a new process per step would add its start to every figure).

usage: readops.py first FILE_A FILE_B
         stat then read 1 byte of A, then the same of B; prints {"a": seconds, "b": seconds}
       readops.py random FILE ORIGINAL COUNT SEED
         COUNT reads of 4 KiB at seeded random offsets, each checked against ORIGINAL;
         prints {"times": [seconds...], "wrong": reads that differed}

The wan scenario runs it with a deadline, so a tool that hangs is reported as not finished.
"""
import json, os, random, sys, time


def first_byte(path):
    start = time.perf_counter()
    os.stat(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        if len(os.read(fd, 1)) != 1:
            raise SystemExit(f"readops: {path} gave no first byte")
    finally:
        os.close(fd)
    return time.perf_counter() - start


def random_reads(path, original, count, seed):
    size = os.path.getsize(original)
    generator = random.Random(seed)
    offsets = [generator.randrange(0, size // 4096) * 4096 for _ in range(count)]
    times, wrong = [], 0
    fd = os.open(path, os.O_RDONLY)
    reference = os.open(original, os.O_RDONLY)
    try:
        for offset in offsets:
            start = time.perf_counter()
            data = os.pread(fd, 4096, offset)
            times.append(time.perf_counter() - start)
            wrong += data != os.pread(reference, 4096, offset)
    finally:
        os.close(fd)
        os.close(reference)
    return {"times": times, "wrong": wrong}


def main():
    if sys.argv[1] == "first":
        result = {"a": first_byte(sys.argv[2]), "b": first_byte(sys.argv[3])}
    else:
        result = random_reads(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
