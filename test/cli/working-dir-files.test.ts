// The compiled agent takes its settings from its environment and flags only: a `.env` file or a
// bunfig.toml in its working directory (the pod's) changes nothing. A compiled Bun program loads
// both by default; build.ts turns that off.

import { afterAll, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { sandbox, start } from "../support/binary.ts";

const box = sandbox("agent-workdir-");
afterAll(() => box.cleanup());

test("a .env file in the working directory does not set the compiled agent's environment", async () => {
  // INBOUND_CAPTURE_PORT is istio-iptables' environment for -z: from .env it would show in the dry run.
  writeFileSync(`${box.dir}/.env`, "INBOUND_CAPTURE_PORT=15444\n");
  const run = start(box.bin, ["iptables", "--dry-run", "-p", "15001", "-u", "1337", "-m", "REDIRECT", "-i", "*"], { cwd: box.dir });
  expect(await run.proc.exited).toBe(0);
  const out = run.output();
  expect(out).toContain("--to-ports 15006"); // the default inbound capture port: the sentinel that the rules were printed
  expect(out).not.toContain("15444");
}, 30_000);
