#!/usr/bin/env python3
"""Fold a perf profile of a PodDB worker by stored procedure and API call.

Reads a perf.data recorded with --call-graph dwarf (it runs `perf script`
itself) and attributes every sample to the procedure it ran in (the first
frame named p_*), the PodDB call inside it (the outermost pod_* frame below
the procedure) and, with --leaf, only the samples whose innermost frames are
given functions. `perf report` groups by function, which hides *which*
operation a descent belongs to (this is how every prefetched key was found
to be descended to twice, once by the prefetch and once by its read).

  tools/experiments/fold-profile.py perf.data
  tools/experiments/fold-profile.py --leaf key_bound,descend perf.data
  tools/experiments/fold-profile.py --path --leaf lock_row perf.data

Record a worker like docs/performance.md, "Profiling", shows; only the
worker threads' samples are folded (comm pod-worker*).
"""
import argparse
import collections
import os
import subprocess
import sys

API_SKIP = {"pod_call", "pod_bench_work"}


def perf_script(path):
    """The text of `perf script -F comm,ip,sym` of a perf.data."""
    try:
        return subprocess.run(["perf", "script", "-i", path, "-F", "comm,ip,sym"],
                              capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        sys.exit("fold-profile: perf is not installed")
    except subprocess.CalledProcessError as e:
        sys.exit(f"fold-profile: perf script -i {path} failed: {e.stderr.strip()}")


def samples(out):
    """Yield (comm, frames, n_inner) per sample of perf script's text: the
    frames' function names, innermost first, and how many of them belong to
    the function the sample is in (the first one that is not inlined, with
    its inlined callees)."""
    for block in out.split("\n\n"):
        lines = [l for l in block.split("\n") if l.strip()]
        if not lines:
            continue
        comm = lines[0].split()[0] if not lines[0].startswith(("\t", " ")) else "?"
        frames, n_inner = [], 0
        for l in lines[1:]:
            parts = l.split()
            if len(parts) >= 2:
                frames.append(parts[1].split("+")[0])
                if not n_inner and "(inlined)" not in l:
                    n_inner = len(frames)
        yield comm, frames, n_inner or len(frames)


def main():
    ap = argparse.ArgumentParser(
        description="Fold a perf profile of PodDB workers by procedure and API call.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("perf_data", help="a perf.data recorded with --call-graph dwarf (with "
                    "--script: the text of `perf script -F comm,ip,sym` of one)")
    ap.add_argument("--script", action="store_true",
                    help="perf_data is perf script's text already (from another machine, say)")
    ap.add_argument("--leaf", default="",
                    help="comma-separated functions: fold only the samples taken in one of "
                         "them or in what the compiler inlined into it (e.g. key_bound,descend)")
    ap.add_argument("--path", action="store_true",
                    help="also name the frames between the API call and the leaf")
    ap.add_argument("--top", type=int, default=30, help="rows to print (default 30)")
    a = ap.parse_args()
    leafs = {f for f in a.leaf.split(",") if f}

    total = 0
    by_proc = collections.Counter()
    folded = collections.Counter()
    if a.script:
        try:
            text = open(a.perf_data).read()
        except OSError as e:
            sys.exit(f"fold-profile: {a.perf_data}: {e.strerror}")
    else:
        text = perf_script(a.perf_data)
    for comm, fr, n_inner in samples(text):
        if not comm.startswith("pod-worker") or not fr:
            continue
        total += 1
        proc = next((f for f in fr if f.startswith("p_")), "(no procedure)")
        by_proc[proc] += 1
        if leafs and not any(f in leafs for f in fr[:n_inner]):
            continue
        calls = [f for f in fr if f.startswith("pod_") and f not in API_SKIP]
        call = calls[-1] if calls else "(no call)"
        key = (proc, call)
        if a.path:
            inner = fr[: fr.index(call)] if call in fr else fr
            key += ("/".join(reversed(inner[1:5])) or "-",)
        folded[key] += 1
    if not total:
        sys.exit("fold-profile: no samples of a pod-worker thread in " + a.perf_data)
    print(f"{total} worker samples")
    print("by procedure:")
    for p, n in by_proc.most_common(10):
        print(f"  {100 * n / total:5.1f}%  {p}")
    what = f"samples in {', '.join(sorted(leafs))}" if leafs else "all samples"
    print(f"{what}, by procedure and call ({100 * sum(folded.values()) / total:.1f}% of all):")
    for k, n in folded.most_common(a.top):
        print(f"  {100 * n / total:5.1f}%  " + "  ".join(k))
    return 0


if __name__ == "__main__":
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import explib  # noqa: E402
    sys.exit(explib.exit_status(main))
