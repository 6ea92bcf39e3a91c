package main

// With --honor-requested-ttl the CA signs each workload certificate for the validity its request
// asks for (IstioCertificateRequest.validity_duration, the agent's SECRET_TTL) instead of the mock
// CA's fixed 24 hours, as istiod's CA does up to its maximum: short-lived certificates, so the
// suites can watch an agent rotate them (or fail to) within a test.

import (
	"context"
	"encoding/pem"
	"flag"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "istio.io/api/security/v1alpha1"
	"istio.io/istio/pkg/security"
	pkiutil "istio.io/istio/security/pkg/pki/util"
)

var honorRequestedTTL = flag.Bool("honor-requested-ttl", false,
	"sign workload certificates for the validity the request asks for instead of the mock CA's fixed 24h")

// requestedTTLSigner answers CreateCertificate itself when --honor-requested-ttl is set: the same
// authentication and identities as the mock CA, Istio's own GenCertFromCSR, the requested lifetime.
func requestedTTLSigner(r *root, auth security.Authenticator) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		csrReq, ok := req.(*pb.IstioCertificateRequest)
		if !*honorRequestedTTL || !ok || csrReq.ValidityDuration <= 0 {
			return handler(ctx, req)
		}
		caller, err := security.Authenticate(ctx, []security.Authenticator{auth})
		if caller == nil || err != nil {
			return nil, status.Error(codes.Unauthenticated, "request authenticate failure")
		}
		csr, err := pkiutil.ParsePemEncodedCSR([]byte(csrReq.Csr))
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "CSR: %v", err)
		}
		key, err := pkiutil.ParsePemEncodedKey(r.keyPEM)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "root key: %v", err)
		}
		der, err := pkiutil.GenCertFromCSR(csr, r.cert, csr.PublicKey, key, caller.Identities,
			time.Duration(csrReq.ValidityDuration)*time.Second, false)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "sign: %v", err)
		}
		leaf := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		return &pb.IstioCertificateResponse{CertChain: []string{string(leaf), string(r.certPEM)}}, nil
	}
}
