#!/usr/bin/env python3
"""Instructions per packet that the engine spends on bounds checks (and other panic
guards), per function: the executed conditional jumps to a block that calls a panic
function, each with the compare right before it. A measure of what indexing with
`get_unchecked` would save, taken from callgrind runs, so it does not depend on the
machine's load: one run of the scenario minus one that only builds its packets
(WEFT_PROFILE_POOL_ONLY=1), as scripts/instructions.sh counts.

Usage: scripts/bounds_checks.py [PACKETS] ENGINE:FLOWS:MODE:POLICY[:ENV=VALUE...]
  (the scenario syntax of scripts/instructions.sh; PACKETS defaults to 200000)

Needs valgrind, objdump, readelf and nm (binutils). Builds the engine_profile example.
"""
import collections
import os
import re
import subprocess
import sys


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


USAGE = "usage: scripts/bounds_checks.py [PACKETS] ENGINE:FLOWS:MODE:POLICY[:ENV=VALUE...]"


def run_callgrind(binary, packets, scenario, out, extra_env):
    parts = scenario.split(":")
    if len(parts) < 4:
        die(f"scenario {scenario!r}: want ENGINE:FLOWS:MODE:POLICY[:ENV=VALUE...]")
    engine, flows, mode, policy, *envs = parts
    env = dict(os.environ)
    for e in envs:
        if "=" not in e:
            die(f"scenario {scenario!r}: {e!r} is not ENV=VALUE")
        k, v = e.split("=", 1)
        env[k] = v
    env.update(extra_env)
    subprocess.run(
        ["valgrind", "--tool=callgrind", "--dump-instr=yes", f"--callgrind-out-file={out}",
         binary, engine, str(packets), flows, mode, policy],
        env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def executed(cg_file):
    """Self cost per instruction address (calls' inclusive costs left out)."""
    cost = collections.Counter()
    pos = 0
    in_call = False
    for line in open(cg_file):
        if line.startswith("calls="):
            in_call = True
            continue
        m = re.match(r"^(0x[0-9a-f]+|\+\d+|-\d+|\*)\s+\S+\s+(\d+)", line)
        if m:
            a = m.group(1)
            if a.startswith("0x"):
                pos = int(a, 16)
            elif a != "*":
                pos += int(a)
            if in_call:
                in_call = False
                continue
            cost[pos] += int(m.group(2))
    return cost


def panic_targets(binary):
    """Symbols by address, and what each GOT slot points at (calls into std go through it)."""
    syms = {}
    for line in subprocess.run(["nm", binary], capture_output=True, text=True).stdout.splitlines():
        f = line.split()
        if len(f) == 3:
            syms[int(f[0], 16)] = f[2]
    got = {}
    relocs = subprocess.run(["readelf", "-rW", binary], capture_output=True, text=True).stdout
    for line in relocs.splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "R_X86_64_RELATIVE":
            got[int(f[0], 16)] = syms.get(int(f[3], 16), "?")
    return syms, got


def main():
    args = sys.argv[1:]
    packets = 200000
    if args and args[0].isdigit():
        packets = int(args.pop(0))
    if len(args) != 1:
        die(USAGE)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "weft-core", "--example",
                    "engine_profile"], cwd=root, check=True)
    binary = os.path.join(root, "target/release/examples/engine_profile")
    out = f"/tmp/weft-bounds-{os.getpid()}.cg"
    run_callgrind(binary, packets, args[0], out, {})
    cost = executed(out)
    run_callgrind(binary, packets, args[0], out, {"WEFT_PROFILE_POOL_ONLY": "1"})
    setup = executed(out)
    os.unlink(out)
    for a, c in setup.items():
        cost[a] -= c
    _, got = panic_targets(binary)
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary],
                         capture_output=True, text=True).stdout
    insns, fn = [], None
    for line in dis.splitlines():
        m = re.match(r"^([0-9a-f]+) <(.*)>:", line)
        if m:
            fn = m.group(2)
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2), m.group(3), fn))
    index = {a: i for i, (a, _, _, _) in enumerate(insns)}

    def panics(target):
        i = index.get(target)
        if i is None:
            return False
        for a, op, arg, _ in insns[i:i + 14]:
            if op.startswith("call"):
                m = re.search(r"# ([0-9a-f]+)", arg)
                name = got.get(int(m.group(1), 16), "") if m else arg
                return any(k in name for k in ("panic", "slice_index", "assert_failed"))
            if op.startswith("j") or op == "ret":
                return False
        return False

    per_fn = collections.Counter()
    for i, (a, op, arg, f) in enumerate(insns):
        if op.startswith("j") and op != "jmp" and cost.get(a, 0) > 0:
            m = re.match(r"([0-9a-f]+)", arg)
            if m and panics(int(m.group(1), 16)):
                per_fn[f] += cost[a] + max(cost.get(insns[i - 1][0], 0), 0)
    demangled = {}
    names = list(per_fn)
    if names:
        filt = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                              text=True).stdout.splitlines()
        demangled = dict(zip(names, filt))
    engine = {f: c for f, c in per_fn.items() if "weft_core" in demangled.get(f, f)}
    print(f"{args[0]}: {sum(engine.values()) / packets:.1f} instructions a packet in "
          "weft_core's bounds checks (jump and compare)")
    for f, c in sorted(engine.items(), key=lambda x: -x[1])[:12]:
        if c / packets < 0.05:
            break
        name = re.sub(r"::h[0-9a-f]{16}$", "", demangled.get(f, f))
        print(f"{c / packets:8.1f}  {name[:110]}")


if __name__ == "__main__":
    main()
