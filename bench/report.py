"""Run every benchmark in bench/ and write docs/BENCHMARKS.md.

Every `bench/bench_*.py` whose `--help` offers `--json` is run (its short form by default, the
long form with `--full`), one after the other, with the load average taken just before each run;
a benchmark whose needs are missing here (Docker, pg_createcluster, a redis-server binary, a
PostgreSQL server) is skipped with the reason printed and written. The figures come from each
benchmark's `--json` output; each table says how they were measured, the command, and the
target the issues hold them to.

The results are kept next to the page (docs/BENCHMARKS.json), written with it. With
`--keep-others`, the sections of the benchmarks not run this time are taken from that file, so
`--only` refreshes some sections of the page and keeps the others; the page's header says which
run wrote which section. `--render FILE` writes the page from such a file and runs nothing.

    .venv/bin/python bench/report.py                  # short forms, ~20 minutes on 2 cores
    .venv/bin/python bench/report.py --full           # long forms
    .venv/bin/python bench/report.py --only load,faults --out /tmp/B.md
    .venv/bin/python bench/report.py --only throughput,latency --keep-others
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from report_targets import TARGETS, UNMEASURED, Target

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


@dataclass
class Spec:
    """How to run one benchmark: its short and long arguments, what it needs, its time limit."""

    short: list[str] = field(default_factory=list)
    full: list[str] = field(default_factory=list)
    needs: tuple[str, ...] = ()
    timeout_s: float = 1800


LONG_LOAD = ["--batches", "20", "--trainers", "16"]
ONE_TRAINER = "--layout embedded --trainers 1 --min-batch 256 --max-batch 256".split()
PG = ("postgres", "redis")  # bench_load's postgres layout: a PostgreSQL server, a redis-server
SPECS: dict[str, dict[str, Spec]] = {
    "bench_load": {
        "embedded": Spec(["--layout", "embedded"], ["--layout", "embedded", *LONG_LOAD]),
        "postgres": Spec(["--layout", "postgres"], ["--layout", "postgres", *LONG_LOAD], PG),
        "one-trainer": Spec([*ONE_TRAINER, "--batches", "6"], [*ONE_TRAINER, "--batches", "20"]),
    },
    "bench_faults": {"": Spec(["--short"], [], ("postgres", "pg_createcluster", "redis"), 2400)},
    "bench_latency": {
        "embedded": Spec(["--n", "100", "--api-key"], ["--n", "400", "--api-key"]),
        "postgres": Spec(
            ["--layout", "postgres", "--n", "100"], ["--layout", "postgres", "--n", "400"], PG
        ),
    },
    "bench_throughput": {
        "sqlite": Spec(["--layout", "sqlite"], ["--layout", "sqlite", "--repeats", "10"]),
        "postgres": Spec(
            ["--layout", "postgres"], ["--layout", "postgres", "--repeats", "10"], ("postgres",)
        ),
    },
    "bench_soak": {  # the long forms: 600 s, its default
        "": Spec(["--duration", "120"], []),
        "postgres": Spec(
            ["--layout", "postgres", "--duration", "120"], ["--layout", "postgres"], PG
        ),
    },
    "bench_checkpoint": {
        "": Spec(["--n", "1000", "--rounds", "2"], ["--n", "3000", "--rounds", "4"])
    },
    "bench_metrics": {"": Spec()},  # its defaults: 10 pairs of 256-molecule rounds, ~30 s
    "bench_chem": {"": Spec(["--n", "200", "--n-sim", "60", "--n-dft", "1"], [])},
    "bench_cascade": {"": Spec(["--n", "400"], [])},
    "bench_sandbox": {"": Spec(["--seconds", "8"], ["--mode", "all"], ("docker",))},
    "bench_answer": {"": Spec(["--n", "300"], ["--n", "2000"], PG)},
}


def missing(need: str) -> str | None:
    """Why `need` is not available on this machine, or None."""
    if need == "docker":
        done = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
        return None if done.returncode == 0 else "no Docker engine (`docker info` failed)"
    if need in ("pg_createcluster", "redis"):
        binary = "redis-server" if need == "redis" else need
        return None if shutil.which(binary) else f"no `{binary}` on PATH"
    if need == "postgres":
        try:
            socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
        except OSError:
            return "no PostgreSQL server on 127.0.0.1:5432"
    return None


def machine() -> dict[str, str]:
    cpu = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor() or "unknown",
    )  # fmt: skip
    mem_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal")
    )
    return {
        "cores": str(os.cpu_count()),
        "cpu": cpu,
        "memory": f"{mem_kb / 2**20:.1f} GiB",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def offers_json(path: Path) -> bool:
    done = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=REPO,
        timeout=120, check=False,
    )  # fmt: skip
    return "--json" in done.stdout


def how_measured(path: Path) -> str:
    """The benchmark's docstring without its example commands (indented paragraphs)."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    kept = [p.strip() for p in doc.split("\n\n") if not p.startswith("    ")]
    return "\n\n".join(kept)


@dataclass
class Result:
    """One run of one benchmark variant, and which run of this report made it."""

    bench: str
    variant: str
    command: str
    load_before: str
    seconds: float = 0.0
    rc: int | None = None
    figures: Any = None
    skipped: str | None = None
    tail: str = ""
    written: str = ""  # when the report run that made it ended, "YYYY-MM-DD HH:MM" UTC
    report_command: str = ""
    full: bool = False
    machine: dict[str, str] = field(default_factory=dict)


def run_one(path: Path, variant: str, spec: Spec, full: bool, out_dir: Path) -> Result:
    args = spec.full if full else spec.short  # an empty long form: the benchmark's defaults
    out = out_dir / f"{path.stem}{'-' + variant if variant else ''}.json"
    command = [sys.executable, str(path.relative_to(REPO)), *args, "--json", str(out)]
    shown = " ".join(["python", str(path.relative_to(REPO)), *args, "--json", out.name])
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    result = Result(path.stem, variant, shown, load)
    for need in spec.needs:
        reason = missing(need)
        if reason:
            result.skipped = reason
            print(f"skip {path.stem} {variant}: {reason}", flush=True)
            return result
    print(f"run  {shown} (load average {load})", flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=REPO, capture_output=True, text=True, timeout=spec.timeout_s, check=False
        )
        result.rc, result.tail = done.returncode, (done.stdout + done.stderr)[-3000:]
    except subprocess.TimeoutExpired:
        result.rc, result.tail = -1, f"timed out after {spec.timeout_s:.0f} s"
    result.seconds = time.monotonic() - started
    if out.exists():
        result.figures = json.loads(out.read_text())
    print(f"     rc {result.rc} in {result.seconds:.0f} s", flush=True)
    return result


def load_results(path: Path) -> list[Result]:
    """The results kept in a results file (or in a `--save` file of this report's earlier form)."""
    saved = json.loads(path.read_text())
    results = []
    for row in saved["results"]:
        row.setdefault("machine", saved.get("machine", {}))
        row.setdefault("full", saved.get("full", False))
        row.setdefault("report_command", "python bench/report.py" + " --full" * row["full"])
        results.append(Result(**row))
    return results


def save_results(results: list[Result], path: Path) -> None:
    path.write_text(json.dumps({"results": [asdict(r) for r in results]}, indent=2) + "\n")


def variants(bench: str) -> list[str]:
    return list(SPECS.get(bench, {"": Spec()}))


def page_order(result: Result) -> tuple[str, int]:
    order = variants(result.bench)
    return result.bench, order.index(result.variant) if result.variant in order else -1


def merge(saved: list[Result], fresh: list[Result]) -> list[Result]:
    """The fresh results, and the saved ones of the benchmark variants not run this time (those
    of a benchmark or variant that no longer exists are dropped), in the page's order."""
    ran = {(r.bench, r.variant) for r in fresh}
    kept = [
        r
        for r in saved
        if (r.bench, r.variant) not in ran
        and (BENCH / f"{r.bench}.py").exists()
        and r.variant in variants(r.bench)
    ]
    return sorted([*kept, *fresh], key=page_order)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(flatten(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        flat = {}
        for i, inner in enumerate(value):
            name = inner.get("tier") or inner.get("name") or str(i)
            flat.update(
                flatten({k: v for k, v in inner.items() if k != "tier"}, f"{prefix}[{name}]")
            )
        return flat
    return {prefix: value}


def fmt(value: Any) -> str:
    text = f"{value:.4g}" if isinstance(value, float) else str(value)
    return " ".join(text.split()).replace("|", "\\|")  # one table cell


Rows = dict[str, dict[str, Any]]


def is_table(value: Any) -> bool:
    """One row per name with the same columns of plain values (e.g. per fault, per batch size)."""
    rows = list(value.values()) if isinstance(value, dict) and value else []
    return bool(
        rows
        and all(isinstance(r, dict) and r.keys() == rows[0].keys() for r in rows)
        and rows[0]
        and not any(isinstance(v, dict) for v in rows[0].values())
    )


def tables(figures: Any, prefix: str = "") -> tuple[dict[str, Rows], Any]:
    """The figures that are tables (at any depth, named by their dotted key), and the rest."""
    if not isinstance(figures, dict):
        return {}, figures
    found: dict[str, Rows] = {}
    rest: dict[str, Any] = {}
    for name, value in figures.items():
        key = f"{prefix}.{name}" if prefix else str(name)
        if is_table(value):
            found[key] = value
            continue
        inner_tables, inner_rest = tables(value, key)
        found.update(inner_tables)
        if inner_rest != {} or not inner_tables:
            rest[name] = inner_rest
    return found, rest


def pivot_table(name: str, rows: Rows) -> list[str]:
    columns = list(next(iter(rows.values())))
    lines = [f"| {name} | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for row, values in rows.items():
        lines.append(f"| {fmt(row)} | " + " | ".join(fmt(values[c]) for c in columns) + " |")
    return [*lines, ""]


def verdict(target: Target, figures: dict[str, Any]) -> str:
    if target.held_to.startswith("reported"):
        return "reported"
    try:
        met = target.check(figures)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return "n/a"
    return "met" if met else "**missed**"


def describe(info: dict[str, str]) -> str:
    if not info:
        return "not recorded"
    return (
        f"{info['cores']} cores ({info['cpu']}), {info['memory']} memory, {info['os']}, "
        f"Python {info['python']}"
    )


def when(written: str) -> str:
    return f"on {written} UTC" if written else "at a time not recorded"


def header(results: list[Result], page_command: str) -> list[str]:
    """When, how and where the figures were measured: one report run, or the runs it merged."""
    runs: dict[tuple[str, str, bool], list[Result]] = {}
    for result in results:
        runs.setdefault((result.written, result.report_command, result.full), []).append(result)
    machines = {describe(r.machine) for r in results}
    lines = ["# Benchmarks", ""]
    if len(runs) <= 1:
        written, command, full = next(iter(runs), ("", page_command, False))
        lines += [
            f"Written by `{command}` {when(written)} ({'long' if full else 'short'} forms). "
            "Run it again to refresh this page.",
            "",
        ]
    else:
        lines += [
            f"Put together on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `{page_command}` from "
            "the runs below; each section was written by one of them (its date is under its "
            "command). Run `python bench/report.py` to refresh every section.",
            "",
        ]
        for (written, command, full), members in sorted(runs.items()):
            names = ", ".join(dict.fromkeys(r.bench for r in members))
            where = f"; machine: {describe(members[0].machine)}" if len(machines) > 1 else ""
            form = "long" if full else "short"
            lines.append(f"- `{command}` {when(written)} ({form} forms): {names}{where}")
        lines.append("")
    if len(machines) == 1:
        lines += [f"Machine: {machines.pop()}.", ""]
    return lines


def render(results: list[Result], page_command: str) -> str:
    lines = header(results, page_command)
    merged = len({(r.written, r.report_command, r.full) for r in results}) > 1
    lines += [
        "**These figures are noisy.** This machine's 2 cores are shared with other engineers "
        "running tests, so absolute figures move from run to run with the load average (given "
        "before each benchmark). Compare ratios measured within one run (service vs bare tier "
        "code, pool vs `docker run`, keyed vs keyless), not absolute figures across runs.",
        "",
    ]
    by_bench: dict[str, list[Result]] = {}
    for result in results:
        by_bench.setdefault(result.bench, []).append(result)
    for bench, runs in by_bench.items():
        path = BENCH / f"{bench}.py"
        lines += [f"## {bench}", "", how_measured(path) if path.exists() else "", ""]
        for result in runs:
            title = f"### {bench} {result.variant}".rstrip()
            lines += [title, ""] if result.variant else []
            lines += [f"Command: `{result.command}`  "]
            if merged:
                form = "long" if result.full else "short"
                lines += [f"Written {when(result.written)} ({form} form)  "]
            lines += [f"Load average before (1/5/15 min): {result.load_before}" + (
                f"; ran {result.seconds:.0f} s, exit code {result.rc}"
                if result.rc is not None else ""), ""]  # fmt: skip
            if result.skipped:
                lines += [f"Skipped: {result.skipped}.", ""]
                continue
            if result.figures is None:
                lines += ["No figures (the run failed):", "", "```", result.tail, "```", ""]
                continue
            if result.rc:
                lines += ["The run exited with an error; its last output:", "", "```"]
                lines += [result.tail[-1500:], "```", ""]
            lines += figure_tables(bench, result.variant, result.figures)
    lines += ["## Targets no benchmark here measures yet", ""]
    lines += [f"- {name}" for name in UNMEASURED]
    return "\n".join(lines) + "\n"


def figure_tables(bench: str, variant: str, figures: Any) -> list[str]:
    """The targets' table, then the figures: tables as tables, the rest one figure a row."""
    lines: list[str] = []
    flat = flatten(figures)
    targets = [t for t in TARGETS.get(bench, []) if t.applies_to(variant)]
    if targets:
        lines += ["| target | figure | held to | source | status |", "|---|---|---|---|---|"]
        for t in targets:
            try:
                shown = t.show(flat) if t.show else "-"
            except (KeyError, TypeError, ValueError):
                shown = "-"
            lines.append(f"| {t.name} | {shown} | {t.held_to} | {t.source} | {verdict(t, flat)} |")
        lines.append("")
    found, rest = tables(figures)
    for name, rows in found.items():
        lines += pivot_table(name, rows)
    lines += ["| figure | value |", "|---|---|"]
    lines += [f"| {fmt(k)} | {fmt(v)} |" for k, v in flatten(rest).items()]
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--full", action="store_true", help="long forms of every benchmark")
    parser.add_argument("--only", help="comma-separated names, e.g. load,faults (bench_ optional)")
    parser.add_argument(
        "--out", type=Path, default=REPO / "docs" / "BENCHMARKS.md",
        help="the page; its results are kept next to it, as .json",
    )  # fmt: skip
    parser.add_argument(
        "--keep-others", action="store_true",
        help="keep the page's sections of the benchmarks not run (from the results next to it)",
    )  # fmt: skip
    parser.add_argument("--render", type=Path, help="write the page from a results file, run none")
    args = parser.parse_args()
    page_command = shlex.join(["python", "bench/report.py", *sys.argv[1:]])
    results_file = args.out.with_suffix(".json")
    if args.render:
        results = load_results(args.render)
    else:
        results = run(args.only, args.full)
        written = f"{datetime.now(UTC):%Y-%m-%d %H:%M}"
        info = machine()
        for result in results:
            result.written, result.full, result.machine = written, args.full, info
            result.report_command = page_command
        if args.keep_others:
            if results_file.exists():
                results = merge(load_results(results_file), results)
            else:
                print(f"no {results_file} to keep sections from: the page holds this run's only")
    args.out.write_text(render(results, page_command))
    save_results(results, results_file)
    print(f"wrote {args.out} and {results_file}")


def run(only: str | None, full: bool) -> list[Result]:
    """Run the benchmarks (those named in `only`, or all), one after the other."""
    wanted = {w if w.startswith("bench_") else f"bench_{w}" for w in (only or "").split(",")}
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        for path in sorted(BENCH.glob("bench_*.py")):
            if only and path.stem not in wanted:
                continue
            if not offers_json(path):
                print(f"skip {path.stem}: it has no --json option", flush=True)
                results.append(Result(path.stem, "", path.name, "-", skipped="no --json option"))
                continue
            for variant, spec in SPECS.get(path.stem, {"": Spec()}).items():
                results.append(run_one(path, variant, spec, full, Path(tmp)))
    return results


if __name__ == "__main__":
    main()
