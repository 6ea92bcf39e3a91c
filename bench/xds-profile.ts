// Profiling harness for the relay (not part of `bun run bench`): starts the bench istiod and the
// agent from source under `bun --cpu-prof` (or any AGENT_CMD), relays PROFILE_SIZE-byte pushes
// for PROFILE_SECONDS, stops the agent (the profile is written on exit) and prints CPU ms per MiB.
// Usage: bun bench/xds-profile.ts <size-bytes> <seconds> <profile-dir>

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cpuMs, firstLine, measure, startAgent } from "./xds.ts";

const [sizeArg, secondsArg, profDir] = process.argv.slice(2);
const size = Number(sizeArg ?? 10240);
const seconds = Number(secondsArg ?? 10);
const dir = mkdtempSync(join(tmpdir(), "xds-prof-"));
const istiod = Bun.spawn([process.execPath, join(import.meta.dir, "xds-istiod-main.ts")], { stdout: "pipe", stderr: "inherit" });
const port = Number(await firstLine(istiod.stdout));
const wrapper = join(dir, "agent.sh");
await Bun.write(
  wrapper,
  profDir
    ? `#!/bin/sh\nexec ${process.execPath} --cpu-prof --cpu-prof-md --cpu-prof-dir=${profDir} ${join(import.meta.dir, "..", "src", "main.ts")} "$@"\n`
    : `#!/bin/sh\nexec ${process.env.XDS_AGENT ?? join(import.meta.dir, "..", "dist", "agent")} "$@"\n`,
);
Bun.spawnSync(["chmod", "+x", wrapper]);
const agent = await startAgent(dir, port, wrapper);
const sock = `unix://${join(dir, "etc/istio/proxy/XDS")}`;
const c0 = cpuMs(agent.pid);
let mib = 0;
const t0 = performance.now();
while (performance.now() - t0 < seconds * 1000) mib += (await measure(sock, size)).mib;
const cpu = cpuMs(agent.pid) - c0;
console.log(`${size} B pushes: ${mib.toFixed(0)} MiB in ${((performance.now() - t0) / 1000).toFixed(1)} s, agent ${(cpu / mib).toFixed(2)} ms CPU per MiB`);
agent.kill("SIGTERM");
await agent.exited;
istiod.kill("SIGTERM");
await istiod.exited;
rmSync(dir, { recursive: true, force: true });
