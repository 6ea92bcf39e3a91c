package main

import (
	"context"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secret "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
)

// runSDS keeps one SotW SDS stream for the secret `name` to the agent's SDS socket, as Envoy
// does for each secret of the sds-grpc source, ACKing each secret it can read and NACKing the
// rest; reconnects with Envoy's backoff.
func (p *pod) runSDS(name string) {
	conn, err := dial(p.sdsPath)
	if err != nil {
		p.fail("pod %s: sds dial: %v", p.id, err)
		return
	}
	stream := "sds:" + name
	version := ""
	var b backoff
	for {
		got := func() bool {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := secret.NewSecretDiscoveryServiceClient(conn).StreamSecrets(ctx)
			if err != nil {
				return false
			}
			p.rec.stream(stream)
			req := &discovery.DiscoveryRequest{Node: p.node, TypeUrl: sdsType, ResourceNames: []string{name}, VersionInfo: version}
			if s.Send(req) != nil {
				return false
			}
			got := false
			for {
				resp, err := s.Recv()
				if err != nil {
					return got
				}
				got = true
				d, bad := decode(sdsType, resp.GetResources(), nil)
				if bad == "" && (len(d.res) != 1 || d.res[0].name != name) {
					bad = "the response is not the one secret " + name
				}
				ack := &discovery.DiscoveryRequest{TypeUrl: sdsType, ResourceNames: []string{name}, ResponseNonce: resp.GetNonce()}
				if bad != "" {
					ack.ErrorDetail = &status.Status{Code: 3, Message: bad}
				} else {
					version = resp.GetVersionInfo()
				}
				ack.VersionInfo = version
				p.rec.record(stream, sdsType, resp.GetVersionInfo(), resp.GetNonce(), d.res, nil, false, bad)
				if s.Send(ack) != nil {
					return got
				}
			}
		}()
		if got {
			b.reset()
		}
		b.wait()
	}
}
