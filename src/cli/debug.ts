// `agent debug config_dump|logging`: the status port's operator endpoints from the command line,
// through the same local HTTP client as `agent request` (localhttp.ts). `config_dump` prints
// /debug/config_dump; `logging` prints the log levels, or sets them when given a spec in
// --log_output_level's syntax (`agent debug logging xdsproxy:debug`). `-o json|yaml` picks the
// format. A refused request fails with the agent's own message.

import { parseFlags, type FlagSpec } from "../lib/flags.ts";
import { errorMessage } from "../lib/errors.ts";
import { CliError, type CliIO } from "./io.ts";
import { localRequest } from "../lib/localhttp.ts";
import type { RequestSender } from "./request.ts";

export const DEFAULT_STATUS_PORT = 15020;

export const PORT_FLAG: FlagSpec = {
  name: "port",
  type: "int",
  default: DEFAULT_STATUS_PORT,
  usage: "The agent's status port (statusPort) to ask, on localhost",
};

export const DEBUG_FLAGS: FlagSpec[] = [PORT_FLAG, { name: "output", short: "o", type: "string", default: "json", usage: "Output format: json or yaml" }];

export const DEBUG_TOPICS = ["config_dump", "logging"] as const;

/** One request to the agent's status port on localhost; the body parsed as JSON. Errors name the URL and what to do. */
export async function askAgent(send: RequestSender, port: number, method: string, path: string): Promise<unknown> {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new CliError(`--port ${port}: not a port number (1-65535)`);
  const url = `http://localhost:${port}${path}`;
  let res;
  try {
    res = await send({ host: "localhost", port, method, path: path.replace(/^\//, ""), body: "", timeoutMs: 10_000 });
  } catch (e) {
    throw new CliError(`${method} ${url}: ${errorMessage(e)} (is the agent running, with its status port on ${port}? use --port to name another)`, undefined, {
      cause: e,
    });
  }
  const text = res.body.toString("utf8");
  if (res.status !== 200) throw new CliError(`${method} ${url}: ${res.status}: ${text.trim()}`);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new CliError(`${method} ${url}: the answer is not JSON (${errorMessage(e)}); is port ${port} the agent's status port?`, undefined, { cause: e });
  }
}

/** `value` as JSON or YAML text ending in a newline; another format is an error naming the flag. */
export function formatAs(value: unknown, output: string): string {
  if (output === "json") return JSON.stringify(value, null, 2) + "\n";
  if (output === "yaml") return (require("yaml") as typeof import("yaml")).stringify(value);
  throw new CliError(`-o ${output}: unknown output format (want json or yaml)`);
}

export async function runDebug(argv: string[], io: CliIO, send: RequestSender = localRequest): Promise<number> {
  const { values, positionals } = parseFlags(argv, DEBUG_FLAGS);
  const [topic, ...rest] = positionals;
  const output = String(values.output);
  if (output !== "json" && output !== "yaml") throw new CliError(`-o ${output}: unknown output format (want json or yaml)`);
  const port = values.port as number;
  switch (topic) {
    case "config_dump":
      if (rest.length > 0) throw new CliError(`debug config_dump takes no arguments, got ${JSON.stringify(rest.join(" "))}`);
      io.out(formatAs(await askAgent(send, port, "GET", "/debug/config_dump"), output));
      return 0;
    case "logging": {
      if (rest.length > 1) throw new CliError(`debug logging takes at most one argument (<scope>:<level>,...), got ${rest.length}`);
      const spec = rest[0];
      const answer =
        spec === undefined ? await askAgent(send, port, "GET", "/logging") : await askAgent(send, port, "POST", `/logging?level=${encodeURIComponent(spec)}`);
      io.out(formatAs(answer, output));
      return 0;
    }
    case undefined:
      throw new CliError(`debug needs a topic: ${DEBUG_TOPICS.join(" or ")}`);
    default:
      throw new CliError(`debug ${topic}: unknown topic (want ${DEBUG_TOPICS.join(" or ")})`);
  }
}
