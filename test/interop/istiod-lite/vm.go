package main

// Serving istiod as a VM reaches it (test/interop/vm-start.test.ts): on an address other than
// loopback (the one the VM's hosts file names), with Istio's CA service on the discovery port
// itself, as istiod serves both on 15012 (istio-start.sh points CA_ADDR at the discovery
// address).

import (
	"flag"
	"fmt"
	"net"

	"google.golang.org/grpc"

	pb "istio.io/api/security/v1alpha1"
)

var (
	listenHost = flag.String("listen-host", "127.0.0.1", "address the discovery server listens on")
	caOnXDS    = flag.Bool("ca-on-xds", false, "also serve Istio's CA service on the discovery server's port, as istiod does")
)

func xdsListenAddress(port int) string {
	return net.JoinHostPort(*listenHost, fmt.Sprint(port))
}

// registerCAOnXDS adds the CA service to the discovery server when --ca-on-xds is set; it must
// run before the server starts serving.
func registerCAOnXDS(xdsServer *grpc.Server, ca pb.IstioCertificateServiceServer) {
	if *caOnXDS {
		pb.RegisterIstioCertificateServiceServer(xdsServer, ca)
	}
}
