"""Executions per second per sandbox language, against Python measured in the same run.

For each language (default: those whose image is built): `--runs` programs through the tier
(tiers.code.sandbox.SandboxTier.verify_batch, a warm pool of `--pool-size` per family), each a
hello world judged by one stdin/stdout case, then the same for a small stdin/stdout task (sum
of the numbers read, three cases); `--concurrency` at a time. Then one `/run_code` per language
(the service function, no HTTP) for the compile time: its share of that run's wall time. Prints
execs/s per language and task, the ratio to Python's, the compile share, each image's size,
and the load average before and after (figures from a loaded machine mean little without it).

    .venv/bin/python bench/bench_languages.py                       # ~1-2 min on 2 idle cores
    .venv/bin/python bench/bench_languages.py --languages python,cpp --runs 20
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tiers import registry
from tiers.base import Candidate, VerdictStatus
from tiers.code.engine import make_client
from tiers.code.languages import get_language
from tiers.code.pool import shutdown_pool
from tiers.code.sandbox import SandboxTier
from tiers.code.sandbox_languages import image_for, language_built, shutdown_language_pools
from tiers.code.settings import SandboxSettings
from verifier_service.sandbox.schemas import RunCodeRequest
from verifier_service.sandbox.service import run_code

HELLO = {
    "python": 'print("hello")\n',
    "bash": "echo hello\n",
    "c": '#include <stdio.h>\nint main(void){puts("hello");return 0;}\n',
    "cpp": '#include <iostream>\nint main(){std::cout<<"hello\\n";}\n',
    "nodejs": 'console.log("hello");\n',
    "typescript": 'const greeting: string = "hello";\nconsole.log(greeting);\n',
    "go": 'package main\nimport "fmt"\nfunc main(){ fmt.Println("hello") }\n',
    "rust": 'fn main() { println!("hello"); }\n',
    "java": "public class Main { public static void main(String[] a) {\n"
    '  System.out.println("hello"); } }\n',
}
SUM = {
    "python": "import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))\n",
    "bash": "s=0; for x in $(cat); do s=$((s + x)); done; echo $s\n",
    "c": '#include <stdio.h>\nint main(void){long s=0,x;while(scanf("%ld",&x)==1)s+=x;'
    'printf("%ld\\n",s);return 0;}\n',
    "cpp": "#include <iostream>\nint main(){long long s=0,x;while(std::cin>>x)s+=x;"
    "std::cout<<s<<'\\n';}\n",
    "nodejs": "const t = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/);\n"
    "console.log(t.reduce((s, x) => s + Number(x), 0));\n",
    "typescript": "declare const require: any;\n"
    "const t: number[] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
    "console.log(t.reduce((s: number, x: number) => s + x, 0));\n",
    "go": 'package main\nimport "fmt"\nfunc main(){ s, x := 0, 0\n'
    "for { if _, err := fmt.Scan(&x); err != nil { break }; s += x }\nfmt.Println(s) }\n",
    "rust": "use std::io::Read;\nfn main(){ let mut t=String::new(); "
    "std::io::stdin().read_to_string(&mut t).unwrap();\n"
    "let s: i64 = t.split_whitespace().map(|x| x.parse::<i64>().unwrap()).sum(); "
    'println!("{}", s); }\n',
    "java": "import java.util.*;\npublic class Main { public static void main(String[] a) {\n"
    "Scanner in = new Scanner(System.in); long s = 0; while (in.hasNextLong()) s += "
    "in.nextLong(); System.out.println(s); } }\n",
}
SUM_CASES = [
    {"stdin": "1 2\n", "stdout": "3\n"},
    {"stdin": "10 20 30\n", "stdout": "60\n"},
    {"stdin": " ".join(str(i) for i in range(100)) + "\n", "stdout": "4950\n"},
]


def execs_per_s(tier: SandboxTier, items: list[Candidate], concurrency: int) -> float:
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        verdicts = list(pool.map(lambda item: tier.verify_batch([item], {})[0], items))
    took = time.monotonic() - started
    bad = [v for v in verdicts if v.status is not VerdictStatus.passed]
    if bad:
        raise SystemExit(f"a benchmark program did not pass: {bad[0].feedback[:2000]}")
    return len(items) / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--languages", default="", help="comma-separated; default: those built")
    parser.add_argument("--runs", type=int, default=12, help="programs per language and task")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--pool-size", type=int, default=4)
    args = parser.parse_args()
    settings = SandboxSettings(pool_size=args.pool_size, language_pool_size=args.pool_size)
    registry.configure({"code": settings})
    names = [n for n in args.languages.split(",") if n] or [
        n for n in HELLO if language_built(get_language(n), settings)
    ]
    if "python" not in names:
        names.insert(0, "python")
    tier = SandboxTier(settings)
    client = make_client(settings)
    load_before = os.getloadavg()
    rows: list[dict[str, Any]] = []
    try:
        for name in names:
            lang = get_language(name)
            hello = [
                Candidate(
                    kind="code",
                    payload={
                        "language": name,
                        "code": HELLO[name],
                        "cases": [{"stdin": "", "stdout": "hello"}],
                    },
                )
                for _ in range(args.runs)
            ]
            task = [
                Candidate(
                    kind="code", payload={"language": name, "code": SUM[name], "cases": SUM_CASES}
                )
                for _ in range(args.runs)
            ]
            execs_per_s(tier, hello[:2], args.concurrency)  # warm the family's pool
            row: dict[str, Any] = {"language": name}
            row["hello"] = execs_per_s(tier, hello, args.concurrency)
            row["sum"] = execs_per_s(tier, task, args.concurrency)
            started = time.monotonic()
            response = run_code(RunCodeRequest(code=HELLO[name], language=name))
            wall = time.monotonic() - started
            built = response.compile_result
            row["compile_s"] = built.execution_time if built else 0.0
            row["compile_share"] = (row["compile_s"] or 0.0) / wall
            image = client.images.get(image_for(lang, settings))
            row["image_mb"] = image.attrs["Size"] / 1e6
            rows.append(row)
    finally:
        shutdown_language_pools()
        shutdown_pool()
    base = rows[0]
    load_after = os.getloadavg()
    print(f"concurrency {args.concurrency}, {args.runs} programs per language and task")
    print(
        "load average (1, 5, 15 min) before "
        + ", ".join(f"{x:.1f}" for x in load_before)
        + "; after "
        + ", ".join(f"{x:.1f}" for x in load_after)
    )
    print(
        f"{'language':<11}{'hello/s':>9}{'x python':>9}{'sum/s':>8}{'x python':>9}"
        f"{'compile s':>10}{'compile share':>14}{'image MB':>10}"
    )
    for row in rows:
        print(
            f"{row['language']:<11}{row['hello']:>9.2f}{row['hello'] / base['hello']:>9.2f}"
            f"{row['sum']:>8.2f}{row['sum'] / base['sum']:>9.2f}{row['compile_s']:>10.2f}"
            f"{row['compile_share']:>14.0%}{row['image_mb']:>10.0f}"
        )


if __name__ == "__main__":
    main()
