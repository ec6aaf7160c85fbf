#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Paths longer than PATH_MAX from the root (tests/mount/deep.sh).

  deep_walk.py make ROOT   makes 18 directories of 250-byte names under
                           ROOT (the deepest path from ROOT is over 4,500
                           bytes) and, at the bottom, works on files there
                           with relative names only, as pjdfstest's
                           truncate/03.t does: an engine's store (O_EXCL
                           temp file, one write, close, rename; one of
                           5 MiB, an extent file past record_max=4M),
                           truncate
                           and ftruncate, a write, an O_TRUNC rewrite, a
                           rename and an unlink; prints one line a step
  deep_walk.py check ROOT  prints each file at the bottom: name, size, MD5

A failed step prints its errno name; the transcript is compared with the
plain directory's, so a filesystem that refuses or loses a deep file shows
as a difference.
"""
import errno
import hashlib
import os
import sys

NAME = "d" * 250
DEPTH = 18


def step(what, fn):
    try:
        out = fn()
        print(what, "ok" if out is None else out)
    except OSError as e:
        print(what, errno.errorcode.get(e.errno, str(e.errno)))


def block(n, seed):
    run = bytes((seed + i * 7) % 251 for i in range(251))
    return (run * (n // 251 + 1))[:n]


def store(name, data):
    tmp = name + ".tmp"
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        if os.write(fd, data) != len(data):
            raise OSError(errno.EIO, "short write")
    finally:
        os.close(fd)
    os.rename(tmp, name)


def write_at(name, data, flags=0):
    fd = os.open(name, os.O_WRONLY | flags)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def ftrunc(name, size):
    fd = os.open(name, os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def rewrite():
    store("blk2.bin", block(5000, 2))
    write_at("blk2.bin", block(70000, 3), os.O_TRUNC)


def down(root, make):
    os.chdir(root)
    for _ in range(DEPTH):
        if make:
            os.mkdir(NAME, 0o755)
        os.chdir(NAME)


def make(root):
    down(root, True)
    print("depth", DEPTH, "path bytes", DEPTH * (len(NAME) + 1))
    step("store blk.bin", lambda: store("blk.bin", block(300000, 1)))
    step("store big.bin", lambda: store("big.bin", block(5 << 20, 5)))
    step("creat f", lambda: os.close(os.open("f", os.O_CREAT | os.O_WRONLY,
                                             0o644)))
    step("truncate f 123", lambda: os.truncate("f", 123))
    step("stat f", lambda: os.stat("f").st_size)
    step("ftruncate f 7", lambda: ftrunc("f", 7))
    step("write f", lambda: write_at("f", b"deep"))
    step("rewrite blk2.bin", rewrite)
    step("rename f g", lambda: os.rename("f", "g"))
    step("stat f", lambda: os.stat("f").st_size)
    step("stat g", lambda: os.stat("g").st_size)
    step("store gone.bin", lambda: store("gone.bin", block(4096, 4)))
    step("unlink gone.bin", lambda: os.unlink("gone.bin"))
    step("list", lambda: " ".join(sorted(os.listdir("."))))


def check(root):
    down(root, False)
    for name in sorted(os.listdir(".")):
        with open(name, "rb") as f:
            data = f.read()
        print(name, len(data), hashlib.md5(data).hexdigest())


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("make", "check"):
        print(__doc__, file=sys.stderr)
        return 2
    (make if sys.argv[1] == "make" else check)(sys.argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
