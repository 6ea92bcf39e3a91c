// Renders workloads with Istio's own sidecar injector (test/interop/injector, built from the
// oracle's pkg/kube/inject over the chart its module carries): one call for a whole corpus, so
// the chart is rendered once per installation.

import { join } from "node:path";
import { INJECTOR, istioSource } from "./go-build.ts";

/** An installation: the chart rendered with these helm --set flags, plus custom templates. */
export interface Install {
  id: string;
  set: string[];
  templates?: Record<string, string>;
}

export interface Workload {
  name: string;
  install: string;
  /** A Deployment (or Pod, ...) as the API server would take it. */
  object: Record<string, unknown>;
}

export interface Rendered {
  name: string;
  /** The injected workload; undefined when the injector refused it (`error`). */
  object?: K8sWorkload;
  error?: string;
  warnings?: string[];
}

/** The parts of a Deployment the harness reads. */
export interface K8sWorkload {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: { template: { metadata: PodMeta; spec: PodSpec } };
}
export interface PodMeta {
  name?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: Volume[];
  serviceAccountName?: string;
  terminationGracePeriodSeconds?: number;
}
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; resourceFieldRef?: { resource: string; divisor?: string; containerName?: string } };
}
export interface Probe {
  httpGet?: { path?: string; port: number | string; scheme?: string };
  tcpSocket?: { port: number | string };
  grpc?: { port: number; service?: string };
  exec?: { command: string[] };
  initialDelaySeconds?: number;
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
}
export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: { name?: string; containerPort: number; protocol?: string }[];
  resources?: { limits?: Record<string, string>; requests?: Record<string, string> };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { postStart?: { exec?: { command: string[] } }; preStop?: { exec?: { command: string[] } } };
  restartPolicy?: string;
}
export interface Volume {
  name: string;
  emptyDir?: Record<string, unknown>;
  downwardAPI?: { items: { path: string; fieldRef?: { fieldPath: string } }[] };
  projected?: { sources: { serviceAccountToken?: { path: string; audience?: string } }[] };
  configMap?: { name: string; optional?: boolean };
  secret?: { secretName: string; optional?: boolean };
  csi?: Record<string, unknown>;
}

/** Runs Istio's injector over the workloads; throws with its stderr when it fails as a whole. */
export async function renderWorkloads(installs: Install[], workloads: Workload[]): Promise<Rendered[]> {
  const p = Bun.spawn([INJECTOR], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", INJECTOR_MANIFESTS: join(istioSource(), "manifests") },
    stdin: new TextEncoder().encode(JSON.stringify({ installs, pods: workloads })),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`injector exited ${code}: ${err.slice(-3000)}`);
  return (JSON.parse(out) as { pods: Rendered[] }).pods;
}
