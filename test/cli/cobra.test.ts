// The CLI behaves like cobra's (pilot-agent is a cobra program): --help/-h on every command,
// `help <command>`, `completion bash|zsh|fish|powershell`. Completion scripts are exercised in the
// real shells: bash's compgen, fish's `complete -C`, zsh with its completion builtins stubbed.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../../src/cli/root.ts";
import type { CliIO } from "../../src/cli/io.ts";
import { testRequiring } from "../support/requires.ts";

async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const io: CliIO = { out: (s) => out.push(s), err: (s) => err.push(s), env: {}, cwd: "/" };
  const code = await runCli(args, io);
  return { code, out: out.join(""), err: err.join("") };
}

const COMMANDS = ["completion", "debug", "iptables", "proxy", "request", "status", "version", "wait"];

describe("the CLI behaves like cobra's", () => {
  test.each(COMMANDS)("--help and -h on `%s` print its usage and exit 0", async (name) => {
    for (const flag of ["--help", "-h"]) {
      const r = await cli([name, flag]);
      expect(r.code).toBe(0);
      expect(r.err).toBe("");
      expect(r.out).toContain("Usage:\n  agent ");
      expect(r.out).toMatch(/-h, --help +help for /);
    }
  });

  test("--help wins over the command's own arguments (cobra checks it first)", async () => {
    const r = await cli(["request", "GET", "/stats", "--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toStartWith("Makes an HTTP request to the Envoy admin API\n\nUsage:\n  agent request <method> <path> [<body>] [flags]\n");
  });

  test.each(COMMANDS)("`help %s` prints the same as `%s --help`", async (name) => {
    expect((await cli(["help", name])).out).toBe((await cli([name, "--help"])).out);
  });

  test("help alone and --help print the root help listing every command, cobra-padded", async () => {
    const r = await cli(["help"]);
    expect(r.out).toBe((await cli(["--help"])).out);
    expect(r.out).toContain(
      "Available Commands:\n  completion  Generate the autocompletion script for the specified shell\n  debug       Prints the agent's own state or log levels from its status port\n  doctor      Checks what the agent would start with and reports each mistake with its fix\n  help        Help about any command\n",
    );
    expect(r.out).toContain("  status      Shows the agent's identity, istiod connection, xDS streams and readiness\n");
    expect(r.out).toContain("  wait        Waits until the Envoy proxy is ready\n");
  });

  test("help for an unknown topic: cobra's message and the root usage, exit 0", async () => {
    const r = await cli(["help", "nope"]);
    expect(r.code).toBe(0);
    expect(r.out).toStartWith("Unknown help topic [`nope`]\nUsage:\n  agent [command]\n");
  });

  test("the istio-iptables alias answers --help too", async () => {
    const r = await cli(["istio-iptables", "-h"]);
    expect(r.code).toBe(0);
    expect(r.out).toStartWith("istio-iptables is responsible for setting up port forwarding for Istio Sidecar.");
  });

  test("completion without a shell prints its help; an unknown shell is an error naming it", async () => {
    const r = await cli(["completion"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("Usage:\n  agent completion [bash|fish|powershell|zsh] [flags]");
    const bad = await cli(["completion", "tcsh"]);
    expect(bad.code).toBe(255);
    expect(bad.err).toBe('Error: unknown command "tcsh" for "agent completion"\n');
  });

  test("completion <shell> --help explains how to load the script", async () => {
    const r = await cli(["completion", "fish", "--help"]);
    expect(r.code).toBe(0);
    expect(r.out).toContain("agent completion fish | source");
  });

  test("completion powershell registers a native completer for agent and pilot-agent", async () => {
    const r = await cli(["completion", "powershell"]);
    expect(r.out).toContain("Register-ArgumentCompleter -Native -CommandName 'agent', 'pilot-agent'");
    expect(r.out).toContain("@('--debug-port', 'Set the port to make a local request to. The default points to the Envoy admin API.')");
    expect((await cli(["completion", "powershell", "--no-descriptions"])).out).toContain("@('--debug-port', '--debug-port')");
  });
});

function scriptFile(text: string): { path: string; done(): void } {
  const dir = mkdtempSync(join(tmpdir(), "agent-completion-"));
  const path = join(dir, "script");
  writeFileSync(path, text);
  return { path, done: () => rmSync(dir, { recursive: true, force: true }) };
}

function sh(argv: string[]): string {
  const r = Bun.spawnSync(argv, { env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: tmpdir() } });
  if (r.exitCode !== 0) throw new Error(`${argv[0]} exited ${r.exitCode}: ${r.stderr.toString()}`);
  return r.stdout.toString();
}

describe("completion scripts complete in the real shells", () => {
  testRequiring({ tools: ["bash"], apt: ["bash"] }, "completion bash: commands, a command's flags, proxy types; also for pilot-agent", async () => {
    const s = scriptFile((await cli(["completion", "bash"])).out);
    try {
      const ask = (line: string) => {
        const words = line.split(" ");
        return sh([
          "bash",
          "-c",
          `source ${s.path}; COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _agent_complete; echo "\${COMPREPLY[*]}"; complete -p pilot-agent`,
        ]);
      };
      expect(ask("agent pr")).toStartWith("proxy\n");
      expect(ask("agent re")).toStartWith("request\n");
      expect(ask("agent proxy r")).toStartWith("router\n");
      expect(ask("agent --log_as_json wait --per")).toStartWith("--periodMillis\n");
      expect(ask("pilot-agent version --s")).toStartWith("--short\n");
      expect(ask("agent completion z")).toBe("zsh\ncomplete -o default -F _agent_complete pilot-agent\n");
    } finally {
      s.done();
    }
  });

  testRequiring({ tools: ["fish"], apt: ["fish"] }, "completion fish: complete -C answers from the script", async () => {
    const s = scriptFile((await cli(["completion", "fish"])).out);
    try {
      const ask = (line: string) => sh(["fish", "--no-config", "-c", `source ${s.path}; complete -C '${line}'`]);
      expect(ask("agent ver")).toBe("version\tPrints out build version information\n");
      expect(ask("pilot-agent wait --ur")).toBe("--url\tURL to use in requests\n");
      expect(ask("agent proxy side")).toBe("sidecar\n");
    } finally {
      s.done();
    }
  });

  testRequiring({ tools: ["zsh"], apt: ["zsh"] }, "completion zsh: parses, and offers the right candidates (completion builtins stubbed)", async () => {
    const s = scriptFile((await cli(["completion", "zsh"])).out);
    try {
      expect(sh(["zsh", "-n", s.path])).toBe("");
      // Outside a completion widget, stand in for compdef/_describe and call the function as zsh would.
      const ask = (line: string) =>
        sh([
          "zsh",
          "-f",
          "-c",
          `compdef() { print -r -- "compdef $*" }; _describe() { local n=\${@[-1]}; print -rl -- "\${(@P)n}" }; source ${s.path}; words=(${line}); CURRENT=\${#words}; _agent`,
        ]);
      expect(ask("agent wai")).toContain("wait:Waits until the Envoy proxy is ready\n");
      expect(ask("agent request --d")).toContain("--debug-port:Set the port to make a local request to. The default points to the Envoy admin API.\n");
      expect(ask("agent proxy x")).toBe("compdef _agent agent pilot-agent\nsidecar\nrouter\nwaypoint\nztunnel\nagentgateway\n");
    } finally {
      s.done();
    }
  });
});
