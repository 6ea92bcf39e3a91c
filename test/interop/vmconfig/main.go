// Command vmconfig writes a VM's files (cluster.env, mesh.yaml, hosts, root-cert.pem,
// istio-token) with Istio's own workload-entry configuration code: it runs istioctl's
// `x workload entry configure` (istio.io/istio/istioctl/pkg/workload) against Istio's fake
// Kubernetes client holding what a cluster would hold: the `istio` ConfigMap (mesh config),
// the `istio-ca-root-cert` ConfigMap of the WorkloadGroup's namespace (the CA root), the
// service account, and a TokenRequest answer carrying the given token (the fake clientset has
// no token issuer of its own). It is test tooling for test/interop/vm-start.test.ts: nothing
// of it ships in dist/agent.
package main

import (
	"flag"
	"fmt"
	"os"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"sigs.k8s.io/yaml"

	clientnetworking "istio.io/client-go/pkg/apis/networking/v1"
	"istio.io/istio/istioctl/pkg/cli"
	"istio.io/istio/istioctl/pkg/workload"
)

func main() {
	wgPath := flag.String("workload-group", "", "WorkloadGroup YAML (required)")
	meshPath := flag.String("mesh-config", "", "mesh config YAML: the `mesh` key of the istio ConfigMap (required)")
	rootPath := flag.String("root-cert", "", "PEM of the CA root: the istio-ca-root-cert ConfigMap (required)")
	token := flag.String("token", "", "the token the TokenRequest returns (required)")
	out := flag.String("o", "", "output directory (required)")
	internalIP := flag.String("internal-ip", "", "--internalIP of `workload entry configure`")
	ingressIP := flag.String("ingress-ip", "", "--ingressIP of `workload entry configure`")
	clusterID := flag.String("cluster-id", "Kubernetes", "--clusterID of `workload entry configure`")
	flag.Parse()
	if *wgPath == "" || *meshPath == "" || *rootPath == "" || *token == "" || *out == "" {
		fatalf("--workload-group, --mesh-config, --root-cert, --token and -o are required")
	}
	wgYAML, err := os.ReadFile(*wgPath)
	check("workload group", err)
	wg := &clientnetworking.WorkloadGroup{}
	check("workload group", yaml.Unmarshal(wgYAML, wg))
	mesh, err := os.ReadFile(*meshPath)
	check("mesh config", err)
	root, err := os.ReadFile(*rootPath)
	check("root cert", err)

	ns := wg.Namespace
	sa := "default"
	if wg.Spec.Template != nil && wg.Spec.Template.ServiceAccount != "" {
		sa = wg.Spec.Template.ServiceAccount
	}
	ctx := cli.NewFakeContext(&cli.NewFakeContextOption{
		IstioNamespace: "istio-system",
		Objects: []runtime.Object{
			&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio"},
				Data:       map[string]string{"mesh": string(mesh)},
			},
			&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "istio-ca-root-cert"},
				Data:       map[string]string{"root-cert.pem": string(root)},
			},
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}},
		},
	})
	client, err := ctx.CLIClientWithRevision(ctx.RevisionOrDefault(""))
	check("fake client", err)
	fakeKube, ok := client.Kube().(*kubefake.Clientset)
	if !ok {
		fatalf("fake client: Kube() is %T, not the fake clientset", client.Kube())
	}
	fakeKube.PrependReactor("create", "serviceaccounts", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "token" {
			return false, nil, nil
		}
		req := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenRequest)
		req.Status.Token = *token
		return true, req, nil
	})

	cmd := workload.Cmd(ctx)
	args := []string{"entry", "configure", "-f", *wgPath, "-o", *out, "--clusterID", *clusterID}
	if *internalIP != "" {
		args = append(args, "--internalIP", *internalIP)
	}
	if *ingressIP != "" {
		args = append(args, "--ingressIP", *ingressIP)
	}
	cmd.SetArgs(args)
	cmd.SetOut(os.Stderr)
	cmd.SetErr(os.Stderr)
	check("workload entry configure", cmd.Execute())
}

func check(what string, err error) {
	if err != nil {
		fatalf("%s: %v", what, err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "vmconfig: "+format+"\n", args...)
	os.Exit(1)
}
