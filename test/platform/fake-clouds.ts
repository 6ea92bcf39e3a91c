// Fake instance metadata services speaking each cloud's documented API: GCE's computeMetadata/v1
// (403 without `Metadata-Flavor: Google`, which it echoes on every answer), EC2's IMDS with
// IMDSv2 session tokens (PUT /latest/api/token with a TTL header) and Azure's IMDS (400 without
// `Metadata: true`, versions listing without api-version). Every request is recorded.

export interface Seen {
  method: string;
  path: string;
  headers: Record<string, string>;
}

export interface FakeCloud {
  url: string;
  host: string;
  seen: Seen[];
  stop(): void;
}

export interface FakeCloudOptions {
  hostname?: string;
  port?: number;
}

function serve(handler: (req: Request, url: URL) => Response | Promise<Response>, opts: FakeCloudOptions = {}): FakeCloud {
  const seen: Seen[] = [];
  const server = Bun.serve({
    hostname: opts.hostname ?? "127.0.0.1",
    port: opts.port ?? 0,
    fetch(req) {
      const url = new URL(req.url);
      seen.push({ method: req.method, path: url.pathname + url.search, headers: Object.fromEntries(req.headers) });
      return handler(req, url);
    },
  });
  const name = server.hostname ?? "127.0.0.1";
  const host = `${name.includes(":") ? `[${name}]` : name}:${server.port}`;
  return { url: `http://${host}`, host, seen, stop: () => server.stop(true) };
}

export interface GceValues {
  projectId: string;
  numericProjectId: string;
  zone: string;
  instanceName: string;
  instanceId: string;
  attributes: Record<string, string>;
  /** instance/service-accounts/default/identity answers, keyed by audience. */
  identity?: (audience: string, format: string) => string;
  /** instance/service-accounts/default/token's access token (absent: 404, no service account). */
  accessToken?: string;
  /** The Compute API's instance resource labels, served at /compute/v1/... with the access token; "slow" never answers in time. */
  instanceLabels?: Record<string, string> | "slow";
}

export function fakeGce(v: GceValues, opts?: FakeCloudOptions): FakeCloud {
  const google = { "Metadata-Flavor": "Google", "Content-Type": "application/text" };
  return serve((req, url) => {
    if (url.pathname === "/") return new Response("computeMetadata/\n", { headers: google });
    const instance = `/compute/v1/projects/${v.projectId}/zones/${v.zone}/instances/${v.instanceName}`;
    if (url.pathname.startsWith("/compute/v1/")) {
      const json = { "Content-Type": "application/json; charset=UTF-8" };
      if (!v.accessToken || req.headers.get("authorization") !== `Bearer ${v.accessToken}`)
        return new Response('{"error":{"code":401,"status":"UNAUTHENTICATED"}}', { status: 401, headers: json });
      if (url.pathname !== instance) return new Response('{"error":{"code":404,"status":"NOT_FOUND"}}', { status: 404, headers: json });
      if (v.instanceLabels === "slow") return Bun.sleep(10_000).then(() => new Response("{}", { headers: json }));
      return new Response(
        JSON.stringify({ kind: "compute#instance", id: v.instanceId, name: v.instanceName, ...(v.instanceLabels ? { labels: v.instanceLabels } : {}) }),
        { headers: json },
      );
    }
    if (req.headers.get("metadata-flavor") !== "Google") return new Response("Missing Metadata-Flavor:Google header.", { status: 403, headers: google });
    const p = url.pathname.replace(/^\/computeMetadata\/v1\//, "");
    const values: Record<string, string> = {
      "project/project-id": v.projectId,
      "project/numeric-project-id": v.numericProjectId,
      "instance/zone": `projects/${v.numericProjectId}/zones/${v.zone}`,
      "instance/name": v.instanceName,
      "instance/id": v.instanceId,
    };
    for (const [k, x] of Object.entries(v.attributes)) values[`instance/attributes/${k}`] = x;
    if (p === "instance/service-accounts/default/token" && v.accessToken) {
      return new Response(JSON.stringify({ access_token: v.accessToken, expires_in: 3599, token_type: "Bearer" }), {
        headers: { ...google, "Content-Type": "application/json" },
      });
    }
    if (p === "instance/service-accounts/default/identity" && v.identity) {
      const aud = url.searchParams.get("audience");
      if (!aud) return new Response("non-empty audience parameter required", { status: 400, headers: google });
      return new Response(v.identity(aud, url.searchParams.get("format") ?? "standard"), { headers: google });
    }
    const x = values[p];
    return x === undefined ? new Response("Not Found", { status: 404, headers: google }) : new Response(x, { headers: google });
  }, opts);
}

export interface AwsValues {
  region: string;
  zone: string;
  instanceId: string;
  iamInfo: string;
  /** "v2": tokens required (IMDSv2 only); "v1": no token endpoint (IMDSv1 only); "both". */
  mode: "v1" | "v2" | "both";
}

export function fakeAws(v: AwsValues, opts?: FakeCloudOptions): FakeCloud {
  const tokens = new Set<string>();
  return serve((req, url) => {
    if (url.pathname === "/latest/api/token") {
      if (v.mode === "v1") return new Response("Not Found", { status: 404 });
      if (req.method !== "PUT") return new Response("", { status: 405 });
      const ttl = Number(req.headers.get("x-aws-ec2-metadata-token-ttl-seconds"));
      if (!(ttl >= 1 && ttl <= 21600)) return new Response("", { status: 400 });
      const t = `AQAEA${tokens.size}-token==`;
      tokens.add(t);
      return new Response(t, { headers: { "X-aws-ec2-metadata-token-ttl-seconds": String(ttl) } });
    }
    const token = req.headers.get("x-aws-ec2-metadata-token");
    if (token !== null && !tokens.has(token)) return new Response("", { status: 401 });
    if (token === null && v.mode === "v2") return new Response("", { status: 401 });
    const values: Record<string, string> = {
      "/latest/meta-data/placement/region": v.region,
      "/latest/meta-data/placement/availability-zone": v.zone,
      "/latest/meta-data/instance-id": v.instanceId,
      "/latest/meta-data/iam/info": v.iamInfo,
    };
    const x = values[url.pathname];
    return x === undefined ? new Response("Not Found", { status: 404 }) : new Response(x);
  }, opts);
}

export interface AzureValues {
  newestVersions: string[];
  compute: Record<string, unknown>;
}

export function fakeAzure(v: AzureValues, opts?: FakeCloudOptions): FakeCloud {
  return serve((req, url) => {
    if (url.pathname !== "/metadata/instance") return new Response(JSON.stringify({ error: "Not found" }), { status: 404 });
    if (req.headers.get("metadata")?.toLowerCase() !== "true")
      return new Response(JSON.stringify({ error: "Bad request. Required metadata header not specified" }), { status: 400 });
    const version = url.searchParams.get("api-version");
    if (!version)
      return new Response(JSON.stringify({ error: "Bad request. api-version was not specified in the request", "newest-versions": v.newestVersions }), {
        status: 400,
      });
    return Response.json({ compute: { ...v.compute }, network: { interface: [] } });
  }, opts);
}
