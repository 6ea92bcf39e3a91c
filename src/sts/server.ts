// The Security Token Service's HTTP server (Istio's stsservice/server): `POST /token` takes an
// RFC 8693 token exchange request and answers with the token manager's token or the RFC's error
// JSON (400 invalid_request for a bad request, 500 invalid_target when no token can be issued);
// `/stsStatus` dumps the token manager's status. It listens on one loopback address only.
// Neither the subject token nor the issued token is ever logged.

import type { Component } from "../lib/component.ts";
import type { Logger } from "../lib/log.ts";
import { readCapped } from "../platform/http.ts";
import type { TokenManager } from "./google.ts";
import { errorBody, errorStatus, STATUS_PATH, STS_FORM_CAP, successBody, TOKEN_PATH, validateStsRequest, type StsErrorCode } from "./protocol.ts";
import { errorMessage } from "../lib/errors.ts";

/** Istio's IdleTimeout (90 s); Bun bounds a silent connection with it. */
const IDLE_TIMEOUT_SEC = 90;

export class StsServerError extends Error {
  override name = "StsServerError";
}

export interface StsServerOptions {
  /** 127.0.0.1 or ::1. */
  host: string;
  port: number;
  /** Resolves to the token manager (it may first need the platform's project number). */
  tokenManager: () => Promise<TokenManager>;
  log: Logger;
}

export class StsServer implements Component {
  readonly name = "sts";
  private server: ReturnType<typeof Bun.serve> | undefined;
  private manager: TokenManager | undefined;
  private done: Promise<void> = Promise.resolve();

  constructor(private readonly opts: StsServerOptions) {}

  /** The bound port (the flag's, or the one chosen for port 0 in tests). */
  port(): number {
    return this.server?.port ?? 0;
  }

  async start(signal: AbortSignal): Promise<void> {
    // Istio creates the token manager before it listens: a plugin that cannot start stops the agent.
    this.manager = await this.opts.tokenManager();
    const { host, port } = this.opts;
    try {
      this.server = Bun.serve({
        hostname: host,
        port,
        idleTimeout: IDLE_TIMEOUT_SEC,
        // A transport-level bound; handle() answers with the RFC's error below it.
        maxRequestBodySize: 4 * STS_FORM_CAP,
        fetch: (req) => this.handle(req),
        error: (e) => {
          this.opts.log.error(`STS server: ${e.message}`);
          return new Response("internal error\n", { status: 500 });
        },
      });
    } catch (e) {
      throw new StsServerError(`STS server cannot listen on ${host.includes(":") ? `[${host}]` : host}:${port} (--stsPort): ${errorMessage(e)}`);
    }
    this.opts.log.info(`Start listening on ${host}:${this.port()}`);
    let resolveDone!: () => void;
    this.done = new Promise((r) => (resolveDone = r));
    const stop = async () => {
      await this.server?.stop(true);
      resolveDone();
    };
    if (signal.aborted) void stop();
    else signal.addEventListener("abort", () => void stop(), { once: true });
  }

  stopped(): Promise<void> {
    return this.done;
  }

  /** Route one request (exposed for tests). */
  async handle(req: Request): Promise<Response> {
    const path = new URL(req.url).pathname;
    if (path === TOKEN_PATH) return this.token(req);
    if (path === STATUS_PATH) return this.status();
    return new Response("404 page not found\n", { status: 404, headers: { "Content-Type": "text/plain; charset=utf-8" } });
  }

  private async token(req: Request): Promise<Response> {
    let body = "";
    if (req.method === "POST") {
      try {
        body = await readCapped(req, STS_FORM_CAP);
      } catch (e) {
        return this.fail("invalid_request", `failed to parse query from STS request: request body larger than ${STS_FORM_CAP} bytes (${errorMessage(e)})`);
      }
    }
    const v = validateStsRequest(req.method, req.headers.get("content-type"), body);
    if (!v.ok) {
      this.opts.log.warn(`STS request is invalid: ${v.reason}`);
      return this.fail("invalid_request", v.reason);
    }
    try {
      const t = await this.manager!.exchange(v.request);
      this.opts.log.debug("sent out STS success response");
      return new Response(successBody(t.accessToken, t.expiresInSec), { status: 200, headers: { "Content-Type": "application/json" } });
    } catch (e) {
      this.opts.log.warn(`token manager fails to generate token: ${errorMessage(e)}`);
      return this.fail("invalid_target", errorMessage(e));
    }
  }

  private status(): Response {
    try {
      return new Response(this.manager!.dump(), { status: 200, headers: { "Content-Type": "application/json" } });
    } catch (e) {
      this.opts.log.error(`token manager failed at dumping token status: ${errorMessage(e)}`);
      return new Response(`failure in dumping STS server status: ${errorMessage(e)}`, { status: 500 });
    }
  }

  private fail(code: StsErrorCode, description: string): Response {
    return new Response(errorBody(code, description), { status: errorStatus(code), headers: { "Content-Type": "application/json" } });
  }
}
