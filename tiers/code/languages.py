"""The languages the code sandbox runs, as data: names, image family, compile and run commands.

Every language runs under the same judge/candidate split as Python: the judge (the container's
PID 1) forks the candidate's process under the sandbox uid, which writes the source, compiles it
(its own time limit; the container's memory limit is at least the language's compile memory)
and runs the program (the run's time limit; native programs also get the run's memory limit as
an address-space limit, a JVM a heap that fits in it). A compile error is the candidate's
failure, with the compiler's output.

Each image family is one image built offline from Debian packages (`verifier-service sandbox
build-image --language X`); its tag carries a hash of what went into it (packages, suite, the
build recipe), so a build is only redone when one of those changes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

#: Bump when image.py builds an image differently: every family's tag changes with it.
IMAGE_RECIPE = "1"
#: The family whose image is the tier's default image (sandbox.image): Python and Bash.
BASE_FAMILY = "python"
IMAGE_REPOSITORY = "verifier-sandbox"
#: Label on the per-language images: its value is the family.
FAMILY_LABEL = "verifier-service.sandbox-family"

# Every image has the harness's interpreter and pytest (the judge is Python).
BASE_PACKAGES = ("python3-minimal", "python3-pytest")

# Libraries SandboxFusion's images ship that its tests and common RL datasets import: requests
# and numpy for Python, lodash for Node.js, javatuples for Java (docs/languages.md lists them).
FAMILY_PACKAGES: dict[str, tuple[str, ...]] = {
    "python": ("python3-requests", "python3-numpy"),
    "gcc": ("gcc", "g++", "libc6-dev"),
    "node": ("nodejs", "node-typescript", "node-lodash"),
    "go": ("golang-go",),
    # libc6-dev by name: rustc needs "libc-dev", a virtual package debootstrap cannot resolve.
    "rust": ("rustc", "libc6-dev"),
    "java": ("default-jdk-headless", "libjavatuples-java"),
}

#: Jars on Java's class path at compile and run time (installed by the java family's packages).
JAVA_CLASS_PATH = ".:/usr/share/java/javatuples.jar"

# TypeScript runs as SandboxFusion runs it: its types are stripped, not checked (a type error,
# or Node's globals without their declarations, never stops a run). typescript's own
# transpileModule does it, with esModuleInterop so that `import x from "util"` finds the module;
# only a syntax error stops the run, as a compile error with its diagnostics.
_TS_TRANSPILE = """
const ts = require("typescript"), fs = require("fs");
const out = ts.transpileModule(fs.readFileSync("main.ts", "utf8"), {
  fileName: "main.ts", reportDiagnostics: true,
  compilerOptions: {target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.CommonJS,
                    esModuleInterop: true},
});
const errors = (out.diagnostics || []).filter(d => d.category === ts.DiagnosticCategory.Error);
const host = {getCanonicalFileName: f => f, getCurrentDirectory: () => ".",
              getNewLine: () => "\\n"};
if (errors.length) {
  process.stderr.write(ts.formatDiagnostics(errors, host));
  process.exit(1);
}
fs.writeFileSync("main.js", out.outputText);
"""


@dataclass(frozen=True)
class Language:
    """One language: how its source is named, compiled and run inside the sandbox."""

    name: str
    family: str
    source: str
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    aliases: tuple[str, ...] = ()
    compile_timeout_s: float = 10.0
    compile_memory_mb: int = 512
    #: Native programs: the run's memory limit is also an RLIMIT_AS (a JIT or a Go runtime
    #: reserves far more address space than it uses, so those rely on the container's limit).
    address_space_limit: bool = False
    env: dict[str, str] = field(default_factory=dict)
    #: JVM languages: the run command's HEAP_MB is the heap the run's memory limit leaves after
    #: the JVM's own memory (jvm_heap_mb).
    jvm: bool = False

    @property
    def compiled(self) -> bool:
        return self.compile is not None

    def run_command(self, run_memory_mb: int) -> list[str]:
        """The run command for a run with this memory limit (the JVM's heap follows it)."""
        if not self.jvm:
            return list(self.run)
        heap = str(jvm_heap_mb(run_memory_mb))
        return [arg.replace(HEAP_MB, heap) for arg in self.run]

    def harness_spec(self, compile_timeout_s: float, run_memory_mb: int) -> dict[str, Any]:
        """What the candidate's process needs to build and run a program of this language."""
        return {
            "name": self.name,
            "source": self.source,
            "compile": list(self.compile) if self.compile else None,
            "run": self.run_command(run_memory_mb),
            "compile_timeout_s": compile_timeout_s,
            "rlimit_as_mb": run_memory_mb if self.address_space_limit else None,
            "env": dict(self.env),
        }


def _cpp(std: str, name: str, *aliases: str) -> Language:
    return Language(
        name=name,
        family="gcc",
        source="main.cpp",
        compile=("g++", f"-std=c++{std}", "-O2", "-pipe", "-o", "main", "main.cpp", "-lm"),
        run=("./main",),
        aliases=aliases,
        address_space_limit=True,
    )


#: Placeholder in a JVM language's run command for the heap size in MB.
HEAP_MB = "{heap_mb}"
#: What a JVM needs besides its heap: measured in the Java image, a small program's JVM has
#: 24 MB committed outside its heap (Native Memory Tracking: class metadata, code cache, thread
#: stacks, GC tables, the CDS archive) and 36 MB resident with a 64 MB heap.
JVM_OVERHEAD_MB = 64
JVM_MIN_HEAP_MB = 32


def jvm_heap_mb(run_memory_mb: int) -> int:
    """The JVM's -Xmx for a run's memory limit: the limit less the JVM's own needs."""
    return max(JVM_MIN_HEAP_MB, run_memory_mb - JVM_OVERHEAD_MB)


_GO_ENV = {
    "GOCACHE": "/work/.cache/go",
    "GOPATH": "/work/.go",
    "GO111MODULE": "off",
    "CGO_ENABLED": "0",
    "GOFLAGS": "-buildvcs=false",
}

LANGUAGES: tuple[Language, ...] = (
    Language(
        name="python",
        family="python",
        source="solution.py",
        run=("python3",),
        aliases=("python3", "py"),
    ),
    Language(
        name="bash",
        family="python",
        source="main.sh",
        run=("bash", "main.sh"),
        aliases=("sh", "shell"),
        address_space_limit=True,
    ),
    Language(
        name="c",
        family="gcc",
        source="main.c",
        compile=("gcc", "-std=gnu11", "-O2", "-pipe", "-o", "main", "main.c", "-lm"),
        run=("./main",),
        address_space_limit=True,
    ),
    _cpp("17", "cpp", "c++", "c++17", "cpp17", "g++"),
    _cpp("11", "cpp11", "c++11"),
    _cpp("14", "cpp14", "c++14"),
    _cpp("20", "cpp20", "c++20"),
    Language(
        name="nodejs",
        family="node",
        source="main.js",
        run=("node", "main.js"),
        aliases=("javascript", "js", "node"),
    ),
    Language(
        name="typescript",
        family="node",
        source="main.ts",
        compile=("node", "-e", _TS_TRANSPILE),
        run=("node", "main.js"),
        aliases=("ts",),
        compile_timeout_s=20.0,
    ),
    Language(
        name="go",
        family="go",
        source="main.go",
        compile=("go", "build", "-o", "main", "main.go"),
        run=("./main",),
        aliases=("golang",),
        compile_timeout_s=20.0,
        compile_memory_mb=768,
        env=_GO_ENV,
    ),
    Language(
        name="rust",
        family="rust",
        source="main.rs",
        compile=("rustc", "--edition", "2021", "-O", "-o", "main", "main.rs"),
        run=("./main",),
        aliases=("rs",),
        compile_timeout_s=20.0,
        compile_memory_mb=768,
        address_space_limit=True,
    ),
    Language(
        name="java",
        family="java",
        source="Main.java",
        compile=(
            "javac",
            "-J-Xmx384m",
            "-J-XX:+UseSerialGC",
            "-J-XX:TieredStopAtLevel=1",
            "-encoding",
            "UTF-8",
            "-cp",
            JAVA_CLASS_PATH,
            "Main.java",
        ),
        # -ea: an assert-style main's `assert` statements run (the JVM skips them otherwise).
        run=(
            "java",
            f"-Xmx{HEAP_MB}m",
            "-XX:MaxMetaspaceSize=64m",
            "-XX:+UseSerialGC",
            "-Xss64m",
            "-ea",
            "-cp",
            JAVA_CLASS_PATH,
            "Main",
        ),
        compile_timeout_s=20.0,
        compile_memory_mb=768,
        jvm=True,
    ),
)

_BY_NAME: dict[str, Language] = {}
for _lang in LANGUAGES:
    for _key in (_lang.name, *_lang.aliases):
        _BY_NAME[_key.lower()] = _lang


class UnknownLanguageError(ValueError):
    """A language name this sandbox does not know."""


def language_names() -> list[str]:
    """Every accepted name (canonical names and aliases), sorted."""
    return sorted(_BY_NAME)


def get_language(name: str) -> Language:
    """The language called `name` (case-insensitive, aliases included)."""
    try:
        return _BY_NAME[name.strip().lower()]
    except KeyError:
        raise UnknownLanguageError(
            f"language {name!r} is not supported; supported: {', '.join(language_names())}"
        ) from None


def families() -> list[str]:
    """The image families, the base one first."""
    return list(FAMILY_PACKAGES)


def family_packages(family: str) -> tuple[str, ...]:
    """The Debian packages of a family's image."""
    return BASE_PACKAGES + FAMILY_PACKAGES[family]


def family_tag(family: str, suite: str = "bookworm") -> str:
    """The image tag of a family: its inputs hashed, so new inputs mean a new tag."""
    inputs = json.dumps(
        {"packages": family_packages(family), "suite": suite, "recipe": IMAGE_RECIPE},
        sort_keys=True,
    )
    digest = hashlib.sha256(inputs.encode()).hexdigest()[:12]
    return f"{IMAGE_REPOSITORY}-{family}:{digest}"
