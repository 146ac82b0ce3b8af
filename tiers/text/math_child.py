"""The math comparison child: `python -m tiers.text.math_child --memory-mb N`.

It caps its own address space, imports math-verify, writes `{"ready": true}` and then answers
one JSON request per line on stdin with one JSON line on stdout, until stdin closes:

request:  {"answer": str, "references": [str, ...], "cpu_limit_s": float}
response: {"parsed": bool, "equal": bool, "index": int, "shown": str}
          or {"error": "memory" | "recursion" | "internal", "message": str}

The parent (tiers.text.mathpool) kills it when one request takes too long; math-verify's own
SIGALRM timeouts are off, the parent's clock is the one that counts. As a backstop for a child
whose parent died mid-request (a worker killed at its task time limit), each request may also
spend at most `cpu_limit_s` of CPU: past it the kernel ends the child (SIGXCPU), even inside a
long C call that no Python-level watchdog could interrupt.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
from functools import lru_cache
from typing import Any


def _cap_memory(memory_mb: int) -> None:
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _wrap(answer: str) -> str:
    return answer if "\\boxed" in answer else "\\boxed{" + answer + "}"


def read(text: str) -> list[Any]:
    """math-verify's parse of an answer (as if boxed), or of a plain expression."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    targets = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    found: list[Any] = parse(_wrap(text), targets, parsing_timeout=None)
    if not found:  # plain expressions that LaTeX parsing missed: x**2 + 1
        found = parse(text, [ExprExtractionConfig()], parsing_timeout=None)
    return found


#: References come again and again (a GRPO group shares one): each is parsed once per child.
read_reference = lru_cache(maxsize=4096)(read)


def compare(request: dict[str, Any]) -> dict[str, Any]:
    from math_verify import verify

    answer = read(str(request["answer"]))
    if not answer:
        return {"parsed": False, "equal": False, "index": -1, "shown": ""}
    shown = str(answer[-1] if isinstance(answer[-1], str) else answer[0])
    for index, reference in enumerate(request["references"]):
        gold = read_reference(str(reference))
        if gold and verify(gold, answer, timeout_seconds=None):
            return {"parsed": True, "equal": True, "index": index, "shown": shown}
    return {"parsed": True, "equal": False, "index": -1, "shown": shown}


def _cpu_backstop(seconds: float) -> None:
    """Let this process spend at most `seconds` more CPU (RLIMIT_CPU counts its whole life)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime + seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _answer(line: str) -> dict[str, Any]:
    try:
        request = json.loads(line)
        if request.get("cpu_limit_s"):
            _cpu_backstop(float(request["cpu_limit_s"]))
        return compare(request)
    except MemoryError:
        return {"error": "memory", "message": "the comparison ran out of its memory cap"}
    except RecursionError:
        return {"error": "recursion", "message": "the expression is nested too deeply"}
    except Exception as exc:
        return {"error": "internal", "message": f"{type(exc).__name__}: {exc}"[:500]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memory-mb", type=int, required=True)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # math-verify warns that its own timeouts are off
    import math_verify  # noqa: F401  (loaded before the cap and before the first request)

    _cap_memory(args.memory_mb)
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    for line in sys.stdin:
        reply = _answer(line)
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if reply.get("error") == "memory":
            return  # after a MemoryError the heap may be in pieces: the parent starts another


if __name__ == "__main__":
    main()
