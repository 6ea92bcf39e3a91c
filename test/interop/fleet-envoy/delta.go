package main

import (
	"context"
	"sort"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
)

// deltaType is what Envoy keeps per type on a Delta ADS stream.
type deltaType struct {
	url       string
	wildcard  bool
	versions  map[string]string   // resource -> version held
	deps      map[string][]string // cluster -> EDS names, listener -> RDS names
	names     []string            // explicit subscriptions (EDS, RDS)
	requested bool
}

// runDelta keeps one Delta ADS stream to the agent, in Envoy's order (CDS and LDS wildcard,
// EDS and RDS by name), reconnecting with Envoy's backoff and the versions it holds.
func (p *pod) runDelta() {
	types := map[string]*deltaType{}
	for _, u := range []string{cdsType, edsType, ldsType, rdsType} {
		types[u] = &deltaType{url: u, wildcard: u == cdsType || u == ldsType, versions: map[string]string{}, deps: map[string][]string{}}
	}
	types[cdsType].requested = true
	conn, err := dial(p.xdsPath)
	if err != nil {
		p.fail("pod %s: xds dial: %v", p.id, err)
		return
	}
	var b backoff
	for {
		if p.deltaStream(conn, types) {
			b.reset()
		}
		b.wait()
	}
}

func (p *pod) deltaStream(conn *grpc.ClientConn, types map[string]*deltaType) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		return false
	}
	p.rec.stream("ads")
	first := true
	send := func(req *discovery.DeltaDiscoveryRequest) error {
		if first {
			req.Node = p.node
			first = false
		}
		return s.Send(req)
	}
	for _, u := range []string{cdsType, edsType, ldsType, rdsType} {
		t := types[u]
		if !t.requested {
			continue
		}
		req := &discovery.DeltaDiscoveryRequest{TypeUrl: u, InitialResourceVersions: t.versions}
		if !t.wildcard {
			req.ResourceNamesSubscribe = t.names
		}
		if send(req) != nil {
			return false
		}
	}
	got := false
	for {
		resp, err := s.Recv()
		if err != nil {
			return got
		}
		got = true
		t := types[resp.GetTypeUrl()]
		if t == nil {
			continue
		}
		anys := make([]*anypb.Any, 0, len(resp.GetResources()))
		names := make([]string, 0, len(resp.GetResources()))
		for _, r := range resp.GetResources() {
			anys = append(anys, r.GetResource())
			names = append(names, r.GetName())
		}
		d, bad := decode(t.url, anys, names)
		if bad != "" {
			p.rec.record("ads", t.url, resp.GetSystemVersionInfo(), resp.GetNonce(), nil, nil, false, bad)
			if send(&discovery.DeltaDiscoveryRequest{TypeUrl: t.url, ResponseNonce: resp.GetNonce(), ErrorDetail: &status.Status{Code: 3, Message: bad}}) != nil {
				return got
			}
			continue
		}
		for _, name := range resp.GetRemovedResources() {
			delete(t.versions, name)
			delete(t.deps, name)
		}
		for i, r := range resp.GetResources() {
			t.versions[d.res[i].name] = r.GetVersion()
			if deps, ok := d.deps[d.res[i].name]; ok {
				t.deps[d.res[i].name] = deps
			}
		}
		p.rec.record("ads", t.url, resp.GetSystemVersionInfo(), resp.GetNonce(), d.res, resp.GetRemovedResources(), false, "")
		var dep *deltaType
		switch t.url {
		case cdsType:
			dep = types[edsType]
		case ldsType:
			dep = types[rdsType]
		}
		if dep != nil {
			want := union(t.deps)
			if !dep.requested || !sameNames(want, dep.names) {
				sub, unsub := diff(dep.names, want)
				if len(sub) > 0 || len(unsub) > 0 {
					dep.names, dep.requested = want, true
					for _, n := range unsub {
						delete(dep.versions, n)
					}
					if send(&discovery.DeltaDiscoveryRequest{TypeUrl: dep.url, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub}) != nil {
						return got
					}
				}
			}
		}
		if send(&discovery.DeltaDiscoveryRequest{TypeUrl: t.url, ResponseNonce: resp.GetNonce()}) != nil {
			return got
		}
		lds := types[ldsType]
		if !lds.requested && (t.url == edsType || (t.url == cdsType && len(types[edsType].names) == 0)) {
			lds.requested = true
			if send(&discovery.DeltaDiscoveryRequest{TypeUrl: ldsType}) != nil {
				return got
			}
		}
	}
}

// diff: the names in want and not in have (subscribe), in have and not in want (unsubscribe).
func diff(have, want []string) (sub, unsub []string) {
	h := map[string]bool{}
	for _, n := range have {
		h[n] = true
	}
	w := map[string]bool{}
	for _, n := range want {
		w[n] = true
		if !h[n] {
			sub = append(sub, n)
		}
	}
	for _, n := range have {
		if !w[n] {
			unsub = append(unsub, n)
		}
	}
	sort.Strings(sub)
	sort.Strings(unsub)
	return sub, unsub
}
