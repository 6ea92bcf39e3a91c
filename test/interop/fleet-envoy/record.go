package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
)

// maxResponses bounds each pod's response log (the oldest beyond it are dropped and counted).
const maxResponses = 100_000

// marks are the texts whose first ACK per pod is reported.
type marks struct {
	mu   sync.Mutex
	list []mark
}

type mark struct {
	id      string
	pattern []byte
}

func newMarks() *marks { return &marks{} }

func (m *marks) add(id, text string) {
	// A protobuf string field is its length then its bytes: matching both finds the whole field.
	pat := append(appendVarint(nil, uint64(len(text))), text...)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.list = append(m.list, mark{id: id, pattern: pat})
}

func (m *marks) snapshot() []mark {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]mark(nil), m.list...)
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// resource is one resource of a response: its name and its encoded bytes.
type resource struct {
	name string
	body []byte
}

// response is one response a stream received, as recorded.
type response struct {
	T       float64 `json:"t"`
	Stream  string  `json:"stream"`
	Type    string  `json:"type"`
	Version string  `json:"version"`
	Nonce   string  `json:"nonce"`
	N       int     `json:"n"`
	Removed int     `json:"removed,omitempty"`
	Ack     bool    `json:"ack"`
	Error   string  `json:"error,omitempty"`
}

// recorder holds what one pod's Envoy saw.
type recorder struct {
	pod      string
	out      *output
	marks    *marks
	progress func()

	mu        sync.Mutex
	streams   map[string]int
	responses []response
	dropped   int
	state     map[string]map[string]string
	acked     map[string]int
	nacked    map[string]int
	seen      map[string]bool
	certAt    float64
	firstAck  map[string]float64
	dupes     int
}

func newRecorder(pod string, out *output, m *marks, progress func()) *recorder {
	return &recorder{
		pod: pod, out: out, marks: m, progress: progress,
		streams: map[string]int{}, state: map[string]map[string]string{}, acked: map[string]int{},
		nacked: map[string]int{}, seen: map[string]bool{}, firstAck: map[string]float64{},
	}
}

// stream counts a stream opened (ads, sds:default, sds:ROOTCA).
func (r *recorder) stream(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams[kind]++
}

// shortType is the last segment of a type URL (Cluster, Listener, ...).
func shortType(typeURL string) string {
	return typeURL[strings.LastIndex(typeURL, ".")+1:]
}

// record logs a response and, when it was ACKed, applies it to the pod's state: a SotW CDS or
// LDS response replaces its type's state (replace), the others add or update the named
// resources and drop `removed`.
func (r *recorder) record(stream, typeURL, version, nonce string, res []resource, removed []string, replace bool, errDetail string) {
	t := nowMs()
	typ := shortType(typeURL)
	ack := errDetail == ""
	var newlySeen []string
	r.mu.Lock()
	if len(r.responses) >= maxResponses {
		r.responses = r.responses[1:]
		r.dropped++
	}
	r.responses = append(r.responses, response{T: t, Stream: stream, Type: typ, Version: version, Nonce: nonce, N: len(res), Removed: len(removed), Ack: ack, Error: errDetail})
	if ack {
		r.acked[typ]++
		if _, ok := r.firstAck[typ]; !ok {
			r.firstAck[typ] = t
		}
		if typ == "Secret" && r.certAt == 0 && len(res) > 0 && res[0].name == "default" {
			r.certAt = t
		}
		st := r.state[typ]
		if st == nil || replace {
			st = map[string]string{}
			r.state[typ] = st
		}
		for _, name := range removed {
			delete(st, name)
		}
		for _, x := range res {
			sum := sha256.Sum256(x.body)
			st[x.name] = hex.EncodeToString(sum[:6])
		}
		for _, m := range r.marks.snapshot() {
			if r.seen[m.id] {
				continue
			}
			for _, x := range res {
				if bytes.Contains(x.body, m.pattern) {
					r.seen[m.id] = true
					newlySeen = append(newlySeen, m.id)
					break
				}
			}
		}
	} else {
		r.nacked[typ]++
	}
	r.mu.Unlock()
	for _, id := range newlySeen {
		r.out.emit(map[string]any{"event": "seen", "id": id, "pod": r.pod, "t": t})
	}
	if ack {
		r.progress()
	}
}

// duplicate counts a response naming one resource twice (NACKed by the caller).
func (r *recorder) duplicate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dupes++
}

// updates is what Envoy's update_success / update_rejected stats say for CDS and LDS.
func (r *recorder) updates() (cdsOK, cdsBad, ldsOK, ldsBad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked["Cluster"], r.nacked["Cluster"], r.acked["Listener"], r.nacked["Listener"]
}

// firsts: when the `default` certificate arrived, and when both CDS and LDS were first ACKed.
func (r *recorder) firsts() (cert, config float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, l := r.firstAck["Cluster"], r.firstAck["Listener"]
	if c == 0 || l == 0 {
		return r.certAt, 0
	}
	return r.certAt, max(c, l)
}

func (r *recorder) dump(since float64) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	state := map[string]map[string]string{}
	for t, m := range r.state {
		state[t] = map[string]string{}
		for k, v := range m {
			state[t][k] = v
		}
	}
	responses := []response{}
	for _, x := range r.responses {
		if x.T >= since {
			responses = append(responses, x)
		}
	}
	seen := []string{}
	for id := range r.seen {
		seen = append(seen, id)
	}
	return map[string]any{
		"streams": r.streams, "responses": responses, "dropped": r.dropped,
		"state": state, "acked": r.acked, "nacked": r.nacked, "seen": seen, "duplicates": r.dupes,
	}
}
