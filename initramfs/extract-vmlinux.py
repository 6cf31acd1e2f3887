#!/usr/bin/python3
"""initramfs/extract-vmlinux.py BZIMAGE OUT -- the uncompressed ELF kernel in a bzImage.

Like the kernel's scripts/extract-vmlinux, for the compressions the Python
standard library reads (xz, which Debian uses, gzip, bzip2, lzma): find the
compressed payload, inflate it, keep the result if it is an ELF file.

Why: qemu boots an ELF vmlinux through its PVH entry point (Debian's kernel has
CONFIG_PVH=y), skipping the bzImage's real-mode setup and self-decompression,
which under TCG is most of the boot. Firecracker wants this ELF form as well.
"""
import bz2
import lzma
import os
import sys
import zlib

MAGICS = [
    (b"\xfd7zXZ\x00", lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ)),
    (b"\x1f\x8b\x08", lambda: zlib.decompressobj(16 + zlib.MAX_WBITS)),
    (b"BZh", bz2.BZ2Decompressor),
    (b"\x5d\x00\x00\x00", lambda: lzma.LZMADecompressor(lzma.FORMAT_ALONE)),
]


def extract(image):
    for magic, make in MAGICS:
        pos = image.find(magic)
        while pos != -1:
            try:
                out = make().decompress(image[pos:])
            except (lzma.LZMAError, zlib.error, OSError, EOFError, ValueError):
                out = b""
            if out[:4] == b"\x7fELF":
                return out
            pos = image.find(magic, pos + 1)
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: extract-vmlinux.py BZIMAGE OUT")
    with open(sys.argv[1], "rb") as f:
        image = f.read()
    elf = extract(image)
    if elf is None:
        sys.exit(f"extract-vmlinux: {sys.argv[1]}: no compressed ELF kernel found")
    tmp = f"{sys.argv[2]}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(elf)
    os.replace(tmp, sys.argv[2])


if __name__ == "__main__":
    main()
