"""platform_files.py -- envd's POST /files/compose and GET /files' Range
and gzip through the guest's envd listener, agentd as PID 1
(tests/e2e/envd_platform.py runs it)."""
import gzip
import json
import time
import urllib.parse

from e2e import check

DIR = "/tmp/platform-files"


def get(vm, path, headers):
    return vm.envd("GET", "/files?path=" + urllib.parse.quote(path),
                   headers=headers)


def checks(vm):
    parts = [b"alpha-" * 1000, b"beta-" * 2000, b"gamma"]
    code, out = vm.sh(f"rm -rf {DIR}; mkdir -p {DIR} && echo ok")
    if not check("files: a scratch folder", code == 0, out):
        return
    for i, data in enumerate(parts):
        st, _, raw = vm.envd("POST", "/files?path=" + urllib.parse.quote(
            f"{DIR}/p{i}"), data, {"Content-Type": "application/octet-stream"})
        check(f"files: part {i} uploaded", st == 200, f"{st} {raw[:200]!r}")
    dest = f"{DIR}/out/joined.bin"
    st, _, raw = vm.envd("POST", "/files/compose", {
        "source_paths": [f"{DIR}/p{i}" for i in range(len(parts))],
        "destination": dest})
    check("files: compose 200 EntryInfo", st == 200 and json.loads(raw) == {
        "name": "joined.bin", "path": dest, "type": "file"},
        f"{st} {raw[:200]!r}")
    whole = b"".join(parts)
    code, out = vm.sh(f"ls {DIR}; wc -c < {dest}")
    check("files: sources gone, the destination whole",
          code == 0 and out.split() == ["out", str(len(whole))], out)
    st, _, raw = vm.envd("POST", "/files/compose", {
        "source_paths": [f"{DIR}/p0"], "destination": dest})
    check("files: compose of a missing source 404", st == 404,
          f"{st} {raw[:200]!r}")
    # The first GET after boot: nothing waits for the kernel's entropy
    # (getrandom blocks early in a VM's boot, for seconds to minutes; the
    # bound leaves the TCG guest its own slowness).
    t0 = time.monotonic()
    st, _, body = get(vm, dest, {"Range": "bytes=0-1,3-4"})
    took = time.monotonic() - t0
    check("files: the first GET answers at once", st == 206 and took < 3.0,
          f"{st} {took:.3f} s")
    st, h, body = get(vm, dest, {"Range": "bytes=6000-6009"})
    check("files: Range 206", st == 206 and body == whole[6000:6010] and
          h.get("Content-Range") == f"bytes 6000-6009/{len(whole)}",
          f"{st} {h} {body[:40]!r}")
    st, h, body = get(vm, dest, {"Range": "bytes=-5"})
    check("files: suffix Range", st == 206 and body == b"gamma", f"{st} {body!r}")
    st, h, _ = get(vm, dest, {"Range": f"bytes={len(whole)}-"})
    check("files: Range past the end 416", st == 416 and
          h.get("Content-Range") == f"bytes */{len(whole)}", f"{st} {h}")
    st, h, body = get(vm, dest, {"Accept-Encoding": "gzip"})
    check("files: gzip body", st == 200 and
          h.get("Content-Encoding") == "gzip" and
          gzip.decompress(body) == whole, f"{st} {h}")
    st, _, _ = get(vm, dest, {"Accept-Encoding": "identity;q=0, br"})
    check("files: nothing acceptable 406", st == 406, f"{st}")
    vm.sh(f"rm -rf {DIR}")
