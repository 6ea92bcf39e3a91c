package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxBootstrap bounds the bootstrap file read.
const maxBootstrap = 4 << 20

// pod is one pod's Envoy.
type pod struct {
	id, dir    string
	statusPort int
	delta      bool
	out        *output
	rec        *recorder

	node                *core.Node
	adminPort           int
	xdsPath, sdsPath    string
	readyOnce           sync.Once
	healthzOK, certAt   float64
	configAt, startedAt float64
	mu                  sync.Mutex
}

func newPod(id, dir string, statusPort int, delta bool, out *output, m *marks) *pod {
	p := &pod{id: id, dir: dir, statusPort: statusPort, delta: delta, out: out}
	p.rec = newRecorder(id, out, m, p.progress)
	return p
}

func (p *pod) fail(format string, a ...any) {
	p.out.emit(map[string]any{"event": "error", "pod": p.id, "message": fmt.Sprintf(format, a...)})
}

// run waits for the launcher's record, then serves the pod as Envoy until the process ends.
func (p *pod) run() {
	args, err := p.waitLaunch()
	if err != nil {
		p.fail("%v", err)
		return
	}
	if err := p.readBootstrap(args); err != nil {
		p.fail("%v", err)
		return
	}
	p.mu.Lock()
	p.startedAt = nowMs()
	p.mu.Unlock()
	p.out.emit(map[string]any{"event": "started", "pod": p.id, "t": p.startedAt})
	go p.serveAdmin()
	go p.pollReady()
	go p.runSDS("default")
	go p.runSDS("ROOTCA")
	p.runADS(p.delta)
}

// waitLaunch polls for <dir>/envoy-args (NUL-separated arguments) for up to 10 minutes.
func (p *pod) waitLaunch() ([]string, error) {
	path := filepath.Join(p.dir, "envoy-args")
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err == nil {
			return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
		}
	}
	return nil, fmt.Errorf("pod %s: no Envoy launch within 10 minutes (%s)", p.id, path)
}

type bootstrapCluster struct {
	Name           string `json:"name"`
	LoadAssignment struct {
		Endpoints []struct {
			LbEndpoints []struct {
				Endpoint struct {
					Address struct {
						Pipe struct {
							Path string `json:"path"`
						} `json:"pipe"`
					} `json:"address"`
				} `json:"endpoint"`
			} `json:"lb_endpoints"`
		} `json:"endpoints"`
	} `json:"load_assignment"`
}

func (c bootstrapCluster) pipe() string {
	for _, e := range c.LoadAssignment.Endpoints {
		for _, lb := range e.LbEndpoints {
			return lb.Endpoint.Address.Pipe.Path
		}
	}
	return ""
}

// readBootstrap reads the bootstrap named by -c: the Node Envoy sends, the admin port, and the
// XDS and SDS sockets (relative paths are the pod's, Envoy's working directory).
func (p *pod) readBootstrap(args []string) error {
	var file string
	for i, a := range args {
		if a == "-c" && i+1 < len(args) {
			file = args[i+1]
		}
	}
	if file == "" {
		return fmt.Errorf("pod %s: Envoy started without -c: %q", p.id, args)
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(p.dir, file)
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("pod %s: bootstrap: %v", p.id, err)
	}
	defer f.Close()
	var b struct {
		Node  json.RawMessage `json:"node"`
		Admin struct {
			Address struct {
				SocketAddress struct {
					PortValue int `json:"port_value"`
				} `json:"socket_address"`
			} `json:"address"`
		} `json:"admin"`
		StaticResources struct {
			Clusters []bootstrapCluster `json:"clusters"`
		} `json:"static_resources"`
	}
	if err := json.NewDecoder(&limited{f, maxBootstrap}).Decode(&b); err != nil {
		return fmt.Errorf("pod %s: bootstrap %s: %v", p.id, file, err)
	}
	p.node = &core.Node{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b.Node, p.node); err != nil {
		return fmt.Errorf("pod %s: bootstrap node: %v", p.id, err)
	}
	p.node.UserAgentName = "envoy"
	p.adminPort = b.Admin.Address.SocketAddress.PortValue
	for _, c := range b.StaticResources.Clusters {
		path := c.pipe()
		if path != "" && !filepath.IsAbs(path) {
			path = filepath.Join(p.dir, path)
		}
		switch c.Name {
		case "xds-grpc":
			p.xdsPath = path
		case "sds-grpc":
			p.sdsPath = path
		}
	}
	if p.adminPort == 0 || p.xdsPath == "" || p.sdsPath == "" {
		return fmt.Errorf("pod %s: bootstrap %s lacks the admin port, the xds-grpc or the sds-grpc pipe", p.id, file)
	}
	return nil
}

type limited struct {
	f interface{ Read([]byte) (int, error) }
	n int
}

func (l *limited) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("over %d bytes", maxBootstrap)
	}
	if len(b) > l.n {
		b = b[:l.n]
	}
	n, err := l.f.Read(b)
	l.n -= n
	return n, err
}

// dial opens a gRPC connection over a Unix socket, as Envoy's pipe clusters do.
func dial(path string) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
}

// backoff is Envoy's default xDS retry: 500 ms base doubling to 30 s, fully jittered.
type backoff struct{ next time.Duration }

func (b *backoff) wait() {
	if b.next == 0 {
		b.next = 500 * time.Millisecond
	}
	time.Sleep(time.Duration(rand.Int64N(int64(b.next)) + 1))
	b.next = min(b.next*2, 30*time.Second)
}

func (b *backoff) reset() { b.next = 0 }

// pollReady asks the agent's /healthz/ready every 100 ms until it answers 200.
func (p *pod) pollReady() {
	c := &http.Client{Timeout: 2 * time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz/ready", p.statusPort)
	for deadline := time.Now().Add(10 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		r, err := c.Get(url)
		if err != nil {
			continue
		}
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			p.mu.Lock()
			p.healthzOK = nowMs()
			p.mu.Unlock()
			p.progress()
			return
		}
	}
	p.fail("pod %s: /healthz/ready never 200 within 10 minutes", p.id)
}

// progress emits the ready event once healthz, certificate and first CDS+LDS ACK are all in.
func (p *pod) progress() {
	cert, config := p.rec.firsts()
	p.mu.Lock()
	h := p.healthzOK
	p.mu.Unlock()
	if h == 0 || cert == 0 || config == 0 {
		return
	}
	p.readyOnce.Do(func() {
		p.out.emit(map[string]any{"event": "ready", "pod": p.id, "t": max(h, cert, config), "healthz": h, "cert": cert, "config": config})
	})
}
