"""Results as a terminal table, JSON, markdown and a bar chart of speedups."""
from __future__ import annotations

import json
from collections import Counter

from benchmarks.peers import PEERS
from benchmarks.runner import OWN

BUSY = 1.2      # cores (CPU time / wall time) above which a variant is marked as threaded


def fmt_time(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us" if s < 1e-5 else f"{s * 1e6:.1f} us"
    if s < 1.0:
        return f"{s * 1e3:.2f} ms" if s < 1e-2 else f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def _steady(rec):
    st = rec.get("steady") if rec else None
    if not st:
        return _status(rec)
    med = st["median_s"]
    spread = (st["q3_s"] - st["q1_s"]) / 2 / med * 100 if med else 0.0
    return f"{fmt_time(med)} ±{spread:.0f}%"


def _status(rec):
    if not rec:
        return "-"
    return {"ok": "-", "not installed": "n/i", "not applicable": "n/a",
            "mismatch": "WRONG", "error": "ERROR", "timed out": "timeout"}.get(rec["status"], rec["status"])


def _busy(rec) -> bool:
    """Whether a variant kept more than BUSY cores busy while timed (CPU / wall time)."""
    return bool(rec) and (rec.get("cores") or 0.0) > BUSY


def _speedup(rec, with_spread=True):
    if not rec or rec.get("speedup") is None:
        return _status(rec)
    star = ("*" if _busy(rec) else "") + ("?" if rec.get("unsettled") else "")
    if not with_spread:
        return f"{rec['speedup']:.2f}x{star}"
    return f"{rec['speedup']:.2f}x{star} [{rec['speedup_q1']:.2f}-{rec['speedup_q3']:.2f}]"


def _mb(rec):
    b = rec.get("peak_memory_bytes") if rec else None
    return "-" if b is None else f"{b / 2**20:.1f}"


def _check(w):
    bad = [f"{n}:{r['status']}" for n, r in w["variants"].items()
           if r["status"] in ("mismatch", "error") and n in OWN]
    return "FAIL " + ",".join(bad) if bad else "ok"


def _over_floor(w, rec) -> str:
    """How far the variant's median is above the memory-bandwidth floor (1.00x: at it)."""
    st = (rec or {}).get("steady")
    if not st or not w.get("floor_s"):
        return "-"
    return f"{st['median_s'] / w['floor_s']:.2f}x"


def rows(results):
    others = [p for p in ("pijit_O2",) + PEERS if any(
        w["variants"].get(p, {}).get("status") not in (None, "not installed")
        for w in results["workloads"])]
    head = ["workload", "size", "numpy", "pijit", "speedup [IQR]", "1st call cold/warm", "graphs/brk",
            "peak MB np/pj", "floor", "pijit/floor", "check"] + [f"{p} x" for p in others]
    body = []
    for w in results["workloads"]:
        v = w["variants"]
        np_, pj = v.get("numpy"), v.get("pijit")
        graphs = "-" if not pj or pj.get("graph_count") is None else \
            f"{pj['graph_count']}/{pj['graph_break_count']}"
        body.append([w["name"], w["size"], _steady(np_), _steady(pj), _speedup(pj),
                     (f"{fmt_time(pj.get('first_call_cold_s'))}/"
                      f"{fmt_time(pj.get('first_call_warm_disk_s'))}") if pj else "-", graphs,
                     f"{_mb(np_)}/{_mb(pj)}", fmt_time(w.get("floor_s")), _over_floor(w, pj),
                     _check(w)]
                    + [_speedup(v.get(p), with_spread=False) for p in others])
    return head, body


def table(results) -> str:
    head, body = rows(results)
    widths = [max(len(str(r[i])) for r in [head] + body) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).ljust(wd) for c, wd in zip(r, widths)).rstrip()  # noqa
    out = [line(head), line(["-" * wd for wd in widths])] + [line(r) for r in body]
    return "\n".join(out + [""] + notes(results))


def notes(results):
    env, bw = results["env"], results.get("bandwidth")
    out = []
    if bw:
        out.append(f"memory bandwidth: copy {bw['copy_bytes_per_s'] / 1e9:.1f} GB/s, triad "
                   f"{bw['triad_bytes_per_s'] / 1e9:.1f} GB/s, read "
                   f"{bw['read_bytes_per_s'] / 1e9:.1f} GB/s ({bw['method']} kernels, 1 thread); "
                   f"floor = (inputs read once + outputs written once) / best of copy and triad, "
                   f"or inputs / read for a workload with no array output")
    blas = env.get("blas") or {}
    pools = blas.get("pools")
    blas_s = ", ".join(f"{p['internal_api']} {p['version']} {p['architecture']} "
                       f"{p['num_threads']} thr" for p in pools) if pools else \
        str(blas.get("build"))
    out.append(f"env: {env['cpu_model']} ({env['cpu_count']} cpus), Python {env['python']}, "
               f"NumPy {env['numpy']}, BLAS {blas_s}, threads {env['threads']}, "
               f"OPENBLAS_CORETYPE={env['openblas_env'].get('OPENBLAS_CORETYPE')}, "
               f"pijit {env['pijit_commit']} jit_level {env['pijit_jit_level']}, "
               f"loadavg {env['loadavg_start']}")
    alloc = env.get("allocator") or {}
    out.append("malloc thresholds pinned (mmap %d MiB, trim %d MiB)" % (
        alloc["mmap_threshold"] >> 20, alloc["trim_threshold"] >> 20) if alloc.get("pinned")
        else f"malloc thresholds not pinned: {alloc.get('reason', 'unknown')}; times may "
             f"depend on the order workloads ran in")
    cfg = results["config"]
    out.append(f"suite {cfg['suite']}{' (tiny sizes)' if cfg['tiny'] else ''}, "
               f"wall time {results['wall_time_s']:.1f} s; speedup = numpy median / pijit "
               f"median, [IQR of paired per-round ratios]; ±% = half the IQR of the samples")
    out.append("1st call = capture + compile + run after pijit.reset: cold = empty kernel disk "
               "cache, warm = kernels on disk (no C compile)")
    if any(_busy(r) for w in results["workloads"] for r in w["variants"].values()):
        out.append(f"* kept more than {BUSY} cores busy while timed (process CPU time / wall "
                   f"time): not a {env['threads']}-thread number")
    for w in results["workloads"]:
        for name, rec in w["variants"].items():
            if rec.get("unsettled") and rec.get("speedup") is not None:
                out.append(f"? {w['name']} [{name}] was timed before it settled "
                           f"({rec['unsettled']}): its samples may mix plain calls in")
    missing = [p for p, a in results["peers"].items() if not a["installed"]]
    if missing:
        out.append(f"peers not installed: {', '.join(missing)}")
    return out + failures(results)


def failures(results):
    """One line per variant that has no speed because it failed, was wrong or was stopped."""
    return [f"{rec['status'].upper()}: {w['name']} [{name}]: {rec['error']}"
            for w in results["workloads"] for name, rec in w["variants"].items()
            if rec["status"] in ("mismatch", "error", "timed out")]


def markdown(results) -> str:
    head, body = rows(results)
    esc = lambda c: str(c).replace("|", "\\|")  # noqa: E731
    lines = ["# pijit benchmark results", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in body]
    lines += [""] + [f"- {n}" for n in notes(results)]
    reasons = []
    for w in results["workloads"]:
        pj = w["variants"].get("pijit") or {}
        seen = Counter((r["reason"], r["lineno"]) for r in pj.get("break_reasons") or [])
        for (reason, lineno), n in seen.items():      # first-seen order; repeats counted
            times = f", {n} times" if n > 1 else ""
            reasons.append(f"- `{w['name']}`: {reason} (line {lineno}{times})")
    if reasons:
        lines += ["", "## pijit graph breaks and fallbacks", ""] + reasons
    return "\n".join(lines) + "\n"


def write_json(results, path):
    with open(path, "w") as f:
        json.dump(results, f, indent=1, default=str)


def plot(results, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--plot needs matplotlib (pip install matplotlib, or pijit's "
                         "'bench' extra)") from None
    backends = [b for b in results["config"]["backends"] if b != "numpy" and any(
        w["variants"].get(b, {}).get("speedup") for w in results["workloads"])]
    if results["config"].get("sizes"):
        return _plot_sweep(results, backends, plt, path)
    names = [w["name"] for w in results["workloads"]]
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(names) * max(1, len(backends)) + 1.5))
    height = 0.8 / max(1, len(backends))
    for i, b in enumerate(backends):
        vals, errs, ys = [], [[], []], []
        for j, w in enumerate(results["workloads"]):
            rec = w["variants"].get(b) or {}
            if rec.get("speedup") is None:
                continue
            ys.append(j + i * height)
            vals.append(rec["speedup"])
            errs[0].append(max(0.0, rec["speedup"] - rec["speedup_q1"]))
            errs[1].append(max(0.0, rec["speedup_q3"] - rec["speedup"]))
        ax.barh(ys, vals, height=height, xerr=errs, label=b)
    ax.axvline(1.0, color="k", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks([j + height * (len(backends) - 1) / 2 for j in range(len(names))])
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xlabel("speedup vs plain NumPy (median, IQR bars; log scale; >1 is faster)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _plot_sweep(results, backends, plt, path):
    """Speedup against size, one panel per sweep workload, one line per variant."""
    from benchmarks import sweep
    per = {b: sweep.series(results, b) for b in backends}
    bases = list(per[backends[0]]) if backends else []
    fig, axes = plt.subplots(1, max(1, len(bases)), figsize=(4.5 * max(1, len(bases)), 4),
                             squeeze=False)
    for ax, base in zip(axes[0], bases):
        for b in backends:
            pts = per[b].get(base, [])
            if not pts:
                continue
            n, med, q1, q3 = zip(*pts)
            ax.plot(n, med, marker="o", label=b)
            ax.fill_between(n, q1, q3, alpha=0.2)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log")
        ax.set_title(base)
        ax.set_xlabel("elements")
        ax.set_ylabel("speedup vs plain NumPy (median, IQR band)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
