#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into fuzz/corpus/<target>/ from real data: the
committed bundles under results/ (their CSV, JSON, SHA256SUMS, cmdline.txt, the VMM reports
and the guest records and traces inside them) and the protocol's own test vectors
(proto/src/tests.rs). scripts/fuzz.sh --minimize then reduces each corpus to the inputs that
add coverage. Run from anywhere: python3 fuzz/seed.py"""
import glob
import hashlib
import json
import os
import re
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RES = os.path.join(ROOT, "results")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(p):
    with open(p, "rb") as f:
        return f.read()


def files(name):
    return sorted(glob.glob(os.path.join(RES, "**", name), recursive=True))


def report_lines(limit=2):
    # A probe bundle, a nested Linux one, an engines arm (serial observer), a tune arm.
    picks = ("probe-floor", "nested-linux-sequential", "firecracker", "confirm/baseline")
    for p in [f for f in files("reports.jsonl") if any(k in f for k in picks)]:
        with open(p, "rb") as f:
            for i, line in enumerate(f):
                if i >= limit:
                    break
                yield line.rstrip(b"\n")


def flag(b):
    return "1" if b else "0"


# --- the protocol: TC1 lines ---
lines = []
for lit in re.findall(r'"(TC1 [^"]*)"', read(os.path.join(ROOT, "proto/src/tests.rs")).decode()):
    lines.append(lit.replace("\\n", "\n").replace("{}", "0123456789abcdef0123456789abcdef"))
for raw in report_lines():
    vmm = json.loads(raw).get("vmm") or {}
    r = vmm.get("guest_record")
    if not r:
        continue
    p = r["platform"]
    lines.append(
        f"TC1 record boot_id={r['boot_id'] or 'none'} t_init_ns={r['t_init_ns']} "
        f"t_ready_ns={r['t_ready_ns']} t_reply_ns={r['t_reply_ns']} t_record_ns={r['t_record_ns']} "
        f"mem_configured={r['mem_configured']} mem_firmware_ram={r['mem_firmware_ram']} "
        f"mem_total={r['mem_total']} mem_present={r.get('mem_present', 0)} "
        f"mem_managed={r.get('mem_managed', 0)} mem_probe={r['mem_probe']} cpus={r['cpus']} "
        f"packages={p['packages']} cores_per_package={p['cores_per_package']} "
        f"threads_per_core={p['threads_per_core']} tsc_deadline_timer={flag(p['tsc_deadline_timer'])} "
        f"constant_tsc={flag(p['constant_tsc'])} nonstop_tsc={flag(p['nonstop_tsc'])} "
        f"tsc_unstable={flag(p['tsc_unstable'])} clocksource={p['clocksource'] or 'none'} "
        f"workload={r['workload']} code={r['code']}\n")
    lines.append(f"TC1 ready boot_id={r['boot_id']}\n")
    lines.append(f"TC1 reply boot_id={r['boot_id']} binding={'ab' * 32}\n")
for p in files("attribution.jsonl")[:1]:
    first = json.loads(read(p).split(b"\n")[0])
    t = first["report"]["vmm"].get("guest_trace") or {}
    s = t.get("sync")
    if s:
        lines.append(f"TC1 ksync kmsg_us={s['kmsg_us']} mono_ns={s['mono_ns']} "
                     f"records={s['records']} truncated={flag(s['truncated'])}\n")
    for c in t.get("initcalls", [])[:3]:
        lines.append(f"TC1 initcall fn={c['fn']} start_us={c['start_us']} dur_us={c['dur_us']} ret={c['ret']}\n")
    for m in t.get("marks", [])[:3]:
        lines.append(f"TC1 kmark name={m['name']} t_us={m['t_us']}\n")
lines = sorted(set(lines))
for l in lines:
    put("proto_message", l)
# The record port's stream: a whole boot's lines, in chunks of 1, 7 and 255 bytes.
stream = "".join(l if l.endswith("\n") else l + "\n" for l in lines[:12])
for chunk in (1, 7, 255):
    put("proto_lines", bytes([chunk]) + stream.encode())
put("proto_lines", bytes([64]) + b"TC1 " + b"x" * 5000 + b"\nTC1 ready\n")

# --- single values (selector byte, then the text; see proto_fields.rs) ---
r = None
for raw in report_lines():
    vmm = json.loads(raw).get("vmm") or {}
    if vmm.get("guest_record"):
        r = vmm
        break
fields = {
    0: [r["guest_record"]["boot_id"]],
    1: ["0123456789abcdef0123456789ABCDEF", "ab" * 32],
    2: ["BENCH_OK", "not_run", "mem_firmware_mismatch"],
    3: ["kvm-clock", "tsc\n"],
    4: ["deadline", "guest_mem_firmware_mismatch", "vmm_kernel_missing"],
    5: ["truecold", "cloud-hypervisor", "serial", "probe", "pvm", "thp", "guest_boot"],
    6: ["tsc-reliable,lpj,console", "backing-thp"],
    7: ["backing-hugetlb"],
    8: ["2", "1024"],
    9: [r["guest_cmdline"] or "truecold.mem=1073741824"],
}
for sel, vals in fields.items():
    for v in vals:
        put("proto_fields", bytes([sel]) + v.encode())

# --- the VMM's stdout ---
for raw in report_lines(1):
    v = json.loads(raw)
    if v.get("vmm"):
        put("vmm_report", json.dumps(v["vmm"], separators=(",", ":")))
put("vmm_report", json.dumps({"schema": r["schema"], "error": {"kind": "kernel-missing", "message": "no kernel"}}))

# --- the probe's summary ---
MAGIC = 0x3142_4F52_5043_5425
put("probe_summary", struct.pack("<7Q", MAGIC, 16 << 30, 8192, 0x1234_5678_9ABC_DEF0, 0, 1, 16))
put("probe_summary", struct.pack("<7Q", MAGIC ^ 1, 0, 0, 0, 0, 0, 0))
put("probe_summary", struct.pack("<6Q", MAGIC, 0, 0, 0, 0, 0))

# --- boot parameters (the layout boot_params.rs reads) ---
def boot(mib, sel, serial, kernel_end, size, header, extra):
    b = struct.pack("<QBB", mib, sel, serial)
    b += struct.pack("<BI", 1, kernel_end) + struct.pack("<BI", 1, size)
    b += bytes([1, len(header)]) + header
    b += struct.pack("<QH", 0x20000, len(extra)) + bytes([1]) + struct.pack("<QQ", 0x4000_0000, size)
    b += bytes([2]) + struct.pack("<QQI", 0, 0xA0000, 1) + struct.pack("<QQI", 0x100000, 0x3FF00000, 1)
    return b + bytes([1]) + extra.encode()

hdr = bytes(range(0x60))
for mib, sel in ((128, 2), (1024, 2), (3072, 3), (16384, 2), (4, 2), (1 << 20, 1)):
    put("boot_params", boot(mib, sel, 0, 0x200_0000, 8 << 20, hdr, "foo=1"))
put("boot_params", boot(256, 2, 3, 0x100_0000, 1 << 20, b"", r["guest_cmdline"] or ""))
put("boot_params", boot(256, 2, 1, 0x100_0000, 1 << 20, b"", "truecold.mem=5 x\x7f"))

# --- the bundle files ---
for p in [f for f in files("samples.csv") if any(k in f for k in ("probe-floor", "nested-linux-sequential", "firecracker"))]:
    rows = read(p).split(b"\n")
    put("proof_samples", b"\n".join(rows[:4]) + b"\n")
    put("proof_samples", struct.pack("<HHB", 4096, 1024, 3) + b"\n".join(rows[:6]) + b"\n")
for p in files("result.json")[:4]:
    put("proof_result", read(p))
for p in files("SHA256SUMS")[:6]:
    put("proof_sums", read(p))
for raw in report_lines(1):
    put("proof_reports", raw + b"\n")
for p in files("arms.json")[:2]:
    put("proof_plans", b"\x00" + read(p))
for p in files("bisect.json"):
    put("proof_plans", b"\x01" + read(p))
for p in files("tune.json"):
    put("proof_plans", b"\x02" + read(p))
for p in files("attribution.jsonl")[:1]:
    put("proof_attribution", b"\n".join(read(p).split(b"\n")[:2]) + b"\n")
for p in files("cmdline.txt")[:4]:
    put("proof_text", read(p))

# --- the devices, as a guest drives them (the op encoding of vmm_bus.rs) ---
DOORBELL, RECORD, EXIT, CHALLENGE, COM1, LSR, I8042D, I8042C, AP, ECHO, SUMMARY = range(11)


def out(port, data):
    out_ = b""
    for i in range(0, max(len(data), 1), 255):
        piece = data[i:i + 255]
        out_ += bytes([port << 4, 1, len(piece)]) + piece
    return out_


def inp(port, n):
    return bytes([(port << 4) | 2, 1, n - 1])


linux = (out(DOORBELL, b"\x01") + out(DOORBELL, b"\x02") + inp(CHALLENGE, 16)
         + out(RECORD, "".join(l for l in lines if l.startswith("TC1 reply")).encode()[:300])
         + out(RECORD, "".join(l for l in lines if l.startswith("TC1 record")).encode()[:600])
         + out(COM1, b"hello\n") + inp(LSR, 1) + out(EXIT, b"\x00"))
put("vmm_bus", b"\x00" + linux)
put("vmm_bus", b"\x02" + out(RECORD, b"TC1 ready boot_id=x\n") + out(I8042C, b"\xfe"))
probe = (out(DOORBELL, b"\x01") + out(AP, b"\x01") + out(DOORBELL, b"\x02") + inp(CHALLENGE, 16)
         + out(ECHO, bytes(16)) + out(SUMMARY, struct.pack("<7Q", MAGIC, 1 << 30, 512, 7, 0, 1, 1))
         + bytes([(11 << 4) | 3, 1]) + struct.pack("<Q", 0xFED00000) + b"\x01\x04"
         + out(EXIT, b"\x00"))
put("vmm_bus", b"\x01" + probe)
