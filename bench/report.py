"""Run every benchmark in bench/ and write docs/BENCHMARKS.md.

Every `bench/bench_*.py` whose `--help` offers `--json` is run (its short form by default, the
long form with `--full`), one after the other, with the load average taken just before each run;
a benchmark whose needs are missing here (Docker, pg_createcluster, a redis-server binary, a
PostgreSQL server) is skipped with the reason printed and written. The figures come from each
benchmark's `--json` output; each table says how they were measured, the command, and the
target the issues hold them to.

    .venv/bin/python bench/report.py                  # short forms, ~15 minutes on 2 cores
    .venv/bin/python bench/report.py --full           # long forms
    .venv/bin/python bench/report.py --only load,faults --out /tmp/B.md
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
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
SPECS: dict[str, dict[str, Spec]] = {
    "bench_load": {
        "embedded": Spec(["--layout", "embedded"], ["--layout", "embedded", *LONG_LOAD]),
        "postgres": Spec(
            ["--layout", "postgres"], ["--layout", "postgres", *LONG_LOAD], ("postgres", "redis")
        ),
    },
    "bench_faults": {"": Spec(["--short"], [], ("postgres", "pg_createcluster", "redis"), 2400)},
    "bench_latency": {"": Spec(["--n", "100", "--api-key"], ["--n", "400", "--api-key"])},
    "bench_chem": {"": Spec(["--n", "200", "--n-sim", "60", "--n-dft", "1"], [])},
    "bench_cascade": {"": Spec(["--n", "400"], [])},
    "bench_sandbox": {"": Spec(["--seconds", "8"], ["--mode", "all"], ("docker",))},
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
    """The benchmark's docstring up to its first example command."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    kept: list[str] = []
    for paragraph in doc.split("\n\n"):
        if paragraph.startswith("    "):
            break
        kept.append(paragraph.strip())
    return "\n\n".join(kept)


@dataclass
class Result:
    bench: str
    variant: str
    command: str
    load_before: str
    seconds: float = 0.0
    rc: int | None = None
    figures: Any = None
    skipped: str | None = None
    tail: str = ""


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


def pivots(figures: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """Top-level figures that are one row per name with the same columns (e.g. per fault)."""
    if not isinstance(figures, dict):
        return {}
    found = {}
    for name, value in figures.items():
        rows = list(value.values()) if isinstance(value, dict) and value else []
        if rows and all(isinstance(r, dict) and r.keys() == rows[0].keys() for r in rows):
            if rows[0] and not any(isinstance(v, dict) for v in rows[0].values()):
                found[name] = value
    return found


def pivot_table(name: str, rows: dict[str, dict[str, Any]]) -> list[str]:
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


def render(results: list[Result], info: dict[str, str], full: bool) -> str:
    lines = [
        "# Benchmarks",
        "",
        f"Written by `python bench/report.py{' --full' if full else ''}` on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC ({'long' if full else 'short'} forms). "
        "Run it again to refresh this page.",
        "",
        f"Machine: {info['cores']} cores ({info['cpu']}), {info['memory']} memory, "
        f"{info['os']}, Python {info['python']}.",
        "",
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
        lines += [f"## {bench}", "", how_measured(path), ""]
        for result in runs:
            title = f"### {bench} {result.variant}".rstrip()
            lines += [title, ""] if result.variant else []
            lines += [f"Command: `{result.command}`  ", f"Load average before (1/5/15 min): "
                      f"{result.load_before}" + (f"; ran {result.seconds:.0f} s, exit code "
                      f"{result.rc}" if result.rc is not None else ""), ""]  # fmt: skip
            if result.skipped:
                lines += [f"Skipped: {result.skipped}.", ""]
                continue
            if result.figures is None:
                lines += ["No figures (the run failed):", "", "```", result.tail, "```", ""]
                continue
            if result.rc:
                lines += ["The run exited with an error; its last output:", "", "```"]
                lines += [result.tail[-1500:], "```", ""]
            flat = flatten(result.figures)
            targets = [t for t in TARGETS.get(bench, []) if t.variant in ("", result.variant)]
            if targets:
                lines += [
                    "| target | figure | held to | source | status |",
                    "|---|---|---|---|---|",
                ]
                for t in targets:
                    try:
                        shown = t.show(flat) if t.show else "-"
                    except (KeyError, TypeError, ValueError):
                        shown = "-"
                    lines.append(
                        f"| {t.name} | {shown} | {t.held_to} | {t.source} | {verdict(t, flat)} |"
                    )
                lines.append("")
            tables = pivots(result.figures)
            for name, rows in tables.items():
                lines += pivot_table(name, rows)
            rest = {k: v for k, v in result.figures.items() if k not in tables} if tables else None
            lines += ["| figure | value |", "|---|---|"]
            rest_flat = flat if rest is None else flatten(rest)
            lines += [f"| {fmt(k)} | {fmt(v)} |" for k, v in rest_flat.items()]
            lines.append("")
    lines += ["## Targets no benchmark here measures yet", ""]
    lines += [f"- {name}" for name in UNMEASURED]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--full", action="store_true", help="long forms of every benchmark")
    parser.add_argument("--only", help="comma-separated names, e.g. load,faults (bench_ optional)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "BENCHMARKS.md")
    parser.add_argument("--save", type=Path, help="also keep the runs' results in this JSON file")
    parser.add_argument("--render", type=Path, help="write the page from a --save file, run none")
    args = parser.parse_args()
    wanted = {w if w.startswith("bench_") else f"bench_{w}" for w in (args.only or "").split(",")}
    if args.render:
        saved = json.loads(args.render.read_text())
        loaded = [Result(**r) for r in saved["results"]]
        args.out.write_text(render(loaded, saved["machine"], saved["full"]))
        print(f"wrote {args.out}")
        return
    info = machine()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        for path in sorted(BENCH.glob("bench_*.py")):
            if args.only and path.stem not in wanted:
                continue
            if not offers_json(path):
                print(f"skip {path.stem}: it has no --json option", flush=True)
                results.append(Result(path.stem, "", path.name, "-", skipped="no --json option"))
                continue
            for variant, spec in SPECS.get(path.stem, {"": Spec()}).items():
                results.append(run_one(path, variant, spec, args.full, Path(tmp)))
    if args.save:
        saved = {"machine": info, "full": args.full, "results": [asdict(r) for r in results]}
        args.save.write_text(json.dumps(saved, indent=2) + "\n")
    args.out.write_text(render(results, info, args.full))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
