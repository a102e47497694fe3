#!/usr/bin/env python3
"""Checks a trace written by ferry::profiler (Profile::save, FERRY_PROFILE,
a sample's --profile) against Note [Trace layout] in runtime/profiler/trace.cpp:

  - it is JSON in Chrome's trace event format, every event with its fields;
  - slices ("X") on each track nest (a viewer drops slices that overlap
    without nesting), and each has a duration >= 0;
  - every flow arrow has both ends: its start inside a host slice, its end on
    a device track at or after the start's enqueue (the device clocks are
    mapped so that they cannot be early: Note [Vulkan timing]; --clock-slack-us
    allows an error);
  - memory counters never go negative;
  - with --device D: D has a process and op slices with durations > 0;
  - with --range NAME: a host range of that name holds at least one op or copy.

Usage: check_trace.py TRACE.json [--device D ...] [--range NAME ...]
Prints a summary; exits 1 with the reasons when a check fails.
"""
import argparse
import collections
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--device", action="append", default=[])
    ap.add_argument("--range", action="append", default=[])
    ap.add_argument("--clock-slack-us", type=float, default=0.0)
    a = ap.parse_args()

    errors = []
    try:
        with open(a.trace) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print(f"check_trace: {a.trace}: not readable JSON: {e}")
        return 1
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        print(f"check_trace: {a.trace}: no traceEvents list")
        return 1

    processes = {}
    tracks = collections.defaultdict(list)
    flows = collections.defaultdict(dict)
    counters = 0
    need = {"X": ("name", "ts", "dur", "pid", "tid"), "s": ("id", "ts", "pid", "tid"),
            "f": ("id", "ts", "pid", "tid"), "C": ("name", "ts", "pid", "args"),
            "M": ("name", "pid", "args")}
    for i, e in enumerate(events):
        ph = e.get("ph")
        if ph not in need:
            errors.append(f"event {i}: unknown phase {ph!r}")
            continue
        missing = [k for k in need[ph] if k not in e]
        if missing:
            errors.append(f"event {i} ({ph}): missing {missing}")
            continue
        if ph == "M" and e["name"] == "process_name":
            processes[e["pid"]] = e["args"]["name"]
        elif ph == "X":
            if e["dur"] < 0:
                errors.append(f"slice {e['name']!r}: negative duration")
            tracks[(e["pid"], e["tid"])].append(e)
        elif ph in "sf":
            if ph in flows[e["id"]]:
                errors.append(f"flow {e['id']}: two '{ph}' ends")
            flows[e["id"]][ph] = e
        elif ph == "C":
            counters += 1
            for k, v in e["args"].items():
                if v < 0:
                    errors.append(f"counter {e['name']}.{k} is negative at {e['ts']}")

    # Slices on one track must nest. Timestamps are microseconds as doubles:
    # allow a nanosecond of rounding.
    eps = 1e-3
    for key, slices in tracks.items():
        slices.sort(key=lambda s: (s["ts"], -s["dur"]))
        stack = []
        for s in slices:
            end = s["ts"] + s["dur"]
            while stack and stack[-1] <= s["ts"] + eps:
                stack.pop()
            if stack and end > stack[-1] + eps:
                errors.append(f"track {key}: slice {s['name']!r} at {s['ts']} overlaps the "
                              f"slice around it without nesting")
                break
            stack.append(end)

    host_pid = next((p for p, n in processes.items() if n == "host"), None)
    if host_pid is None:
        errors.append("no 'host' process")

    def inside(e, pid, tid):
        return any(s["ts"] - eps <= e["ts"] <= s["ts"] + s["dur"] + eps
                   for s in tracks.get((pid, tid), []))

    for fid, ends in flows.items():
        if set(ends) != {"s", "f"}:
            errors.append(f"flow {fid}: only {sorted(ends)}")
            continue
        s, f = ends["s"], ends["f"]
        if s["pid"] != host_pid or not inside(s, s["pid"], s["tid"]):
            errors.append(f"flow {fid}: its start is not inside a host slice")
        if f["pid"] == host_pid or not inside(f, f["pid"], f["tid"]):
            errors.append(f"flow {fid}: its end is not inside a device slice")
        if f["ts"] + a.clock_slack_us < s["ts"]:
            errors.append(f"flow {fid}: the device ran it {s['ts'] - f['ts']:.1f} us before "
                          f"the host enqueued it")

    names = {n: p for p, n in processes.items()}
    for d in a.device:
        pid = names.get(d)
        if pid is None:
            errors.append(f"no process for device {d} (processes: {sorted(names)})")
            continue
        ops = [s for (p, _), ss in tracks.items() if p == pid for s in ss]
        if not ops:
            errors.append(f"{d}: no slices")
        elif not any(s["dur"] > 0 for s in ops):
            errors.append(f"{d}: every slice has duration 0")
    for r in a.range:
        ranges = [s for (p, t), ss in tracks.items() if p == host_pid for s in ss
                  if s["name"] == r and s.get("cat") == "range"]
        if not ranges:
            errors.append(f"no range named {r!r}")
            continue
        work = [s for (p, t), ss in tracks.items() if p == host_pid for s in ss
                if s.get("cat") in ("op", "copy")]
        if not any(g["ts"] <= o["ts"] and o["ts"] + o["dur"] <= g["ts"] + g["dur"] + eps
                   for g in ranges for o in work):
            errors.append(f"range {r!r} holds no op or copy")

    slices = sum(len(v) for v in tracks.values())
    print(f"check_trace: {a.trace}: {len(events)} events, {slices} slices on {len(tracks)} "
          f"tracks, {len(flows)} flows, {counters} counter samples, processes "
          f"{sorted(names)}")
    for e in errors[:20]:
        print(f"  FAIL: {e}")
    if len(errors) > 20:
        print(f"  ... and {len(errors) - 20} more")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
