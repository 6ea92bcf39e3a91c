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

/** The Unix socket path of the bootstrap's static cluster `name` (e.g. `sds-grpc`), if it has one. */
export function clusterPipe(b: StandinBootstrap, name: string): string | undefined {
  const c = b.static_resources?.clusters?.find((x) => x.name === name);
  return c?.load_assignment?.endpoints?.[0]?.lb_endpoints?.[0]?.endpoint?.address?.pipe?.path;
}

/** The Unix socket path of the bootstrap's `xds-grpc` cluster (the agent's XDS socket), if it has one. */
export function xdsPipe(b: StandinBootstrap): string | undefined {
  return clusterPipe(b, "xds-grpc");
}

/** What a drain scenario needs of the admin API beyond readiness. */
export interface AdminExtras {
  /**
   * More `name: value` stat lines, as Envoy lists them (e.g. the listeners'
   * `listener.<name>.downstream_cx_active` gauges the agents poll while draining).
   */
  stats?: string[];
  /** Called with the method, path and query of every admin request (recorded by the interop stand-in). */
  onRequest?: (method: string, pathAndQuery: string) => void;
}

/**
 * Envoy's admin API as the agents read it, on the bootstrap's admin address: GET /ready (LIVE),
 * GET /stats?filter=<re> (`name: value` lines from `updates` and `extras.stats`, read at each
 * request, filtered by the regular expression on the name as Envoy does), /drain_listeners,
 * /quitquitquit (exits 0 just after answering); anything else 404. `extras.onRequest` sees every
 * request's method and path with its query first (the interop stand-in records them).
 */
export function serveEnvoyAdmin(b: StandinBootstrap, updates: UpdateCounts, extras: AdminExtras = {}): void {
  const stats = () => [
    `cluster_manager.cds.update_success: ${updates.cds}`,
    `listener_manager.lds.update_success: ${updates.lds}`,
    "server.state: 0",
    "listener_manager.workers_started: 1",
    ...(extras.stats ?? []),
  ];
  const sa = b.admin?.address?.socket_address ?? {};
  Bun.serve({
    port: sa.port_value ?? 15000,
    hostname: sa.address ?? "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      extras.onRequest?.(req.method, url.pathname + url.search);
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
