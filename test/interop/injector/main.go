// Command injector renders pods the way Istio's sidecar injector does, for the injection
// differential. It is test tooling: nothing of it ships in dist/agent.
//
// The installation comes from the chart in the oracle's module (manifests/, rendered by Istio's
// own operator/pkg/render exactly as pkg/kube/inject's tests do it: the istio-sidecar-injector
// ConfigMap gives the templates and values, the istio ConfigMap the mesh config); the pods are
// rendered by pkg/kube/inject.IntoObject, the code `istioctl kube-inject` runs.
//
// Input (stdin, JSON): {"installs": [{"id", "set": [helm --set flags], "templates": {name: text}}],
// "pods": [{"name", "install", "object": <a Deployment, Pod, ... as JSON>}]}.
// Output (stdout, JSON; Istio's own log lines go to stderr): {"pods": [{"name", "object": <the injected object>} or {"name", "error"}]}.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	meshconfig "istio.io/api/mesh/v1alpha1"
	"istio.io/istio/operator/pkg/render"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/kube/inject"
)

type install struct {
	ID        string            `json:"id"`
	Set       []string          `json:"set"`
	Templates map[string]string `json:"templates"`
}

type podIn struct {
	Name    string          `json:"name"`
	Install string          `json:"install"`
	Object  json.RawMessage `json:"object"`
}

type request struct {
	Installs []install `json:"installs"`
	Pods     []podIn   `json:"pods"`
}

type podOut struct {
	Name     string   `json:"name"`
	Object   any      `json:"object,omitempty"`
	Error    string   `json:"error,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

type settings struct {
	config inject.Config
	values inject.ValuesConfig
	mesh   *meshconfig.MeshConfig
}

// manifestsDir is the chart tree of the istio.io/istio module this binary was built from.
func manifestsDir() (string, error) {
	if d := os.Getenv("INJECTOR_MANIFESTS"); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("INJECTOR_MANIFESTS is not set (the manifests/ folder of the istio.io/istio module)")
}

// load renders the istio-discovery chart with the install's --set flags, as webhook_test.go's
// getInjectionSettings does, and adds the install's custom templates.
func load(dir string, in install) (*settings, error) {
	set := append([]string{"installPackagePath=" + dir, "profile=empty", "components.pilot.enabled=true"}, in.Set...)
	manifests, _, err := render.GenerateManifest(nil, set, false, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("install %s: render the chart: %v", in.ID, err)
	}
	s := &settings{}
	found := 0
	for _, set := range manifests {
		for _, o := range set.Manifests {
			if o.GetKind() != gvk.ConfigMap.Kind {
				continue
			}
			data, _ := o.Object["data"].(map[string]any)
			switch o.GetName() {
			case "istio-sidecar-injector":
				raw, _ := data["config"].(string)
				vals, _ := data["values"].(string)
				if s.values, err = inject.NewValuesConfig(vals); err != nil {
					return nil, fmt.Errorf("install %s: values: %v", in.ID, err)
				}
				if s.config, err = inject.UnmarshalConfig([]byte(raw)); err != nil {
					return nil, fmt.Errorf("install %s: injection config: %v", in.ID, err)
				}
				found++
			case "istio":
				meshData, _ := data["mesh"].(string)
				if s.mesh, err = mesh.ApplyMeshConfig(meshData, mesh.DefaultMeshConfig()); err != nil {
					return nil, fmt.Errorf("install %s: mesh config: %v", in.ID, err)
				}
				found++
			}
		}
	}
	if found != 2 {
		return nil, fmt.Errorf("install %s: the chart rendered no istio-sidecar-injector or istio ConfigMap", in.ID)
	}
	if len(in.Templates) > 0 {
		for name, text := range in.Templates {
			s.config.RawTemplates[name] = text
		}
		if s.config.Templates, err = inject.ParseTemplates(s.config.RawTemplates); err != nil {
			return nil, fmt.Errorf("install %s: custom templates: %v", in.ID, err)
		}
	}
	return s, nil
}

func renderPod(s *settings, p podIn) podOut {
	out := podOut{Name: p.Name}
	obj, err := inject.FromRawToObject(p.Object)
	if err != nil {
		out.Error = fmt.Sprintf("decode: %v", err)
		return out
	}
	mc, err := mesh.DeepCopyMeshConfig(s.mesh)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	injected, err := inject.IntoObject(nil, s.config.Templates, s.values, "", mc, obj, func(w string) { out.Warnings = append(out.Warnings, w) })
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Object = injected
	return out
}

func run(in io.Reader, w io.Writer) error {
	var req request
	dec := json.NewDecoder(io.LimitReader(in, 64<<20))
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("stdin: %v", err)
	}
	dir, err := manifestsDir()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "charts/istio-control/istio-discovery/files/injection-template.yaml")); err != nil {
		return fmt.Errorf("INJECTOR_MANIFESTS=%s: no chart there: %v", dir, err)
	}
	installs := map[string]*settings{}
	for _, i := range req.Installs {
		s, err := load(dir, i)
		if err != nil {
			return err
		}
		installs[i.ID] = s
	}
	res := struct {
		Pods []podOut `json:"pods"`
	}{Pods: make([]podOut, len(req.Pods))}
	for k, p := range req.Pods {
		s, ok := installs[p.Install]
		if !ok {
			res.Pods[k] = podOut{Name: p.Name, Error: fmt.Sprintf("unknown install %q", p.Install)}
			continue
		}
		res.Pods[k] = renderPod(s, p)
	}
	enc := json.NewEncoder(w)
	return enc.Encode(res)
}

func main() {
	// Istio's loggers write to stdout; the JSON answer gets the real stdout, everything else stderr.
	answer, err := syscall.Dup(1)
	if err == nil {
		err = syscall.Dup2(2, 1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "injector: redirect stdout:", err)
		os.Exit(1)
	}
	if err := run(os.Stdin, os.NewFile(uintptr(answer), "stdout")); err != nil {
		fmt.Fprintln(os.Stderr, "injector:", err)
		os.Exit(1)
	}
}
