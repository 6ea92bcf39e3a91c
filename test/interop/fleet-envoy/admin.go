package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// serveAdmin answers Envoy's admin API as the agents read it: GET /ready (LIVE), GET
// /stats?filter=<re> (`name: value` lines: the CDS and LDS updates this pod ACKed or NACKed,
// server state live, workers started), POST /drain_listeners and /quitquitquit (OK); anything
// else 404.
func (p *pod) serveAdmin() {
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "LIVE") })
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		cdsOK, cdsBad, ldsOK, ldsBad := p.rec.updates()
		lines := []string{
			fmt.Sprintf("cluster_manager.cds.update_rejected: %d", cdsBad),
			fmt.Sprintf("cluster_manager.cds.update_success: %d", cdsOK),
			fmt.Sprintf("listener_manager.lds.update_rejected: %d", ldsBad),
			fmt.Sprintf("listener_manager.lds.update_success: %d", ldsOK),
			"listener_manager.workers_started: 1",
			"server.state: 0",
		}
		re, err := regexp.Compile(r.URL.Query().Get("filter"))
		if err != nil {
			http.Error(w, fmt.Sprintf("filter: %v", err), http.StatusBadRequest)
			return
		}
		var out []string
		for _, l := range lines {
			if re.MatchString(l[:strings.Index(l, ":")]) {
				out = append(out, l)
			}
		}
		fmt.Fprint(w, strings.Join(out, "\n"))
	})
	ok := func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "OK") }
	mux.HandleFunc("/drain_listeners", ok)
	mux.HandleFunc("/quitquitquit", ok)
	if err := http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", p.adminPort), mux); err != nil {
		p.fail("pod %s: admin on port %d: %v", p.id, p.adminPort, err)
	}
}
