// The Kubernetes and Istio YAML istiod-lite serves to the interop suites: two gRPC greeters as
// ServiceEntries, a VirtualService choosing which one `greeter.interop.example` reaches, and a
// Kubernetes Service for the name table.

import { LITE_NAMESPACE } from "./istiod-lite.ts";

export const GREETER_HOST = "greeter.interop.example";
export const GREETER_VIP = "240.240.0.10";
export const REVIEWS_VIP = "10.96.0.42";
export const REVIEWS_FQDN = `reviews.${LITE_NAMESPACE}.svc.cluster.local`;

const greeterEntry = (name: string, host: string, vip: string, port: number) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: ${name}
  namespace: ${LITE_NAMESPACE}
spec:
  hosts:
  - ${host}
  addresses:
  - ${vip}
  location: MESH_EXTERNAL
  resolution: STATIC
  ports:
  - number: 50051
    name: grpc
    protocol: GRPC
  endpoints:
  - address: 127.0.0.1
    ports:
      grpc: ${port}`;

/** `greeter.interop.example:50051` routed to the greeter listening on `routeTo` (a or b). */
export function meshYaml(ports: { a: number; b: number }, routeTo: "a" | "b"): string {
  const target = routeTo === "a" ? GREETER_HOST : `greeter-b.interop.example`;
  return [
    greeterEntry("greeter", GREETER_HOST, GREETER_VIP, ports.a),
    greeterEntry("greeter-b", "greeter-b.interop.example", "240.240.0.11", ports.b),
    `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: greeter
  namespace: ${LITE_NAMESPACE}
spec:
  hosts:
  - ${GREETER_HOST}
  http:
  - route:
    - destination:
        host: ${target}
        port:
          number: 50051`,
    `apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: ${LITE_NAMESPACE}
spec:
  clusterIP: ${REVIEWS_VIP}
  ports:
  - name: http
    port: 9080
    protocol: TCP`,
  ].join("\n---\n");
}
