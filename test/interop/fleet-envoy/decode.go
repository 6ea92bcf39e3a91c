package main

import (
	"fmt"
	"sort"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tls "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

const (
	typePrefix = "type.googleapis.com/"
	cdsType    = typePrefix + "envoy.config.cluster.v3.Cluster"
	edsType    = typePrefix + "envoy.config.endpoint.v3.ClusterLoadAssignment"
	ldsType    = typePrefix + "envoy.config.listener.v3.Listener"
	rdsType    = typePrefix + "envoy.config.route.v3.RouteConfiguration"
	sdsType    = typePrefix + "envoy.extensions.transport_sockets.tls.v3.Secret"
	hcmType    = typePrefix + "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
)

// decoded is a response's resources once Envoy would accept them: each one's name and bytes,
// and for clusters and listeners the EDS and RDS names each one needs.
type decoded struct {
	res  []resource
	deps map[string][]string
}

// decode checks each resource as Envoy's config ingestion would (the right type, well formed,
// named, no name twice) and returns an error detail for a NACK when one fails.
func decode(typeURL string, anys []*anypb.Any, names []string) (decoded, string) {
	d := decoded{deps: map[string][]string{}}
	seen := map[string]bool{}
	for i, a := range anys {
		if a.GetTypeUrl() != typeURL {
			return d, fmt.Sprintf("resource %d has type %s, the stream's is %s", i, a.GetTypeUrl(), typeURL)
		}
		name, deps, err := inspect(typeURL, a.GetValue())
		if err != nil {
			return d, fmt.Sprintf("resource %d: %v", i, err)
		}
		if i < len(names) && names[i] != "" && names[i] != name {
			return d, fmt.Sprintf("resource %d is named %q in the response and %q inside", i, names[i], name)
		}
		if name == "" {
			return d, fmt.Sprintf("resource %d has no name", i)
		}
		if seen[name] {
			return d, fmt.Sprintf("duplicate resource %q", name)
		}
		seen[name] = true
		d.res = append(d.res, resource{name: name, body: a.GetValue()})
		if deps != nil {
			d.deps[name] = deps
		}
	}
	return d, ""
}

func inspect(typeURL string, b []byte) (string, []string, error) {
	switch typeURL {
	case cdsType:
		var c cluster.Cluster
		if err := proto.Unmarshal(b, &c); err != nil {
			return "", nil, err
		}
		if c.GetType() != cluster.Cluster_EDS {
			return c.GetName(), []string{}, nil
		}
		if s := c.GetEdsClusterConfig().GetServiceName(); s != "" {
			return c.GetName(), []string{s}, nil
		}
		return c.GetName(), []string{c.GetName()}, nil
	case ldsType:
		var l listener.Listener
		if err := proto.Unmarshal(b, &l); err != nil {
			return "", nil, err
		}
		routes := []string{}
		chains := append([]*listener.FilterChain{l.GetDefaultFilterChain()}, l.GetFilterChains()...)
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				if f.GetTypedConfig().GetTypeUrl() != hcmType {
					continue
				}
				var h hcm.HttpConnectionManager
				if err := proto.Unmarshal(f.GetTypedConfig().GetValue(), &h); err != nil {
					return "", nil, fmt.Errorf("listener %s: HttpConnectionManager: %v", l.GetName(), err)
				}
				if r := h.GetRds().GetRouteConfigName(); r != "" {
					routes = append(routes, r)
				}
			}
		}
		return l.GetName(), routes, nil
	case edsType:
		var e endpoint.ClusterLoadAssignment
		err := proto.Unmarshal(b, &e)
		return e.GetClusterName(), nil, err
	case rdsType:
		var r route.RouteConfiguration
		err := proto.Unmarshal(b, &r)
		return r.GetName(), nil, err
	case sdsType:
		var s tls.Secret
		err := proto.Unmarshal(b, &s)
		return s.GetName(), nil, err
	}
	return "", nil, fmt.Errorf("type %s is not one Envoy subscribed to", typeURL)
}

// union is the sorted set of every dependency name in deps.
func union(deps map[string][]string) []string {
	set := map[string]bool{}
	for _, ds := range deps {
		for _, d := range ds {
			set[d] = true
		}
	}
	out := make([]string, 0, len(set))
	for d := range set {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
