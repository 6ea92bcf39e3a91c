// `agent request <method> <path> [body] [--debug-port N]`: an HTTP call to the local Envoy admin or
// status port (pilot-agent's app/request.go and pilot/pkg/request). The method and body go out
// exactly as given (no upper-casing; a GET may carry a body) and the response body is printed
// followed by a newline, as Go's fmt.Println does: istioctl parses that output. Fails when the
// status is > 399 and not 404.

import { parseFlags, type FlagSpec } from "../lib/flags.ts";
import { CliError, type CliIO } from "./io.ts";
import { localRequest, type LocalRequest, type LocalResponse } from "../lib/localhttp.ts";
import { errorMessage } from "../lib/errors.ts";

export const ALLOWED_DEBUG_PORTS = [15000, 15004, 15020, 15021];

export const REQUEST_FLAGS: FlagSpec[] = [
  { name: "debug-port", type: "int", default: 15000, usage: "Set the port to make a local request to. The default points to the Envoy admin API." },
];

export type RequestSender = (req: LocalRequest) => Promise<LocalResponse>;

export async function runRequest(argv: string[], io: CliIO, send: RequestSender = localRequest): Promise<number> {
  const { values, positionals } = parseFlags(argv, REQUEST_FLAGS);
  if (positionals.length < 2) throw new CliError(`requires at least 2 arg(s), only received ${positionals.length}`);
  const port = values["debug-port"] as number;
  if (!ALLOWED_DEBUG_PORTS.includes(port)) throw new CliError(`debug port ${port} is not in allowed list [${ALLOWED_DEBUG_PORTS.join(" ")}]`);
  const [method, rawPath, body = ""] = positionals as [string, string, string | undefined];
  const path = rawPath.replace(/^\//, "");
  let res: LocalResponse;
  try {
    res = await send({ host: "localhost", port, method, path, body, timeoutMs: 60_000 });
  } catch (e) {
    throw new CliError(`${method} "http://localhost:${port}/${path}": ${errorMessage(e)}`, undefined, { cause: e });
  }
  const text = res.body.toString("utf8");
  if (res.status > 399 && res.status !== 404) throw new CliError(`received unsuccessful status code ${res.status}: ${text}`);
  io.out(text + "\n");
  return 0;
}
