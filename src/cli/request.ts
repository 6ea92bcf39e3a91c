// `agent request <method> <path> [body] [--debug-port N]`: an HTTP call to the local Envoy admin or
// status port (pilot-agent's app/request.go). Prints only the response body: istioctl parses it.
// Fails when the status is > 399 and not 404.

import { parseFlags, type FlagSpec } from "./flags.ts";
import { CliError, type CliIO } from "./io.ts";

export const ALLOWED_DEBUG_PORTS = [15000, 15020, 15021, 15004];

export const REQUEST_FLAGS: FlagSpec[] = [
  { name: "debug-port", type: "int", default: 15000, usage: "Set the port to make a local request to. The default points to the Envoy admin API." },
];

export async function runRequest(argv: string[], io: CliIO, fetchImpl: typeof fetch = fetch): Promise<number> {
  const { values, positionals } = parseFlags(argv, REQUEST_FLAGS);
  if (positionals.length < 2) throw new CliError(`requires at least 2 arg(s), only received ${positionals.length}: usage: agent request <method> <path> [<body>]`);
  const port = values["debug-port"] as number;
  if (!ALLOWED_DEBUG_PORTS.includes(port)) throw new CliError(`debug port ${port} is not in allowed list [${ALLOWED_DEBUG_PORTS.join(" ")}]`);
  const [method, rawPath, body] = positionals as [string, string, string | undefined];
  const url = `http://localhost:${port}/${rawPath.replace(/^\//, "")}`;
  let res: Response;
  try {
    res = await fetchImpl(url, { method: method.toUpperCase(), body: body && !["GET", "HEAD"].includes(method.toUpperCase()) ? body : undefined, signal: AbortSignal.timeout(60_000) });
  } catch (e) {
    throw new CliError(`${method.toUpperCase()} ${url}: ${(e as Error).message}`);
  }
  const text = await res.text();
  if (res.status > 399 && res.status !== 404) throw new CliError(`received unsuccessful status code ${res.status}: ${text}`);
  io.out(text.endsWith("\n") ? text : text + "\n");
  return 0;
}
