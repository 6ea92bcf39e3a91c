package main

import (
	"context"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// xdsType is what Envoy keeps per type on an ADS stream, SotW or Delta.
type xdsType struct {
	url       string
	names     []string // the names subscribed by name (SotW: EDS and RDS; Delta: the same, CDS and LDS being wildcard)
	requested bool
	version   string              // SotW: last accepted
	nonce     string              // SotW: last received on this stream
	wildcard  bool                // Delta: CDS and LDS
	versions  map[string]string   // Delta: resource -> version held
	deps      map[string][]string // Delta: cluster -> EDS names, listener -> RDS names
}

// adsResponse is one response of either protocol.
type adsResponse struct {
	url, version, nonce string
	anys                []*anypb.Any
	names               []string // Delta: each resource's name (SotW: none)
	versions            []string // Delta: each resource's version
	removed             []string // Delta
}

// adsWire is what differs between SotW and Delta on one stream: the messages.
type adsWire interface {
	recv() (*adsResponse, error)
	// subscribe asks for t as it stands: on a fresh stream, or LDS the first time.
	subscribe(t *xdsType) error
	nack(t *xdsType, r *adsResponse, detail string) error
	// accept takes r (decoded as d) into t and returns the names of the dependent type t's resources need.
	accept(t *xdsType, r *adsResponse, d decoded) []string
	// follow changes dep's subscription to want.
	follow(dep *xdsType, want []string) error
	ack(t *xdsType, r *adsResponse) error
	// replaces says whether a response of the type replaces every resource held (SotW's CDS and LDS).
	replaces(url string) bool
}

// firstNode hands out the Node once: Envoy sends it in a stream's first request only.
type firstNode struct {
	node *core.Node
	sent bool
}

func (f *firstNode) take() *core.Node {
	if f.sent {
		return nil
	}
	f.sent = true
	return f.node
}

var (
	adsOrder  = []string{cdsType, edsType, ldsType, rdsType}
	dependent = map[string]string{cdsType: edsType, ldsType: rdsType}
)

// runADS keeps one ADS stream (Delta or SotW) to the agent, reconnecting with Envoy's backoff.
func (p *pod) runADS(delta bool) {
	types := map[string]*xdsType{}
	for _, u := range adsOrder {
		types[u] = &xdsType{url: u, wildcard: delta && (u == cdsType || u == ldsType), versions: map[string]string{}, deps: map[string][]string{}}
	}
	types[cdsType].requested = true
	conn, err := dial(p.xdsPath)
	if err != nil {
		p.fail("pod %s: xds dial: %v", p.id, err)
		return
	}
	var b backoff
	for {
		if p.adsStream(conn, types, delta) {
			b.reset()
		}
		b.wait()
	}
}

// adsStream runs one stream until it breaks, in Envoy's order on a fresh start: CDS; EDS for the
// EDS clusters; then LDS; then RDS for the listeners' route names. On a new stream every type
// already subscribed is asked again with what is held (SotW: the version last accepted, the nonce
// being per stream; Delta: the versions of the resources held). Says whether any response arrived.
func (p *pod) adsStream(conn *grpc.ClientConn, types map[string]*xdsType, delta bool) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := discovery.NewAggregatedDiscoveryServiceClient(conn)
	var w adsWire
	if delta {
		s, err := client.DeltaAggregatedResources(ctx)
		if err != nil {
			return false
		}
		w = &deltaWire{s: s, node: firstNode{node: p.node}}
	} else {
		s, err := client.StreamAggregatedResources(ctx)
		if err != nil {
			return false
		}
		w = &sotwWire{s: s, node: firstNode{node: p.node}}
	}
	p.rec.stream("ads")
	for _, u := range adsOrder {
		t := types[u]
		t.nonce = ""
		if t.requested && w.subscribe(t) != nil {
			return false
		}
	}
	got := false
	for {
		r, err := w.recv()
		if err != nil {
			return got
		}
		got = true
		t := types[r.url]
		if t == nil {
			continue
		}
		d, bad := decode(t.url, r.anys, r.names)
		if bad != "" {
			p.rec.record("ads", t.url, r.version, r.nonce, nil, nil, false, bad)
			if w.nack(t, r, bad) != nil {
				return got
			}
			continue
		}
		want := w.accept(t, r, d)
		p.rec.record("ads", t.url, r.version, r.nonce, d.res, r.removed, w.replaces(t.url), "")
		// Dependent subscriptions go out before the ACK, as Envoy's paused mux sends them.
		if dep := types[dependent[t.url]]; dep != nil && !sameNames(want, dep.names) {
			if w.follow(dep, want) != nil {
				return got
			}
		}
		if w.ack(t, r) != nil {
			return got
		}
		// LDS follows once clusters (and their endpoints, if any) are in.
		lds := types[ldsType]
		if !lds.requested && (t.url == edsType || (t.url == cdsType && len(types[edsType].names) == 0)) {
			lds.requested = true
			if w.subscribe(lds) != nil {
				return got
			}
		}
	}
}
