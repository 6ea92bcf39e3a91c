package main

import (
	"sort"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// deltaWire is a Delta ADS stream: CDS and LDS wildcard, EDS and RDS by name, each change of
// subscription sent as names subscribed and unsubscribed, the versions held sent on a fresh
// stream; the Node goes in the first request only.
type deltaWire struct {
	s    discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
	node firstNode
}

func (w *deltaWire) send(req *discovery.DeltaDiscoveryRequest) error {
	req.Node = w.node.take()
	return w.s.Send(req)
}

func (w *deltaWire) recv() (*adsResponse, error) {
	resp, err := w.s.Recv()
	if err != nil {
		return nil, err
	}
	r := &adsResponse{url: resp.GetTypeUrl(), version: resp.GetSystemVersionInfo(), nonce: resp.GetNonce(), removed: resp.GetRemovedResources()}
	r.anys = make([]*anypb.Any, 0, len(resp.GetResources()))
	for _, res := range resp.GetResources() {
		r.anys = append(r.anys, res.GetResource())
		r.names = append(r.names, res.GetName())
		r.versions = append(r.versions, res.GetVersion())
	}
	return r, nil
}

func (w *deltaWire) subscribe(t *xdsType) error {
	req := &discovery.DeltaDiscoveryRequest{TypeUrl: t.url, InitialResourceVersions: t.versions}
	if !t.wildcard {
		req.ResourceNamesSubscribe = t.names
	}
	return w.send(req)
}

func (w *deltaWire) nack(t *xdsType, r *adsResponse, detail string) error {
	return w.send(&discovery.DeltaDiscoveryRequest{TypeUrl: t.url, ResponseNonce: r.nonce, ErrorDetail: &status.Status{Code: 3, Message: detail}})
}

// accept: a Delta response holds the changes only, so the dependencies are those of every resource held.
func (w *deltaWire) accept(t *xdsType, r *adsResponse, d decoded) []string {
	for _, name := range r.removed {
		delete(t.versions, name)
		delete(t.deps, name)
	}
	for i, res := range d.res {
		t.versions[res.name] = r.versions[i]
		if deps, ok := d.deps[res.name]; ok {
			t.deps[res.name] = deps
		}
	}
	return union(t.deps)
}

func (w *deltaWire) follow(dep *xdsType, want []string) error {
	sub, unsub := diff(dep.names, want)
	dep.names, dep.requested = want, true
	for _, n := range unsub {
		delete(dep.versions, n)
	}
	return w.send(&discovery.DeltaDiscoveryRequest{TypeUrl: dep.url, ResourceNamesSubscribe: sub, ResourceNamesUnsubscribe: unsub})
}

func (w *deltaWire) ack(t *xdsType, r *adsResponse) error {
	return w.send(&discovery.DeltaDiscoveryRequest{TypeUrl: t.url, ResponseNonce: r.nonce})
}

func (w *deltaWire) replaces(string) bool { return false }

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
