package main

import (
	"encoding/pem"
	"fmt"
	"os"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/trustbundle"
	"istio.io/istio/pilot/pkg/xds"
	v3 "istio.io/istio/pilot/pkg/xds/v3"
	xdsfake "istio.io/istio/pilot/test/xds"
)

// pcds serves PCDS (ProxyConfig with the mesh trust bundle) the way istiod does
// (pilot/pkg/bootstrap: initWorkloadTrustBundle, InitGenerators): Istio's own TrustBundle holds
// the CA's root and the mesh config's caCertificates, Istio's PcdsGenerator serves them, and a
// change of the bundle is a forced full push. Istio's generator only answers when the process
// runs with ISTIO_MULTIROOT_MESH=true (read once at start), as istiod's does.
type pcds struct {
	bundle *trustbundle.TrustBundle
	file   string
}

// newPcds installs the PCDS generator with the CA root and the certificates of file (PEM, each
// one a MeshConfig caCertificates entry).
func newPcds(ds *xdsfake.FakeDiscoveryServer, rootPEM []byte, file string) (*pcds, error) {
	p := &pcds{bundle: trustbundle.NewTrustBundle(nil, nil), file: file}
	if err := p.bundle.UpdateTrustAnchor(&trustbundle.TrustAnchorUpdate{
		TrustAnchorConfig: trustbundle.TrustAnchorConfig{Certs: []string{string(rootPEM)}},
		Source:            trustbundle.SourceIstioCA,
	}); err != nil {
		return nil, fmt.Errorf("CA root as trust anchor: %v", err)
	}
	if err := p.reload(); err != nil {
		return nil, err
	}
	discovery := ds.Discovery
	p.bundle.UpdateCb(func() {
		discovery.ConfigUpdate(&model.PushRequest{Forced: true, Reason: model.NewReasonStats(model.GlobalUpdate)})
	})
	discovery.Generators[v3.ProxyConfigType] = &xds.PcdsGenerator{TrustBundle: p.bundle}
	return p, nil
}

// reload reads the mesh config's caCertificates from the file again (SIGHUP): a changed set is
// pushed to every connected proxy.
func (p *pcds) reload() error {
	b, err := os.ReadFile(p.file)
	if err != nil {
		return fmt.Errorf("mesh caCertificates: %v", err)
	}
	var certs []*meshconfig.MeshConfig_CertificateData
	for rest := b; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		certs = append(certs, &meshconfig.MeshConfig_CertificateData{
			CertificateData: &meshconfig.MeshConfig_CertificateData_Pem{Pem: string(pem.EncodeToMemory(block))},
		})
	}
	return p.bundle.AddMeshConfigUpdate(&meshconfig.MeshConfig{CaCertificates: certs})
}
