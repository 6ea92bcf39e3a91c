// Command istiod-lite runs Istio's own discovery server and a CA server on loopback for the
// interop and differential suites. It is test tooling: nothing of it ships in dist/agent.
//
// The discovery server is pilot/test/xds's fake (real config generation from Kubernetes and
// Istio YAML) behind a TLS gRPC listener with token authentication, wired the way
// pkg/istio-agent/agent_test.go's setupDiscovery wires it. The CA is
// security/pkg/nodeagent/test/mock's CAServer signing with a self-signed root.
//
// It writes <state>/root-cert.pem (reused across restarts, so a restarted server keeps the
// same trust), records what clients send in <state>/requests.jsonl (the Node of the first
// request of each xDS stream, every CSR and the gRPC metadata that came with it), prints one
// JSON line with its ports and the root path on stdout, then serves until SIGTERM/SIGINT.
// With --mesh-ca-certificates it also serves PCDS (pcds.go); SIGHUP re-reads that file.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	pb "istio.io/api/security/v1alpha1"
	xdsfake "istio.io/istio/pilot/test/xds"
	"istio.io/istio/pkg/security"
	"istio.io/istio/security/pkg/nodeagent/test/mock"
	pkiutil "istio.io/istio/security/pkg/pki/util"
)

func main() {
	configDir := flag.String("config", "", "folder of Kubernetes and Istio YAML (*.yaml) to serve")
	stateDir := flag.String("state", "", "folder for root-cert.pem and requests.jsonl (required)")
	token := flag.String("token", "interop-token", "bearer token accepted by the discovery server and CA")
	xdsPort := flag.Int("xds-port", 0, "discovery server port on 127.0.0.1 (0: any)")
	caPort := flag.Int("ca-port", 0, "CA server port on 127.0.0.1 (0: any)")
	firstDelay := flag.Duration("first-response-delay", 0, "hold each xDS stream's first response (and with it the "+
		"response headers, which gRPC sends with the first message) this long: an istiod slow to answer a fresh stream")
	meshCACerts := flag.String("mesh-ca-certificates", "", "PEM file of the mesh config's caCertificates: serve PCDS "+
		"(with ISTIO_MULTIROOT_MESH=true), re-read on SIGHUP")
	flag.Parse()
	if *stateDir == "" {
		fatalf("--state is required")
	}
	if err := os.MkdirAll(*stateDir, 0o755); err != nil {
		fatalf("state dir: %v", err)
	}

	roots, err := loadOrCreateRoot(*stateDir)
	if err != nil {
		fatalf("root: %v", err)
	}
	serving, err := servingCert(roots)
	if err != nil {
		fatalf("serving cert: %v", err)
	}
	rec, err := newRecorder(filepath.Join(*stateDir, "requests.jsonl"))
	if err != nil {
		fatalf("recorder: %v", err)
	}

	istioYAML, kubeYAML, err := readConfig(*configDir)
	if err != nil {
		fatalf("config: %v", err)
	}

	f := newFailer(*stateDir)
	auth := security.NewFakeAuthenticator("istiod-lite").Set(*token, "")

	ds := xdsfake.NewFakeDiscoveryServer(f, xdsfake.FakeOptions{
		ConfigString:           istioYAML,
		KubernetesObjectString: kubeYAML,
	})
	ds.Discovery.Authenticators = []security.Authenticator{auth}
	var trust *pcds
	if *meshCACerts != "" {
		if trust, err = newPcds(ds, roots.certPEM, *meshCACerts); err != nil {
			fatalf("pcds: %v", err)
		}
	}
	xdsServer := grpc.NewServer(serverCreds(serving, roots.pool),
		grpc.ChainStreamInterceptor(rec.streamInterceptor, delayFirstResponse(*firstDelay)),
		grpc.ChainUnaryInterceptor(rec.unaryInterceptor))
	ds.Discovery.Register(xdsServer)
	xl, err := net.Listen("tcp", xdsListenAddress(*xdsPort))
	if err != nil {
		fatalf("xds listen: %v", err)
	}

	ca, err := mock.NewCAServerWithKeyCert(*caPort, roots.keyPEM, roots.certPEM,
		serverCreds(serving, roots.pool), grpc.ChainUnaryInterceptor(rec.unaryInterceptor, requestedTTLSigner(roots, auth)))
	if err != nil {
		fatalf("ca: %v", err)
	}
	ca.Authenticators = []security.Authenticator{auth}
	registerCAOnXDS(xdsServer, ca)
	startFleet(ds, ca) // fleet.go: per-pod tokens and the control server, when asked
	go func() { _ = xdsServer.Serve(xl) }()

	ready, _ := json.Marshal(map[string]any{
		"xdsPort":  xl.Addr().(*net.TCPAddr).Port,
		"caPort":   portOf(ca.URL),
		"rootCert": roots.path,
		"requests": rec.path,
	})
	fmt.Println(string(ready))

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	for s := range sig {
		if s != syscall.SIGHUP {
			break
		}
		if trust == nil {
			continue
		}
		// Printed on stdout: the suites wait for this line before looking for the push.
		if err := trust.reload(); err != nil {
			fmt.Printf("{\"reloaded\":false,\"error\":%q}\n", err.Error())
		} else {
			fmt.Println(`{"reloaded":true}`)
		}
	}
	xdsServer.Stop()
	ca.GRPCServer.Stop()
	f.runCleanups()
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "istiod-lite: "+format+"\n", args...)
	os.Exit(1)
}

func portOf(url string) int {
	_, p, _ := net.SplitHostPort(url)
	var n int
	_, _ = fmt.Sscan(p, &n)
	return n
}

// readConfig splits the YAML documents of dir into Istio configs (networking.istio.io and
// friends) and Kubernetes objects, the two inputs of the fake discovery server.
func readConfig(dir string) (string, string, error) {
	if dir == "" {
		return "", "", nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return "", "", err
	}
	sort.Strings(files)
	var istio, kube []string
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return "", "", err
		}
		for _, doc := range strings.Split(string(b), "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			if strings.Contains(doc, "istio.io/") {
				istio = append(istio, doc)
			} else {
				kube = append(kube, doc)
			}
		}
	}
	return strings.Join(istio, "\n---\n"), strings.Join(kube, "\n---\n"), nil
}

type root struct {
	certPEM, keyPEM []byte
	cert            *x509.Certificate
	pool            *x509.CertPool
	path            string
}

func loadOrCreateRoot(dir string) (*root, error) {
	certPath := filepath.Join(dir, "root-cert.pem")
	keyPath := filepath.Join(dir, "root-key.pem")
	certPEM, err1 := os.ReadFile(certPath)
	keyPEM, err2 := os.ReadFile(keyPath)
	if err1 != nil || err2 != nil {
		var err error
		certPEM, keyPEM, err = pkiutil.GenCertKeyFromOptions(pkiutil.CertOptions{
			Host:         "cluster.local",
			Org:          "cluster.local",
			TTL:          240 * time.Hour,
			NotBefore:    time.Now().Add(-time.Hour),
			IsCA:         true,
			IsSelfSigned: true,
			RSAKeySize:   2048,
		})
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := os.WriteFile(certPath, certPEM, 0o644); err != nil {
			return nil, err
		}
	}
	cert, err := pkiutil.ParsePemEncodedCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &root{certPEM: certPEM, keyPEM: keyPEM, cert: cert, pool: pool, path: certPath}, nil
}

// servingCert is istiod's own certificate: the names pilot-agent and ours verify for a
// loopback discovery address.
func servingCert(r *root) (tls.Certificate, error) {
	signer, err := pkiutil.ParsePemEncodedKey(r.keyPEM)
	if err != nil {
		return tls.Certificate{}, err
	}
	certPEM, keyPEM, err := pkiutil.GenCertKeyFromOptions(pkiutil.CertOptions{
		Host:       "istiod.istio-system.svc,istiod.istio-system.svc.cluster.local,localhost,127.0.0.1",
		TTL:        240 * time.Hour,
		NotBefore:  time.Now().Add(-time.Hour),
		SignerCert: r.cert,
		SignerPriv: signer,
		IsServer:   true,
		RSAKeySize: 2048,
	})
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(append(certPEM, r.certPEM...), keyPEM)
}

func serverCreds(cert tls.Certificate, roots *x509.CertPool) grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    roots,
		MinVersion:   tls.VersionTLS12,
	}))
}

// recorder appends one JSON line per observed request.
type recorder struct {
	mu   sync.Mutex
	path string
	out  *os.File
}

func newRecorder(path string) (*recorder, error) {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &recorder{path: path, out: out}, nil
}

func (r *recorder) write(v map[string]any) {
	b, _ := json.Marshal(v)
	r.mu.Lock()
	defer r.mu.Unlock()
	_, _ = r.out.Write(append(b, '\n'))
}

func metadataOf(ctx context.Context) map[string][]string {
	md, _ := metadata.FromIncomingContext(ctx)
	out := map[string][]string{}
	for k, v := range md {
		out[k] = v
	}
	return out
}

func (r *recorder) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo,
	handler grpc.UnaryHandler,
) (any, error) {
	if csr, ok := req.(*pb.IstioCertificateRequest); ok {
		m, _ := protojson.Marshal(csr)
		r.write(map[string]any{"kind": "csr", "method": info.FullMethod, "metadata": metadataOf(ctx), "request": json.RawMessage(m)})
	}
	return handler(ctx, req)
}

func (r *recorder) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo,
	handler grpc.StreamHandler,
) error {
	return handler(srv, &firstRequestStream{ServerStream: ss, rec: r, method: info.FullMethod})
}

// firstRequestStream records the first xDS request of a stream: the one carrying the Node.
type firstRequestStream struct {
	grpc.ServerStream
	rec    *recorder
	method string
	seen   bool
}

func (s *firstRequestStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err != nil || s.seen {
		return err
	}
	var node []byte
	var typeURL string
	switch req := m.(type) {
	case *discovery.DiscoveryRequest:
		node, _ = protojson.Marshal(req.GetNode())
		typeURL = req.GetTypeUrl()
	case *discovery.DeltaDiscoveryRequest:
		node, _ = protojson.Marshal(req.GetNode())
		typeURL = req.GetTypeUrl()
	default:
		return err
	}
	s.seen = true
	s.rec.write(map[string]any{
		"kind": "xds", "method": s.method, "typeUrl": typeURL,
		"metadata": metadataOf(s.Context()), "node": json.RawMessage(node),
	})
	return err
}

// delayFirstResponse holds the first response of each stream (and so its headers) for d.
func delayFirstResponse(d time.Duration) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if d <= 0 {
			return handler(srv, ss)
		}
		return handler(srv, &slowFirstStream{ServerStream: ss, delay: d})
	}
}

type slowFirstStream struct {
	grpc.ServerStream
	delay time.Duration
	once  sync.Once
}

func (s *slowFirstStream) wait() {
	s.once.Do(func() {
		select {
		case <-time.After(s.delay):
		case <-s.Context().Done():
		}
	})
}

func (s *slowFirstStream) SendHeader(md metadata.MD) error {
	s.wait()
	return s.ServerStream.SendHeader(md)
}

func (s *slowFirstStream) SendMsg(m any) error {
	s.wait()
	return s.ServerStream.SendMsg(m)
}
