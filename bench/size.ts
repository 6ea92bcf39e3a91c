// Binary size (issue 21): each published binary beside a hello-world compiled for the same target
// with the same flags (--compile --minify --bytecode), so the difference is what our code adds to
// the Bun runtime; and that difference split, with one more build without --bytecode, into the
// minified JS bundle (protobuf schemas and templates embedded as text) and its bytecode.

import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const REPO = resolve(import.meta.dir, "..");
const MiB = 2 ** 20;
const mib = (n: number) => (n / MiB).toFixed(1);

const TARGETS: { name: string; target?: string }[] = [
  { name: "agent" },
  { name: "agent-linux-arm64", target: "bun-linux-arm64" },
  { name: "agent-linux-x64-musl", target: "bun-linux-x64-musl" },
];

function bun(args: string[], cwd = REPO): void {
  const r = Bun.spawnSync([process.execPath, ...args], { cwd, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`bun ${args.join(" ")} failed: ${r.stderr.toString()}`);
}

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "agent-bench-size-"));
  try {
    writeFileSync(join(dir, "hello.ts"), 'console.log("hello");\n');
    const rows: string[] = [];
    for (const t of TARGETS) {
      bun(["build.ts", "--only", t.name, "--if-changed"]);
      const agent = statSync(join(REPO, "dist", t.name)).size;
      const hello = join(dir, `hello-${t.name}`);
      bun([
        "build",
        join(dir, "hello.ts"),
        "--compile",
        "--minify",
        "--bytecode",
        "--sourcemap=none",
        "--outfile",
        hello,
        ...(t.target ? [`--target=${t.target}`] : []),
      ]);
      const h = statSync(hello).size;
      rows.push(
        `| ${t.name}${t.target ? "" : ` (${process.platform}/${process.arch})`} | ${mib(agent)} | ${mib(h)} | +${mib(agent - h)} | ${((100 * (agent - h)) / agent).toFixed(1)}% |`,
      );
    }
    // The host binary once more without bytecode: splits ours into JS source and bytecode.
    const noBytecode = join(dir, "agent-no-bytecode");
    bun(["build", "src/main.ts", "--compile", "--minify", "--sourcemap=none", "--outfile", noBytecode]);
    const helloHost = statSync(join(dir, "hello-agent")).size;
    const js = statSync(noBytecode).size - helloHost;
    const jsc = statSync(join(REPO, "dist/agent")).size - statSync(noBytecode).size;
    const runtime = statSync(process.execPath).size;
    return [
      "## Binary size",
      "",
      `Each binary beside a hello-world (\`console.log("hello")\`) compiled for the same target with the same flags (\`--compile --minify --bytecode\`). The Bun executable that runs this bench is ${mib(runtime)} MiB.`,
      "",
      "| binary | agent MiB | hello-world MiB | ours | share of the binary |",
      "|---|---|---|---|---|",
      ...rows,
      "",
      `What ours is made of (${process.platform}/${process.arch}, from the same build without \`--bytecode\`): the minified JS bundle (all of src/ and the libraries it uses; protobuf schemas and the bootstrap template embedded as text) ${mib(js)} MiB, and its precompiled JavaScriptCore bytecode ${mib(jsc)} MiB, kept because it shortens start-up (\`build.ts --no-bytecode\` drops it). The rest of every binary, over 90%, is the Bun runtime itself (JavaScriptCore, Bun's native APIs, BoringSSL, its HTTP and TLS stacks), which any compiled Bun program carries.`,
      "",
    ].join("\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
