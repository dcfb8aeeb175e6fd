"""The targets check, the stdout tables, and the bar chart (matplotlib is imported only here,
inside `plot`)."""

from __future__ import annotations

from typing import Any

from _cases import FUNCTION, IMPLS, NATIVE, TARGETS, TF

METRICS = {
    "fwd_bwd": "fwd+bwd",
    "no_grad_forward": "no-grad forward",
    "compiled_fwd_bwd": "compiled fwd+bwd",
}
# A ratio to the op decorated once, not to the Function (`_redecorate.compare`).
REDECORATED = {"redecorated": "decorated in forward / decorated once"}
MEMORY_POINTS = {
    "after_forward": "after forward",
    "after_backward": "after backward, y alive",
    "after_drop": "after del y, no gc",
}
SHORT = {NATIVE: "native", FUNCTION: "Function", TF: "tf_compat"}


def ratio(case: dict[str, Any], metric: str, impl: str) -> float | None:
    block = case.get("compiled" if metric == "compiled_fwd_bwd" else metric, {})
    return block.get(impl, {}).get("ratio")


def targets(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every target in `TARGETS` that this run measured, with the value and whether it is met."""
    checks: list[dict[str, Any]] = []
    for case in cases:
        key, title = case["key"], case["title"]
        for metric, label in {**METRICS, **REDECORATED}.items():
            target = TARGETS.get((key, metric))
            if target is None or (metric == "compiled_fwd_bwd" and "compiled" not in case):
                continue
            value = ratio(case, metric, TF)
            checks.append(
                {
                    "case": key,
                    "what": f"{title}: {label} ratio <= {target:.2f}",
                    "target": target,
                    "value": value,
                    "met": value is not None and value <= target,
                }
            )
        memory = case.get("memory")
        if memory:
            tf, reference = memory[TF], memory[FUNCTION]
            checks.append(
                {
                    "case": key,
                    "what": f"{title}: bytes after forward == Function's",
                    "target": reference["after_forward"],
                    "value": tf["after_forward"],
                    "met": tf["after_forward"] == reference["after_forward"],
                }
            )
            for point in ("after_backward", "after_drop"):
                checks.append(
                    {
                        "case": key,
                        "what": f"{title}: bytes {MEMORY_POINTS[point]} == 0",
                        "target": 0,
                        "value": tf[point],
                        "met": tf[point] == 0,
                    }
                )
        compiled = case.get("compiled", {}).get(TF)
        if compiled is not None:
            for field, want in (("graphs", 1), ("recompiles", 0)):
                value = compiled.get(field)
                checks.append(
                    {
                        "case": key,
                        "what": f"{title}: compiled {field} == {want}",
                        "target": want,
                        "value": value if value is not None else compiled.get("error"),
                        "met": value == want,
                    }
                )
    return checks


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024**2:.1f} MiB"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _micro(block: dict[str, Any]) -> str:
    seconds = block.get("seconds_per_call")
    return "-" if seconds is None else f"{seconds * 1e6:.1f} us"


def _target(case: dict[str, Any], metric: str) -> str:
    target = TARGETS.get((case["key"], metric))
    value = ratio(case, metric, TF)
    if target is None:
        return ""
    verdict = "?" if value is None else ("ok" if value <= target else "MISS")
    return f"<={target:.2f} {verdict}"


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            cell.ljust(width) if i < left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def text(report: dict[str, Any]) -> str:
    meta, cases = report["meta"], report["cases"]
    out = [
        f"tf_compat_grad {meta['tf_compat_grad']} benchmark ({meta['mode']} run, {meta['date']}, "
        f"torch {meta['torch']}, "
        f"{meta['cpu_count']} CPUs, {meta['torch_threads']} torch thread(s), "
        f"{meta['elapsed_seconds']:.0f} s)",
        f"Ratios: median over {meta['repetitions']} repetitions of (time / hand-written "
        "Function's time in the same repetition), implementations interleaved in a shuffled "
        f"order, {meta['clock']} time. Function column: its time per call.",
        "",
    ]
    rows = []
    for case in cases:
        row = [case["title"]]
        for metric in ("fwd_bwd", "no_grad_forward"):
            block = case[metric]
            row += [
                _micro(block[FUNCTION]),
                _ratio(block[NATIVE]["ratio"]),
                _ratio(block[TF]["ratio"]),
                _target(case, metric),
            ]
        rows.append(row)
    header = ["case"]
    for label in ("fwd+bwd", "no-grad fwd"):
        header += [f"{label}: Function", "native", "tf_compat", "target"]
    out += _table(header, rows)

    redecorated = [case for case in cases if "redecorated" in case]
    if redecorated:
        out += [
            "",
            "Decorated in forward: a new function of the op's code decorated on every fwd+bwd "
            "step, against the op decorated once (its time per call, and the ratio)",
        ]
        rows = [
            [
                case["title"],
                _micro(case["redecorated"]["decorated once"]),
                _micro(case["redecorated"][TF]),
                _ratio(ratio(case, "redecorated", TF)),
                _target(case, "redecorated"),
            ]
            for case in redecorated
        ]
        out += _table(["case", "decorated once", "in forward", "ratio", "target"], rows)

    if any("memory" in case for case in cases):
        out += ["", "Bytes kept alive by the graph (storages not held by the benchmark itself)"]
        header = ["case"] + [
            f"{SHORT[impl]}" if i else f"{label}: {SHORT[impl]}"
            for label in ("fwd", "bwd, y alive", "del y")
            for i, impl in enumerate(IMPLS)
        ]
        rows = [
            [case["title"]]
            + [_bytes(case["memory"][impl][point]) for point in MEMORY_POINTS for impl in IMPLS]
            for case in cases
            if "memory" in case
        ]
        out += _table(header, rows)

    compiled_cases = [case for case in cases if "compiled" in case]
    if compiled_cases:
        backend = compiled_cases[0]["compiled"]["backend"]
        out += [
            "",
            f"torch.compile(fullgraph=True, backend={backend!r}): graphs after call 1, "
            "recompiles in calls 2-10 and Dynamo guards (native/Function/tf_compat; guards "
            "as torch._dynamo.explain counts them), fwd+bwd ratio to the compiled Function",
        ]
        rows = []
        for case in compiled_cases:
            block = case["compiled"]

            def field(name: str, block: dict[str, Any] = block) -> str:
                return "/".join(
                    "err" if "error" in block[impl] else str(block[impl].get(name, "-"))
                    for impl in IMPLS
                )

            rows.append(
                [
                    case["title"],
                    field("graphs"),
                    field("recompiles"),
                    field("guards"),
                    _micro(block[FUNCTION]),
                    _ratio(block[NATIVE].get("ratio")),
                    _ratio(block[TF].get("ratio")),
                    _target(case, "compiled_fwd_bwd"),
                ]
            )
        out += _table(
            ["case", "graphs", "recompiles", "guards", "Function", "native", "tf_compat", "target"],
            rows,
        )
        for case in compiled_cases:
            for impl in IMPLS:
                if "error" in case["compiled"][impl]:
                    out.append(f"  {case['title']} {impl}: {case['compiled'][impl]['error']}")

    checks = report["targets"]
    met = sum(check["met"] for check in checks)
    out += ["", f"Performance targets: {met} of {len(checks)} met"]
    for check in checks:
        if not check["met"]:
            value = check["value"]
            shown = f"{value:.2f}" if isinstance(value, float) else str(value)
            out.append(f"  MISS  {check['what']}: {shown}")
    return "\n".join(out)


TABLE_START = "<!-- benchmark-table:start (generated by benchmarks/run.py --docs) -->"
TABLE_END = "<!-- benchmark-table:end -->"


def _cell(case: dict[str, Any], metric: str) -> str:
    """`ratio (library us / Function us)` for one metric of one case."""
    block = case.get("compiled" if metric == "compiled_fwd_bwd" else metric, {})
    mine, theirs = block.get(TF), block.get(FUNCTION)
    if not mine or not theirs:
        return "-"
    return f"{_ratio(mine.get('ratio'))} ({_micro(mine)} / {_micro(theirs)})"


def docs_table(report: dict[str, Any]) -> str:
    """docs/performance.md's benchmark table (between `TABLE_START` and `TABLE_END`), from a run's
    JSON: each ratio with the library's and the Function's microseconds per call."""
    meta = report["meta"]
    backend = next((c["compiled"]["backend"] for c in report["cases"] if "compiled" in c), "")
    lines = [
        f"Run of {meta['date']} at commit {meta['tf_compat_grad']}: torch {meta['torch']}, "
        f"Python {meta['python']}, {meta['cpu_count']} CPU cores, {meta['torch_threads']} torch "
        "thread. Each cell: the ratio to the Function (library us / Function us per call).",
        "",
        f"| case | fwd+bwd | no-grad forward | compiled ({backend}) fwd+bwd |",
        "|---|---|---|---|",
    ]
    for case in report["cases"]:
        cells = [_cell(case, metric) for metric in METRICS]
        lines.append(f"| {case['title']} | {' | '.join(cells)} |")
    return "\n".join(lines)


def plot(report: dict[str, Any], path: str) -> None:
    """Grouped bars of the ratios, one panel per metric, the Function at 1.0, targets marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    cases = report["cases"]
    metrics = [m for m in METRICS if any(ratio(c, m, FUNCTION) is not None for c in cases)]
    fig, axes = plt.subplots(
        len(metrics), 1, figsize=(max(9, 1.6 * len(cases)), 3.1 * len(metrics) + 0.8),
        squeeze=False,
    )  # fmt: skip
    width = 0.38
    colors = {NATIVE: "#a0a0a0", TF: "#1f77b4"}
    for ax, metric in zip(axes[:, 0], metrics, strict=True):
        top = 1.2
        for x, case in enumerate(cases):
            block = case.get("compiled" if metric == "compiled_fwd_bwd" else metric, {})
            for k, impl in enumerate((NATIVE, TF)):
                center = x + (k - 0.5) * width
                figures = block.get(impl, {})
                value = figures.get("ratio")
                if value is None:
                    ax.text(center, 0.05, "n/a", ha="center", fontsize=7)
                    continue
                q1, q3 = figures["ratio_q1"], figures["ratio_q3"]
                ax.bar(center, value, width, color=colors[impl])
                ax.errorbar(center, value, [[value - q1], [q3 - value]], color="black",
                            capsize=2, linewidth=0.8)  # fmt: skip
                ax.text(center, max(q3, value) + 0.03, f"{value:.2f}", ha="center", fontsize=7)
                top = max(top, q3, value)
            target = TARGETS.get((case["key"], metric))
            if target is not None:
                ax.hlines(target, x, x + width, colors="red", linewidth=2.5)
                ax.text(x + width, target, f" {target:.2f}", color="red", fontsize=7,
                        va="center")  # fmt: skip
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
        ax.set_ylim(0, top * 1.15)
        ax.set_xlim(-0.6, len(cases) - 0.4)
        ax.set_ylabel("ratio to Function")
        ax.set_title(METRICS[metric], fontsize=10, loc="left")
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels([c["label"] for c in cases], fontsize=8)
    meta = report["meta"]
    handles = [
        Patch(color=colors[NATIVE], label="native autograd"),
        Patch(color=colors[TF], label="tf_compat_grad"),
        Line2D([], [], color="black", linestyle="--", label="hand-written Function = 1.00"),
        Line2D([], [], color="red", linewidth=2.5, label="target"),
    ]
    fig.legend(handles=handles, loc="upper center", ncol=4, fontsize=8,
               bbox_to_anchor=(0.5, 0.955), frameon=False)  # fmt: skip
    fig.suptitle(
        "tf_compat_grad vs hand-written autograd.Function: median of per-repetition ratios, "
        f"whiskers = quartiles\n({meta['mode']} run, {meta['date']}, torch {meta['torch']}, "
        f"{meta['torch_threads']} thread(s), {meta['clock']} time)",
        fontsize=9,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    fig.savefig(path, dpi=110)
    plt.close(fig)
