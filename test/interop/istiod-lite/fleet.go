package main

// What the fleet benchmark and its test need of istiod-lite (bench/fleet.ts,
// test/interop/fleet.test.ts): one identity per pod and a way to change the served config
// while it runs.
//
//   - --fleet-tokens: a bearer token "fleet:<namespace>:<service account>" authenticates as
//     spiffe://cluster.local/ns/<namespace>/sa/<service account>, for the discovery server and
//     the CA alike, so each pod has its own identity and its CSRs can be told apart. The fixed
//     interop token keeps working.
//   - --control-port: an HTTP server on 127.0.0.1 whose POST /apply takes Kubernetes YAML
//     (Service and EndpointSlice documents) and creates or updates each object in the discovery
//     server's Kubernetes client, as a change in a cluster would reach istiod. The caller keeps
//     the same YAML in the --config folder so a restarted server serves the same config.
//     GET /counters: the CSRs and xDS streams this process authenticated per fleet identity,
//     {"csr":{"<ns>/<sa>":n},"xds":{"<ns>/<sa>":n}} (a restart starts from zero).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	kerrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	xdsfake "istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/security"
	"istio.io/istio/pkg/spiffe"
	"istio.io/istio/security/pkg/nodeagent/test/mock"
)

var (
	fleetTokens = flag.Bool("fleet-tokens", false, `accept bearer tokens "fleet:<namespace>:<service account>" `+
		"as that workload's identity (one identity per pod)")
	controlPort = flag.Int("control-port", -1, "serve POST /apply (Kubernetes Service and EndpointSlice YAML) on "+
		"127.0.0.1 at this port (0: any, printed as {\"controlPort\":N}); -1: off")
)

// maxApplyBytes bounds one /apply body.
const maxApplyBytes = 16 << 20

// fleetToken is the bearer-token prefix of a per-pod identity.
const fleetToken = "fleet:"

// startFleet installs the per-pod authenticator and the control server when their flags ask.
func startFleet(ds *xdsfake.FakeDiscoveryServer, ca *mock.CAServer) {
	counts := &fleetCounters{csr: map[string]int{}, xds: map[string]int{}}
	if *fleetTokens {
		a := fleetAuthenticator{counts: counts}
		ds.Discovery.Authenticators = append([]security.Authenticator{a}, ds.Discovery.Authenticators...)
		ca.Authenticators = append([]security.Authenticator{a}, ca.Authenticators...)
	}
	if *controlPort < 0 {
		return
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *controlPort))
	if err != nil {
		fatalf("control listen: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/apply", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxApplyBytes+1))
		if err != nil || len(body) > maxApplyBytes {
			http.Error(w, fmt.Sprintf("body unreadable or over %d bytes", maxApplyBytes), http.StatusBadRequest)
			return
		}
		n, err := applyYAML(r.Context(), ds, string(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "{\"applied\":%d}\n", n)
	})
	mux.HandleFunc("/counters", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(counts.snapshot())
	})
	go func() { _ = http.Serve(l, mux) }()
	fmt.Printf("{\"controlPort\":%d}\n", l.Addr().(*net.TCPAddr).Port)
}

// fleetCounters counts what the server authenticated per fleet identity: each CSR (the CA
// authenticates every CreateCertificate) and each xDS stream (the discovery server
// authenticates a stream once, when it opens).
type fleetCounters struct {
	mu       sync.Mutex
	csr, xds map[string]int
}

func (c *fleetCounters) add(method, who string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.HasSuffix(method, "/CreateCertificate") {
		c.csr[who]++
	} else {
		c.xds[who]++
	}
}

func (c *fleetCounters) snapshot() map[string]map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	cp := func(m map[string]int) map[string]int {
		out := make(map[string]int, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return map[string]map[string]int{"csr": cp(c.csr), "xds": cp(c.xds)}
}

// fleetAuthenticator maps "Bearer fleet:<ns>:<sa>" to that workload's SPIFFE identity and
// counts the call; any other token is left to the next authenticator.
type fleetAuthenticator struct{ counts *fleetCounters }

func (fleetAuthenticator) AuthenticatorType() string { return "fleet" }

func (a fleetAuthenticator) Authenticate(ctx security.AuthContext) (*security.Caller, error) {
	if ctx.GrpcContext == nil {
		return nil, errors.New("fleet tokens are gRPC only")
	}
	md := metadataOf(ctx.GrpcContext)["authorization"]
	if len(md) != 1 || !strings.HasPrefix(md[0], "Bearer "+fleetToken) {
		return nil, errors.New("not a fleet token")
	}
	parts := strings.Split(strings.TrimPrefix(md[0], "Bearer "+fleetToken), ":")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return nil, fmt.Errorf("fleet token %q: want fleet:<namespace>:<service account>", md[0])
	}
	id := spiffe.Identity{TrustDomain: "cluster.local", Namespace: parts[0], ServiceAccount: parts[1]}
	method, _ := grpc.Method(ctx.GrpcContext)
	a.counts.add(method, parts[0]+"/"+parts[1])
	return &security.Caller{AuthSource: security.AuthSourceIDToken, Identities: []string{id.String()}}, nil
}

// applyYAML creates or updates each Service and EndpointSlice of the YAML documents.
func applyYAML(ctx context.Context, ds *xdsfake.FakeDiscoveryServer, text string) (int, error) {
	kube := ds.KubeClient().Kube()
	n := 0
	for i, doc := range strings.Split(text, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return n, fmt.Errorf("document %d: %v", i, err)
		}
		var err error
		switch head.Kind {
		case "Service":
			var s corev1.Service
			if err = yaml.Unmarshal([]byte(doc), &s); err != nil {
				break
			}
			c := kube.CoreV1().Services(s.Namespace)
			if _, err = c.Create(ctx, &s, metav1.CreateOptions{}); kerrors.IsAlreadyExists(err) {
				_, err = c.Update(ctx, &s, metav1.UpdateOptions{})
			}
		case "EndpointSlice":
			var s discoveryv1.EndpointSlice
			if err = yaml.Unmarshal([]byte(doc), &s); err != nil {
				break
			}
			c := kube.DiscoveryV1().EndpointSlices(s.Namespace)
			if _, err = c.Create(ctx, &s, metav1.CreateOptions{}); kerrors.IsAlreadyExists(err) {
				_, err = c.Update(ctx, &s, metav1.UpdateOptions{})
			}
		default:
			err = fmt.Errorf("kind %q: only Service and EndpointSlice can be applied", head.Kind)
		}
		if err != nil {
			return n, fmt.Errorf("document %d: %v", i, err)
		}
		n++
	}
	return n, nil
}
