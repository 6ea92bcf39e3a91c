// The credential SDS socket check against real Unix sockets: a live server, a stale socket file
// left by a killed process, a regular file, nothing.

import { afterEach, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { credentialSocketExists } from "../../src/credentials/socket.ts";

const SOCK = "var/run/secrets/credential-uds/socket";
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function root(): string {
  const r = mkdtempSync(join(tmpdir(), "agent-cred-sock-"));
  mkdirSync(join(r, "var/run/secrets/credential-uds"), { recursive: true });
  cleanups.push(() => rmSync(r, { recursive: true, force: true }));
  return r;
}

test("absent: false", async () => {
  expect(await credentialSocketExists(root())).toBe(false);
});

test("a server accepting on the socket: true, and the socket is left alone", async () => {
  const r = root();
  const server: Server = createServer((c) => c.destroy()).listen(join(r, SOCK));
  await new Promise((ok) => server.once("listening", ok));
  cleanups.push(() => server.close());
  expect(await credentialSocketExists(r)).toBe(true);
  expect(existsSync(join(r, SOCK))).toBe(true);
});

test("a stale socket left by a killed server: false, and removed", async () => {
  const r = root();
  const path = join(r, SOCK);
  const child = Bun.spawn([process.execPath, "-e", `require("node:net").createServer().listen(${JSON.stringify(path)}, () => console.log("up")); setInterval(() => {}, 1e6)`], { stdout: "pipe" });
  const reader = child.stdout.getReader();
  await reader.read(); // "up"
  child.kill("SIGKILL");
  await child.exited;
  expect(existsSync(path)).toBe(true);
  expect(await credentialSocketExists(r)).toBe(false);
  expect(existsSync(path)).toBe(false);
});

test("a regular file there is not a socket: false, and kept", async () => {
  const r = root();
  writeFileSync(join(r, SOCK), "not a socket");
  expect(await credentialSocketExists(r)).toBe(false);
  expect(existsSync(join(r, SOCK))).toBe(true);
});
