// A richer local xDS file for server tests: two listeners (proxyless api_listener and an Envoy
// TCP listener), a route, an EDS and a STATIC cluster with TLS via SDS, endpoints and a secret.

export interface FixtureOptions {
  bTimeout?: string;
  aPort?: number;
  withA?: boolean;
  typo?: boolean;
}

export function fixtureYaml(o: FixtureOptions = {}): string {
  const withA = o.withA ?? true;
  return `
listeners:
  - name: svc.test:80
    api_listener:
      api_listener:
        "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
        rds: { route_config_name: svc-route, config_source: { ads: {}, resource_api_version: V3 } }
        http_filters:
          - name: router
            typed_config: { "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router }
  - name: tcp-in
    address: { socket_address: { address: 0.0.0.0, port_value: 15006 } }
    traffic_direction: INBOUND
    filter_chains:
      - filters:
          - name: envoy.filters.network.tcp_proxy
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
              statPrefix: in
              cluster: b
routes:
  - name: svc-route
    virtual_hosts:
      - name: all
        domains: ["*"]
        routes:
          - match: { prefix: "/" }
            route: { cluster: a }
clusters:
${
  withA
    ? `  - name: a
    type: EDS
    eds_cluster_config: { eds_config: { ads: {} } }
`
    : ""
}  - name: b
    type: STATIC
    connect_timeout: ${o.bTimeout ?? "1s"}
    ${o.typo ? "lbPolicyy: ROUND_ROBIN" : "lb_policy: ROUND_ROBIN"}
    load_assignment:
      cluster_name: b
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 9 } } } }] }]
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: b.test
        common_tls_context:
          tls_certificate_sds_secret_configs: [{ name: default, sds_config: { ads: {} } }]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: { http2_protocol_options: {} }
endpoints:
${
  withA
    ? `  - cluster_name: a
    endpoints:
      - load_balancing_weight: 1
        lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${o.aPort ?? 8080} } } } }]
`
    : "  []"
}
secrets:
  - name: default
    tls_certificate:
      certificate_chain: { inline_string: "-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n" }
      private_key: { filename: /etc/certs/key.pem }
`.replace("endpoints:\n  []", "endpoints: []");
}

export const LDS = "type.googleapis.com/envoy.config.listener.v3.Listener";
export const RDS = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
export const CDS = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
export const EDS = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
export const SDS = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
