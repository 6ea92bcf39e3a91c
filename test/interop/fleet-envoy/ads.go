package main

import (
	"context"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
)

// sotwType is what Envoy keeps per type on a SotW ADS stream.
type sotwType struct {
	url       string
	version   string // last accepted
	nonce     string // last received
	names     []string
	requested bool
}

// runSotW keeps one SotW ADS stream to the agent, reconnecting with Envoy's backoff. Envoy's
// order on a fresh start: CDS; EDS for the EDS clusters; then LDS; then RDS for the listeners'
// route names. On a new stream every type already subscribed is asked again with the version
// last accepted (the nonce is per stream and starts empty).
func (p *pod) runSotW() {
	types := map[string]*sotwType{}
	for _, u := range []string{cdsType, edsType, ldsType, rdsType} {
		types[u] = &sotwType{url: u}
	}
	types[cdsType].requested = true
	conn, err := dial(p.xdsPath)
	if err != nil {
		p.fail("pod %s: xds dial: %v", p.id, err)
		return
	}
	var b backoff
	for {
		if p.sotwStream(conn, types) {
			b.reset()
		}
		b.wait()
	}
}

// sotwStream runs one stream until it breaks; says whether any response arrived.
func (p *pod) sotwStream(conn *grpc.ClientConn, types map[string]*sotwType) bool {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := discovery.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return false
	}
	p.rec.stream("ads")
	first := true
	send := func(t *sotwType, errDetail string) error {
		req := &discovery.DiscoveryRequest{TypeUrl: t.url, VersionInfo: t.version, ResponseNonce: t.nonce, ResourceNames: t.names}
		if errDetail != "" {
			req.ErrorDetail = &status.Status{Code: 3, Message: errDetail}
		}
		if first {
			req.Node = p.node
			first = false
		}
		return s.Send(req)
	}
	for _, u := range []string{cdsType, edsType, ldsType, rdsType} {
		types[u].nonce = ""
		if types[u].requested {
			if send(types[u], "") != nil {
				return false
			}
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
		t.nonce = resp.GetNonce()
		d, bad := decode(t.url, resp.GetResources(), nil)
		if bad != "" {
			p.rec.record("ads", t.url, resp.GetVersionInfo(), t.nonce, nil, nil, false, bad)
			if send(t, bad) != nil {
				return got
			}
			continue
		}
		t.version = resp.GetVersionInfo()
		replace := t.url == cdsType || t.url == ldsType
		p.rec.record("ads", t.url, t.version, t.nonce, d.res, nil, replace, "")
		// Dependent subscriptions go out before the ACK, as Envoy's paused mux sends them.
		var dep *sotwType
		switch t.url {
		case cdsType:
			dep = types[edsType]
		case ldsType:
			dep = types[rdsType]
		}
		if dep != nil {
			names := union(d.deps)
			if !dep.requested || !sameNames(names, dep.names) {
				if len(names) > 0 || dep.requested {
					dep.names, dep.requested = names, true
					if send(dep, "") != nil {
						return got
					}
				}
			}
		}
		if send(t, "") != nil {
			return got
		}
		// LDS follows once clusters (and their endpoints, if any) are in.
		lds := types[ldsType]
		if !lds.requested && (t.url == edsType || (t.url == cdsType && len(types[edsType].names) == 0)) {
			lds.requested = true
			if send(lds, "") != nil {
				return got
			}
		}
	}
}
