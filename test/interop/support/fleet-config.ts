// The mesh the fleet benchmark (bench/fleet.ts) and its test (test/interop/fleet.test.ts) serve
// from istiod-lite: Kubernetes Services with EndpointSlices spread over namespaces, ServiceEntries
// (static endpoints and DNS), and a Sidecar that scopes the fleet's pods to part of it; and the
// changes applied while the fleet runs. Every change carries a mark: a text that appears as one
// whole protobuf string field (an endpoint address) in the resource that delivers it, so the
// stand-ins can say when each pod ACKed it.

/** The namespace of the fleet's pods (and of the Sidecar and ServiceEntries). */
export const FLEET_NAMESPACE = "fleet";

export interface MeshShape {
  /** Kubernetes Services (at least 200 for the bench). */
  services: number;
  /** Endpoints per Service. */
  endpointsPerService: number;
  /** Namespaces the Services are spread over; the Sidecar imports the first half. */
  namespaces: number;
  serviceEntries: number;
}

export const BENCH_MESH: MeshShape = { services: 200, endpointsPerService: 5, namespaces: 10, serviceEntries: 20 };

const ns = (i: number) => `apps-${i}`;
const PORTS: { name: string; port: number }[] = [
  { name: "http", port: 8080 },
  { name: "grpc", port: 9090 },
  { name: "tcp", port: 5432 },
];
const ip = (a: number, b: number, n: number) => `${a}.${b}.${(n >> 8) & 255}.${n & 255}`;

function service(name: string, namespace: string, clusterIP: string, port: { name: string; port: number }): string {
  return `apiVersion: v1
kind: Service
metadata:
  name: ${name}
  namespace: ${namespace}
spec:
  clusterIP: ${clusterIP}
  ports:
  - name: ${port.name}
    port: ${port.port}
    protocol: TCP`;
}

function slice(service: string, namespace: string, port: { name: string; port: number }, addresses: string[]): string {
  return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ${service}-slice
  namespace: ${namespace}
  labels:
    kubernetes.io/service-name: ${service}
addressType: IPv4
ports:
- name: ${port.name}
  port: ${port.port}
  protocol: TCP
endpoints:
${addresses.map((a) => `- addresses: ["${a}"]\n  conditions:\n    ready: true`).join("\n")}`;
}

function serviceEntry(i: number): string {
  const dns = i % 2 === 1;
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: ext-${i}
  namespace: ${FLEET_NAMESPACE}
spec:
  hosts: ["ext-${i}.example.com"]
  addresses: ["${ip(240, 240, i + 1)}"]
  location: MESH_EXTERNAL
  ports:
  - number: 443
    name: tls
    protocol: TLS
  resolution: ${dns ? "DNS" : "STATIC"}
  endpoints:
${dns ? `  - address: ext-${i}.example.com` : `  - address: ${ip(10, 250, i * 2 + 1)}\n  - address: ${ip(10, 250, i * 2 + 2)}`}`;
}

function sidecar(shape: MeshShape): string {
  const imported = Array.from({ length: Math.ceil(shape.namespaces / 2) }, (_, i) => `    - "${ns(i)}/*"`);
  return `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: ${FLEET_NAMESPACE}
spec:
  egress:
  - hosts:
    - "./*"
    - "istio-system/*"
${imported.join("\n")}`;
}

/** The served config: keyed documents so a change replaces its document in what a restart reads. */
export class FleetMesh {
  readonly docs = new Map<string, string>();
  private endpoints = new Map<string, string[]>();
  private small = 0;
  private large = 0;

  constructor(readonly shape: MeshShape) {
    for (let i = 0; i < shape.services; i++) {
      const namespace = ns(i % shape.namespaces);
      const name = `svc-${i}`;
      const port = PORTS[i % PORTS.length]!;
      const addrs = Array.from({ length: shape.endpointsPerService }, (_, e) => ip(10, 1, i * shape.endpointsPerService + e + 1));
      this.docs.set(`Service/${namespace}/${name}`, service(name, namespace, ip(10, 96, i + 1), port));
      this.docs.set(`EndpointSlice/${namespace}/${name}`, slice(name, namespace, port, addrs));
      this.endpoints.set(`${namespace}/${name}`, addrs);
    }
    for (let i = 0; i < shape.serviceEntries; i++) this.docs.set(`ServiceEntry/${FLEET_NAMESPACE}/ext-${i}`, serviceEntry(i));
    this.docs.set(`Sidecar/${FLEET_NAMESPACE}/default`, sidecar(shape));
  }

  /** Every document, for istiod-lite's config folder. */
  yaml(): string {
    return [...this.docs.values()].join("\n---\n") + "\n";
  }

  /** Services the pods' Sidecar imports (the namespaces of the first half). */
  private visible(k: number): { namespace: string; name: string; index: number } {
    const perRound = Math.ceil(this.shape.namespaces / 2);
    for (let step = 0; ; step++) {
      const index = (k * 7 + step) % this.shape.services;
      if (index % this.shape.namespaces < perRound) return { namespace: ns(index % this.shape.namespaces), name: `svc-${index}`, index };
    }
  }

  /** One more endpoint for an imported Service: the EndpointSlice to apply and its mark. */
  smallChange(): { yaml: string; mark: string } {
    const k = this.small++;
    const s = this.visible(k);
    const key = `${s.namespace}/${s.name}`;
    const mark = ip(10, 200, k + 1);
    const addrs = [...this.endpoints.get(key)!, mark];
    this.endpoints.set(key, addrs);
    const doc = slice(s.name, s.namespace, PORTS[s.index % PORTS.length]!, addrs);
    this.docs.set(`EndpointSlice/${key}`, doc);
    return { yaml: doc, mark };
  }

  /** A new Service with `endpoints` endpoints in an imported namespace; its mark is its last endpoint. */
  largeChange(endpoints: number): { yaml: string; mark: string } {
    const k = this.large++;
    const namespace = ns(k % Math.ceil(this.shape.namespaces / 2));
    const name = `new-${k}`;
    const port = PORTS[0]!;
    const addrs = Array.from({ length: endpoints }, (_, e) => ip(10, 201, k * 256 + e + 1));
    const svc = service(name, namespace, ip(10, 97, k + 1), port);
    const sl = slice(name, namespace, port, addrs);
    this.docs.set(`Service/${namespace}/${name}`, svc);
    this.docs.set(`EndpointSlice/${namespace}/${name}`, sl);
    return { yaml: `${svc}\n---\n${sl}`, mark: addrs[addrs.length - 1]! };
  }
}
