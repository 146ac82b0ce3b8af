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
    add_tests="func main() { if add(1, 2) != 3 || add(-1, 1) != 0 { panic(\"add\") } }\n",
    fork_bomb=None,
    network='package main\nimport ("fmt"; "net"; "time")\nfunc main() { '
    'if _, err := net.DialTimeout("tcp", "1.1.1.1:80", time.Second); err == nil '
    '{ fmt.Println("connected") } else { fmt.Println("blocked") } }\n',
)

ALL = {p.language: p for p in (C, CPP, NODE, BASH, GO)}
#: Programs not yet in ALL (their image is not built by .ci/test); move one into ALL to test it.
EXTRA: dict[str, Programs] = {}
