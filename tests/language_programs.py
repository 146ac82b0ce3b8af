"""Programs in each sandbox language, shared by the tier, /run_code and SDK tests.

For each language: `sum` reads two integers on stdin and prints their sum, `wrong` prints their
difference, `compile_error` does not compile (or, for an interpreted language, does not parse),
`timeout` never ends, `hog` allocates and touches gigabytes, `add`/`add_tests` are a function and
an assert-style main that checks it, `fork_bomb` forks without end and `network` prints
"connected" only if it reaches 1.1.1.1:80.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Programs:
    language: str
    sdk_name: str | None  # the name sandbox-fusion's SDK sends, None if it has none
    sum: str
    wrong: str
    compile_error: str
    timeout: str
    hog: str
    add: str
    add_tests: str
    add_wrong: str
    fork_bomb: str | None = None
    network: str | None = None


_C_NET = """#include <stdio.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
int main(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(80);
    inet_pton(AF_INET, "1.1.1.1", &a.sin_addr);
    puts(s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0 ? "connected" : "blocked");
    return 0;
}
"""

C = Programs(
    language="c",
    sdk_name=None,
    sum='#include <stdio.h>\nint main(void){long a,b;if(scanf("%ld %ld",&a,&b)!=2)return 1;'
    'printf("%ld\\n",a+b);return 0;}\n',
    wrong='#include <stdio.h>\nint main(void){long a,b;if(scanf("%ld %ld",&a,&b)!=2)return 1;'
    'printf("%ld\\n",a-b);return 0;}\n',
    compile_error="int main(void) { return 0 }\n",
    timeout="int main(void){volatile unsigned long i=0;for(;;)i++;}\n",
    hog="#include <stdlib.h>\n#include <string.h>\n#include <stdio.h>\nint main(void){"
    "for(int i=0;i<64;i++){char*p=malloc(64<<20);if(!p)return 3;memset(p,1,64<<20);}"
    'puts("survived");return 0;}\n',
    add="int add(int a, int b) { return a + b; }\n",
    add_wrong="int add(int a, int b) { return a - b; }\n",
    add_tests="#include <assert.h>\nint main(void){assert(add(1,2)==3);assert(add(-1,1)==0);"
    "return 0;}\n",
    fork_bomb="#include <unistd.h>\nint main(void){for(;;)fork();}\n",
    network=_C_NET,
)

CPP = Programs(
    language="cpp",
    sdk_name="cpp",
    sum="#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}\n",
    wrong="#include <iostream>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a-b<<'\\n';}\n",
    compile_error="#include <vector>\nint main(){ std::vector<int> v = 3; }\n",
    timeout="int main(){volatile unsigned long i=0;for(;;)i++;}\n",
    hog="#include <vector>\n#include <cstdio>\nint main(){std::vector<std::vector<char>> keep;"
    'for(int i=0;i<64;i++)keep.emplace_back(64<<20,1);std::puts("survived");}\n',
    add="int add(int a, int b) { return a + b; }\n",
    add_wrong="int add(int a, int b) { return a - b; }\n",
    add_tests="#include <cassert>\nint main(){assert(add(1,2)==3);assert(add(-1,1)==0);}\n",
    fork_bomb="#include <unistd.h>\nint main(){for(;;)fork();}\n",
    network=_C_NET,
)

NODE = Programs(
    language="nodejs",
    sdk_name="nodejs",
    sum="const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
    "console.log(a + b);\n",
    wrong="const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
    "console.log(a - b);\n",
    compile_error="function ( {\n",
    timeout="for (;;) {}\n",
    hog="const keep = []; for (let i = 0; i < 64; i++) keep.push(Buffer.alloc(64 << 20, 1));\n"
    "console.log('survived');\n",
    add="function add(a, b) { return a + b; }\n",
    add_wrong="function add(a, b) { return a - b; }\n",
    add_tests="const assert = require('assert');\nassert.strictEqual(add(1, 2), 3);\n"
    "assert.strictEqual(add(-1, 1), 0);\n",
    network="require('net').connect({host: '1.1.1.1', port: 80, timeout: 1000})\n"
    "  .on('connect', () => { console.log('connected'); process.exit(0); })\n"
    "  .on('error', () => { console.log('blocked'); process.exit(0); });\n",
)

BASH = Programs(
    language="bash",
    sdk_name="bash",
    sum="read a b\necho $((a + b))\n",
    wrong="read a b\necho $((a - b))\n",
    compile_error="if then fi (\n",
    timeout="while :; do :; done\n",
    hog="x=a; while :; do x=$x$x; done\n",
    add="add() { echo $(($1 + $2)); }\n",
    add_wrong="add() { echo $(($1 - $2)); }\n",
    add_tests='[ "$(add 1 2)" = 3 ] || exit 1\n[ "$(add -1 1)" = 0 ] || exit 1\n',
    network="(exec 3<>/dev/tcp/1.1.1.1/80) 2>/dev/null && echo connected || echo blocked\n",
)

_GO_SUM = (
    'package main\nimport "fmt"\nfunc main() { var a, b int64; fmt.Scan(&a, &b); '
    "fmt.Println(a %s b) }\n"
)

GO = Programs(
    language="go",
    sdk_name="go",
    sum=_GO_SUM % "+",
    wrong=_GO_SUM % "-",
    compile_error="package main\nfunc main() { x := 1 }\n",  # declared and not used
    timeout="package main\nfunc main() { for {} }\n",
    hog='package main\nimport "fmt"\nfunc main() { var keep [][]byte\n'
    "for i := 0; i < 64; i++ { b := make([]byte, 64<<20); for j := range b { b[j] = 1 }; "
    'keep = append(keep, b) }\nfmt.Println("survived", len(keep)) }\n',
    add="package main\nfunc add(a, b int) int { return a + b }\n",
    add_wrong="package main\nfunc add(a, b int) int { return a - b }\n",
    add_tests='func main() { if add(1, 2) != 3 || add(-1, 1) != 0 { panic("add") } }\n',
    # Go has no fork(): each copy starts copies of itself (and each has a few OS threads).
    fork_bomb='package main\nimport "os/exec"\nfunc main() { for { '
    'exec.Command("/proc/self/exe").Start() } }\n',
    network='package main\nimport ("fmt"; "net"; "time")\nfunc main() { '
    'if _, err := net.DialTimeout("tcp", "1.1.1.1:80", time.Second); err == nil '
    '{ fmt.Println("connected") } else { fmt.Println("blocked") } }\n',
)

_RUST_SUM = (
    "use std::io::Read;\nfn main() { let mut s = String::new(); "
    "std::io::stdin().read_to_string(&mut s).unwrap();\n"
    "let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
    'println!("{}", v[0] %s v[1]); }\n'
)

RUST = Programs(
    language="rust",
    sdk_name="rust",
    sum=_RUST_SUM % "+",
    wrong=_RUST_SUM % "-",
    compile_error='fn main() { let x: i32 = "one"; }\n',  # mismatched types
    # A volatile read each turn: the optimiser may not drop the loop.
    timeout="fn main() { let mut i: u64 = 0; loop { "
    "i = unsafe { std::ptr::read_volatile(&i) }.wrapping_add(1); } }\n",
    hog="fn main() { let mut keep = Vec::new(); for _ in 0..64 { keep.push(vec![1u8; 64 << 20]); }"
    ' println!("survived {}", keep.len()); }\n',
    add="fn add(a: i32, b: i32) -> i32 { a + b }\n",
    add_wrong="fn add(a: i32, b: i32) -> i32 { a - b }\n",
    add_tests="fn main() { assert_eq!(add(1, 2), 3); assert_eq!(add(-1, 1), 0); }\n",
    # libc's fork (Rust's std links libc but has no fork of its own).
    fork_bomb='extern "C" { fn fork() -> i32; }\nfn main() { loop { unsafe { fork(); } } }\n',
    network="use std::net::{SocketAddr, TcpStream};\nuse std::time::Duration;\nfn main() {\n"
    '    let addr: SocketAddr = "1.1.1.1:80".parse().unwrap();\n'
    "    let ok = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok();\n"
    '    println!("{}", if ok { "connected" } else { "blocked" });\n}\n',
)

_JAVA_SUM = (
    "import java.util.Scanner;\npublic class Main { public static void main(String[] args) {\n"
    "  Scanner in = new Scanner(System.in); long a = in.nextLong(), b = in.nextLong();\n"
    "  System.out.println(a %s b); } }\n"
)

JAVA = Programs(
    language="java",
    sdk_name="java",
    sum=_JAVA_SUM % "+",
    wrong=_JAVA_SUM % "-",
    compile_error="public class Main {\n"
    "  public static void main(String[] args) { int x = 1.5; } }\n",  # possible lossy conversion
    timeout="public class Main { public static void main(String[] args) { long i = 0; "
    "while (true) i++; } }\n",
    hog="import java.util.*;\npublic class Main { public static void main(String[] args) {\n"
    "  List<byte[]> keep = new ArrayList<>();\n"
    "  for (int i = 0; i < 64; i++) { byte[] b = new byte[64 << 20]; Arrays.fill(b, (byte) 1); "
    "keep.add(b); }\n"
    '  System.out.println("survived " + keep.size()); } }\n',
    # MultiPL-E's shape: the candidate's class, then a main that asserts (java -ea).
    add="class Solution { static int add(int a, int b) { return a + b; } }\n",
    add_wrong="class Solution { static int add(int a, int b) { return a - b; } }\n",
    add_tests="public class Main { public static void main(String[] args) {\n"
    "  assert Solution.add(1, 2) == 3; assert Solution.add(-1, 1) == 0; } }\n",
    # No fork() in Java: each JVM starts JVMs (and has a dozen threads of its own).
    fork_bomb="public class Main { public static void main(String[] args) { while (true) {\n"
    '  try { new ProcessBuilder("java", "-cp", ".", "Main").start(); } catch (Exception e) { }\n'
    "} } }\n",
    network="import java.net.*;\npublic class Main { public static void main(String[] args) {\n"
    '  try (Socket s = new Socket()) { s.connect(new InetSocketAddress("1.1.1.1", 80), 1000);\n'
    '    System.out.println("connected");\n'
    '  } catch (Exception e) { System.out.println("blocked"); }\n'
    "} }\n",
)

ALL = {p.language: p for p in (C, CPP, NODE, BASH, GO, RUST, JAVA)}
