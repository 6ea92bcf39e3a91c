// What the Envoy stand-ins (the interop suites' and the cold-start benchmark's) share: the part of
// Envoy's bootstrap they read, and the admin API the agents' readiness checks use. Both stand-ins
// count the CDS and LDS updates they ACK; the admin API reports them as Envoy's stats do.

/** The part of an Envoy bootstrap (JSON) the stand-ins read. */
export interface StandinBootstrap {
  node?: { id?: string; cluster?: string; locality?: Record<string, string>; metadata?: Record<string, unknown> };
  admin?: { address?: { socket_address?: { address?: string; port_value?: number } } };
  static_resources?: {
    clusters?: { name: string; load_assignment?: { endpoints?: { lb_endpoints?: { endpoint?: { address?: { pipe?: { path?: string } } } }[] }[] } }[];
  };
}

/** Configuration updates Envoy's stats count (`*.update_success`). */
export interface UpdateCounts {
  cds: number;
  lds: number;
}

/** The Unix socket path of the bootstrap's `xds-grpc` cluster (the agent's XDS socket), if it has one. */
export function xdsPipe(b: StandinBootstrap): string | undefined {
  const c = b.static_resources?.clusters?.find((x) => x.name === "xds-grpc");
  return c?.load_assignment?.endpoints?.[0]?.lb_endpoints?.[0]?.endpoint?.address?.pipe?.path;
}

/**
 * Envoy's admin API as the agents read it, on the bootstrap's admin address: GET /ready (LIVE),
 * GET /stats?filter=<re> (`name: value` lines from `updates`, read at each request),
 * /drain_listeners, /quitquitquit (exits 0 just after answering); anything else 404.
 * `onRequest` sees every request's method and path with its query first (the interop stand-in records them).
 */
export function serveEnvoyAdmin(b: StandinBootstrap, updates: UpdateCounts, onRequest?: (method: string, path: string) => void): void {
  const stats = () => [
    `cluster_manager.cds.update_success: ${updates.cds}`,
    `listener_manager.lds.update_success: ${updates.lds}`,
    "server.state: 0",
    "listener_manager.workers_started: 1",
  ];
  const sa = b.admin?.address?.socket_address ?? {};
  Bun.serve({
    port: sa.port_value ?? 15000,
    hostname: sa.address ?? "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      onRequest?.(req.method, url.pathname + url.search);
      if (url.pathname === "/ready") return new Response("LIVE\n");
      if (url.pathname === "/stats") {
        const re = new RegExp(url.searchParams.get("filter") ?? "");
        return new Response(
          stats()
            .filter((l) => re.test(l.split(":")[0]!))
            .join("\n"),
        );
      }
      if (url.pathname === "/quitquitquit") return (setTimeout(() => process.exit(0), 10), new Response("OK\n"));
      if (url.pathname === "/drain_listeners") return new Response("OK\n");
      return new Response("not found\n", { status: 404 });
    },
  });
}
