// The operator's view on the status port, loopback only (as /debug/ndsz and /quitquitquit):
//   GET  /debug/config_dump     the agent's own state as JSON (src/debug/configdump.ts), built on
//                               the main thread when asked
//   GET  /debug/                the same state as an HTML page that refreshes itself (debugpage.ts)
//   GET  /logging               every logging scope and its level
//   POST /logging?level=<spec>  set levels at run time, in --log_output_level's syntax
// The request arrives here from the status thread like every route it does not answer itself; the
// thread forwards no request body, so /logging takes its input from the query string.

import { errorMessage } from "../lib/errors.ts";
import { LogConfigError, type LevelChange, type Logger } from "../lib/log.ts";
import { maybeGzip } from "./gzip.ts";
import { isLoopback, LOCALHOST_ONLY } from "./loopback.ts";

/** Reading and setting the log levels (the agent's LogSink). */
export interface LogLevelControl {
  levels(): Record<string, string>;
  /** Throws LogConfigError naming what is wrong; applies nothing then. */
  set(spec: string): LevelChange[];
}

export interface DebugRoutesOptions {
  log: Logger;
  /** The config dump (undefined: the route answers 404). */
  configDump?: () => unknown;
  logging?: LogLevelControl;
}

const LOGGING_USAGE = "give the levels as ?level=<scope>:<level>,... (the syntax of --log_output_level), e.g. POST /logging?level=xdsproxy:debug";

export class DebugRoutes {
  constructor(private readonly o: DebugRoutesOptions) {}

  /** True for the paths answered here. */
  static owns(path: string): boolean {
    return path === "/logging" || path === "/debug/config_dump" || path === "/debug/" || path === "/debug";
  }

  async handle(path: string, req: Request, remote: string | undefined): Promise<Response> {
    if (!isLoopback(remote)) return text(403, LOCALHOST_ONLY);
    if (path === "/logging") return this.logging(req);
    if (req.method !== "GET" && req.method !== "HEAD") return text(405, `${req.method} ${path}: only GET is allowed`);
    if (path === "/debug/config_dump") {
      if (!this.o.configDump) return text(404, "config dump not available in this agent");
      const dump = await this.o.configDump();
      return maybeGzip(req, json(200, dump));
    }
    const { DEBUG_PAGE } = await import("./debugpage.ts");
    return new Response(DEBUG_PAGE, {
      headers: {
        "content-type": "text/html; charset=utf-8",
        // Everything the page uses is inline; it may fetch only from this port.
        "content-security-policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:",
        "cache-control": "no-store",
      },
    });
  }

  private logging(req: Request): Response {
    const control = this.o.logging;
    if (!control) return text(404, "log levels are not available in this agent");
    const url = new URL(req.url);
    if (req.method === "GET" || req.method === "HEAD") return json(200, { levels: control.levels() });
    if (req.method !== "POST") return text(405, `${req.method} /logging: use GET to read the levels or POST to set them`);
    const unknown = [...url.searchParams.keys()].filter((k) => k !== "level");
    if (unknown.length > 0) return text(400, `POST /logging: unknown parameter ${unknown.map((k) => JSON.stringify(k)).join(", ")}; ${LOGGING_USAGE}\n`);
    const specs = url.searchParams.getAll("level");
    if (specs.length !== 1 || specs[0]!.trim() === "")
      return text(400, `POST /logging: ${specs.length > 1 ? "more than one level parameter" : "no level given"}; ${LOGGING_USAGE}\n`);
    let changes: LevelChange[];
    try {
      changes = control.set(specs[0]!);
    } catch (e) {
      if (!(e instanceof LogConfigError)) throw e;
      return text(400, `POST /logging: ${errorMessage(e)}; nothing was changed\n`);
    }
    for (const c of changes) this.o.log.info(`log level of scope "${c.scope}" changed from ${c.from} to ${c.to} (POST /logging)`);
    if (changes.length === 0) this.o.log.info(`POST /logging?level=${specs[0]}: no level changed`);
    return json(200, { levels: control.levels(), changed: changes });
  }
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body, null, 2) + "\n", { status, headers: { "content-type": "application/json" } });
}

function text(status: number, body: string): Response {
  return new Response(body, { status, headers: { "content-type": "text/plain; charset=utf-8" } });
}
