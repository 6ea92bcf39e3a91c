// What the kubelet makes of a rendered pod's container, for the injection differential: the
// process's argv and environment (fieldRef and resourceFieldRef values, $(VAR) expansion as
// Kubernetes does it), and its volumes as directories under a per-pod root (downward-API files,
// the projected token, the root-certificate ConfigMap, empty dirs). Mount paths are absolute in
// the pod; here they live under the root, the agents run with the root as working directory
// (Istio's agent reads ./etc/istio/pod, ./var/run/secrets/... relative to it), and an absolute
// path in an env value or argument that lies under a mount is rebased onto the root, the same
// for both agents.

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Container, K8sWorkload, PodMeta, PodSpec } from "./injector.ts";

/** What the API server and the node add: the pod's identity, addresses and the node's capacity. */
export interface PodIdentity {
  name: string;
  namespace: string;
  uid: string;
  podIP: string;
  hostIP: string;
  nodeName: string;
  /** Node allocatable, used for a resourceFieldRef when the container has no limit (as the kubelet does). */
  nodeCpu: string;
  nodeMemory: string;
  /** Secrets the node would fetch: the projected service-account token, the istio-ca-root-cert ConfigMap's root-cert.pem. */
  token: string;
  rootCert: string;
}

export interface Pod {
  meta: Required<Pick<PodMeta, "labels" | "annotations">> & { name: string; namespace: string };
  spec: PodSpec;
  id: PodIdentity;
}

/** The pod the ReplicaSet would create from a rendered Deployment, with the kubelet's own annotations. */
export function podOf(w: K8sWorkload, id: PodIdentity): Pod {
  const t = w.spec.template;
  const labels = { ...(t.metadata.labels ?? {}), "pod-template-hash": "7d9f8b6c5d" };
  const annotations = {
    ...(t.metadata.annotations ?? {}),
    "kubernetes.io/config.seen": "2026-11-27T20:00:00.000000000Z",
    "kubernetes.io/config.source": "api",
  };
  return { meta: { name: id.name, namespace: id.namespace, labels, annotations }, spec: t.spec, id };
}

/** Every container of the pod by name: init containers (native sidecars among them) and containers. */
export function container(pod: Pod, name: string): Container | undefined {
  return [...(pod.spec.initContainers ?? []), ...pod.spec.containers].find((c) => c.name === name);
}

/** Kubernetes' $(VAR) expansion: $$ is a literal $, $(NAME) the value when defined, else left as written. */
export function expand(s: string, vars: Record<string, string>): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if (ch !== "$" || i + 1 >= s.length) {
      out += ch;
      continue;
    }
    const next = s[i + 1]!;
    if (next === "$") {
      out += "$";
      i++;
    } else if (next === "(") {
      const end = s.indexOf(")", i + 2);
      if (end < 0) {
        out += s.slice(i);
        break;
      }
      const name = s.slice(i + 2, end);
      out += Object.hasOwn(vars, name) ? vars[name] : `$(${name})`;
      i = end;
    } else {
      out += ch;
    }
  }
  return out;
}

/** A resource quantity ("500m", "2", "1Gi", "128Mi", "1.5") as a number of base units. */
export function quantity(q: string): number {
  const m = /^([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(q);
  if (!m) throw new Error(`resource quantity ${JSON.stringify(q)}: not a quantity this harness knows`);
  const mult: Record<string, number> = { m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
  return Number(m[1]) * (m[2] ? mult[m[2]]! : 1);
}

/** The value of a resourceFieldRef: ceil(value / divisor), the limit falling back to the node's allocatable. */
function resourceValue(pod: Pod, c: Container, ref: { resource: string; divisor?: string; containerName?: string }): string {
  const target = ref.containerName ? container(pod, ref.containerName) : c;
  if (!target) throw new Error(`resourceFieldRef names container ${ref.containerName}, which the pod has not`);
  const [kind, res] = ref.resource.split(".") as ["limits" | "requests", "cpu" | "memory"];
  const node = res === "cpu" ? pod.id.nodeCpu : pod.id.nodeMemory;
  const limit = target.resources?.limits?.[res];
  const request = target.resources?.requests?.[res];
  // Kubernetes: a missing limit is the node's allocatable; a missing request is the limit, else 0 (cpu requests default to 0 here).
  const raw = kind === "limits" ? (limit ?? node) : (request ?? limit ?? "0");
  const divisor = quantity(ref.divisor ?? "1");
  const v = Math.ceil(Math.round((quantity(raw) / divisor) * 1e6) / 1e6);
  return String(res === "cpu" && kind === "limits" ? Math.max(v, 1) : v);
}

/** Go's %q for the downward-API map files (printable ASCII values in this corpus: JSON's quoting is the same there). */
const goQuote = (s: string): string => JSON.stringify(s);

/** The downward API's labels/annotations file: key="value" lines, sorted by key, no trailing newline. */
export function formatMap(m: Record<string, string>): string {
  return Object.keys(m)
    .sort()
    .map((k) => `${k}=${goQuote(m[k]!)}`)
    .join("\n");
}

function fieldValue(pod: Pod, path: string): string {
  const sub = /^metadata\.(labels|annotations)\['(.+)'\]$/.exec(path);
  if (sub) return (sub[1] === "labels" ? pod.meta.labels : pod.meta.annotations)[sub[2]!] ?? "";
  switch (path) {
    case "metadata.name":
      return pod.meta.name;
    case "metadata.namespace":
      return pod.meta.namespace;
    case "metadata.uid":
      return pod.id.uid;
    case "metadata.labels":
      return formatMap(pod.meta.labels);
    case "metadata.annotations":
      return formatMap(pod.meta.annotations);
    case "spec.nodeName":
      return pod.id.nodeName;
    case "spec.serviceAccountName":
      return pod.spec.serviceAccountName ?? "default";
    case "status.hostIP":
    case "status.hostIPs":
      return pod.id.hostIP;
    case "status.podIP":
    case "status.podIPs":
      return pod.id.podIP;
  }
  throw new Error(`fieldRef ${path}: not a field this harness knows`);
}

/** Environment the container runtime and the kubelet add to every container (service links of the default namespace). */
const RUNTIME_ENV = {
  KUBERNETES_SERVICE_HOST: "10.96.0.1",
  KUBERNETES_SERVICE_PORT: "443",
  KUBERNETES_SERVICE_PORT_HTTPS: "443",
  KUBERNETES_PORT: "tcp://10.96.0.1:443",
  KUBERNETES_PORT_443_TCP: "tcp://10.96.0.1:443",
  KUBERNETES_PORT_443_TCP_PROTO: "tcp",
  KUBERNETES_PORT_443_TCP_PORT: "443",
  KUBERNETES_PORT_443_TCP_ADDR: "10.96.0.1",
};

export interface Process {
  /** command + args after expansion (the image's entrypoint for istio-proxy is pilot-agent: argv[0] is left to the runner). */
  args: string[];
  env: Record<string, string>;
}

/** Rebases absolute paths under the container's mounts onto `root`. */
function rebase(c: Container, root: string, s: string): string {
  let out = s;
  const mounts = (c.volumeMounts ?? []).map((m) => m.mountPath).sort((a, b) => b.length - a.length);
  for (const m of mounts) out = out.replace(new RegExp(`(^|[=:,\\s"])${m.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?=/|$|[\\s",])`, "g"), `$1${root}${m}`);
  return out;
}

/**
 * The container's process as the kubelet starts it: env in order (each value expanded with the
 * variables defined before it), then command/args expanded with the whole environment. The
 * image's PATH and HOSTNAME come first, as the runtime sets them.
 */
export function processOf(pod: Pod, c: Container, root: string): Process {
  const env: Record<string, string> = { PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", HOSTNAME: pod.meta.name, ...RUNTIME_ENV };
  const defined: Record<string, string> = {};
  for (const e of c.env ?? []) {
    let v: string;
    if (e.valueFrom?.fieldRef) v = fieldValue(pod, e.valueFrom.fieldRef.fieldPath);
    else if (e.valueFrom?.resourceFieldRef) v = resourceValue(pod, c, e.valueFrom.resourceFieldRef);
    else v = expand(e.value ?? "", { ...RUNTIME_ENV, ...defined });
    defined[e.name] = v;
  }
  for (const [k, v] of Object.entries(defined)) env[k] = rebase(c, root, v);
  const args = [...(c.command ?? []), ...(c.args ?? [])].map((a) => rebase(c, root, expand(a, { ...RUNTIME_ENV, ...defined })));
  return { args, env };
}

/**
 * The container's mounts as the kubelet projects them: each mount path (relative, no leading /)
 * with the files in it (downward-API items, the projected token, the mesh root's ConfigMap;
 * empty dirs and the optional, absent CRL ConfigMap hold none).
 */
export function volumeFiles(pod: Pod, c: Container): { dirs: string[]; files: Record<string, string> } {
  const dirs: string[] = [];
  const files: Record<string, string> = {};
  for (const m of c.volumeMounts ?? []) {
    const v = (pod.spec.volumes ?? []).find((x) => x.name === m.name);
    if (!v) throw new Error(`container ${c.name} mounts ${m.name}, which the pod does not declare`);
    const dir = m.mountPath.replace(/^\/+/, "");
    dirs.push(dir);
    if (v.downwardAPI) for (const it of v.downwardAPI.items) if (it.fieldRef) files[join(dir, it.path)] = fieldValue(pod, it.fieldRef.fieldPath);
    for (const s of v.projected?.sources ?? []) if (s.serviceAccountToken) files[join(dir, s.serviceAccountToken.path)] = pod.id.token;
    // The only ConfigMaps the templates mount: the mesh root (present) and the CRL (optional, absent).
    if (v.configMap?.name === "istio-ca-root-cert") files[join(dir, "root-cert.pem")] = pod.id.rootCert;
  }
  return { dirs, files };
}

/** Creates the container's mounts under `root` (volumeFiles written out). */
export function mountVolumes(pod: Pod, c: Container, root: string): void {
  const { dirs, files } = volumeFiles(pod, c);
  for (const d of dirs) mkdirSync(join(root, d), { recursive: true });
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(join(root, rel, ".."), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
}
