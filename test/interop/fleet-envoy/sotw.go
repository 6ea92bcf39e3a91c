package main

import (
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
)

// sotwWire is a SotW ADS stream: every request names all the type's resources with the version
// last accepted and the nonce last received; the Node goes in the first request only.
type sotwWire struct {
	s    discovery.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node firstNode
}

func (w *sotwWire) send(t *xdsType, errDetail string) error {
	req := &discovery.DiscoveryRequest{TypeUrl: t.url, VersionInfo: t.version, ResponseNonce: t.nonce, ResourceNames: t.names}
	if errDetail != "" {
		req.ErrorDetail = &status.Status{Code: 3, Message: errDetail}
	}
	req.Node = w.node.take()
	return w.s.Send(req)
}

func (w *sotwWire) recv() (*adsResponse, error) {
	resp, err := w.s.Recv()
	if err != nil {
		return nil, err
	}
	return &adsResponse{url: resp.GetTypeUrl(), version: resp.GetVersionInfo(), nonce: resp.GetNonce(), anys: resp.GetResources()}, nil
}

func (w *sotwWire) subscribe(t *xdsType) error { return w.send(t, "") }

func (w *sotwWire) nack(t *xdsType, r *adsResponse, detail string) error {
	t.nonce = r.nonce
	return w.send(t, detail)
}

// accept: a SotW response holds every resource of the type, so its dependencies are all there are.
func (w *sotwWire) accept(t *xdsType, r *adsResponse, d decoded) []string {
	t.nonce, t.version = r.nonce, r.version
	return union(d.deps)
}

func (w *sotwWire) follow(dep *xdsType, want []string) error {
	dep.names, dep.requested = want, true
	return w.send(dep, "")
}

func (w *sotwWire) ack(t *xdsType, _ *adsResponse) error { return w.send(t, "") }

func (w *sotwWire) replaces(url string) bool { return url == cdsType || url == ldsType }
