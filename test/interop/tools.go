//go:build tools

// Package interop pins the Istio packages the interop suites build.
package interop

import _ "istio.io/istio/pilot/cmd/pilot-agent"
