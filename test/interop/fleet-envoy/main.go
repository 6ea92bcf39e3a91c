// Command fleet-envoy plays the Envoy of every pod of a fleet in one process, so the agents'
// figures in bench/fleet.ts carry none of the stand-ins' cost. It is test tooling: nothing of it
// ships in dist/agent.
//
// Each pod's agent starts a launcher script as its Envoy (it writes its arguments to
// <pod>/envoy-args and execs sleep); fleet-envoy, told of the pod on stdin, waits for that file,
// reads the bootstrap it names and from then on behaves like Envoy on the wire for that pod:
// the admin API the agents poll (admin.go), one ADS stream to the agent's XDS socket for CDS,
// EDS, LDS and RDS over SotW or Delta (ads.go, delta.go), and an SDS stream each for `default`
// and `ROOTCA` (sds.go), ACKing valid responses and NACKing invalid ones as Envoy does. Every
// response each pod saw is recorded (record.go).
//
// Control: one JSON object a line on stdin, events one JSON object a line on stdout.
//
//	{"cmd":"pod","pod":"p0","dir":"/abs/pod","statusPort":15020,"mode":"sotw"|"delta"}
//	{"cmd":"mark","id":"m1","text":"10.200.0.1"}   -> {"event":"marked","id":"m1"}
//	{"cmd":"dump","id":"d1","since":t}              -> {"event":"dump","id":"d1","pods":{...}}
//
// (a dump holds each pod's streams opened, its resources now and the responses since `since`)
//
// and unprompted: {"event":"ready","pod":…,"t":…,"cert":…,"config":…} once the pod's agent says
// /healthz/ready 200 and the stand-in has its certificate and has ACKed CDS and LDS, and
// {"event":"seen","id":…,"pod":…,"t":…} the first time a pod ACKs a response holding a mark's
// text (as a length-prefixed protobuf string: a whole field, not a prefix of a longer one).
// Times are Unix milliseconds (fractional).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// maxLine bounds one control line.
const maxLine = 1 << 20

type command struct {
	Cmd        string  `json:"cmd"`
	Pod        string  `json:"pod"`
	Dir        string  `json:"dir"`
	StatusPort int     `json:"statusPort"`
	Mode       string  `json:"mode"`
	ID         string  `json:"id"`
	Text       string  `json:"text"`
	Since      float64 `json:"since"`
}

type fleet struct {
	out   *output
	marks *marks
	mu    sync.Mutex
	pods  map[string]*pod
}

// output serialises the event lines.
type output struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *output) emit(v any) {
	b, _ := json.Marshal(v)
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(b, '\n'))
	_ = o.w.Flush()
}

func nowMs() float64 { return float64(time.Now().UnixNano()) / 1e6 }

func main() {
	f := &fleet{out: &output{w: bufio.NewWriter(os.Stdout)}, marks: newMarks(), pods: map[string]*pod{}}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64<<10), maxLine)
	for in.Scan() {
		var c command
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			f.out.emit(map[string]any{"event": "error", "message": fmt.Sprintf("control line: %v", err)})
			continue
		}
		switch c.Cmd {
		case "pod":
			if c.Mode != "sotw" && c.Mode != "delta" {
				f.out.emit(map[string]any{"event": "error", "message": fmt.Sprintf("pod %s: mode %q is not sotw or delta", c.Pod, c.Mode)})
				continue
			}
			p := newPod(c.Pod, c.Dir, c.StatusPort, c.Mode == "delta", f.out, f.marks)
			f.mu.Lock()
			f.pods[c.Pod] = p
			f.mu.Unlock()
			go p.run()
		case "mark":
			f.marks.add(c.ID, c.Text)
			f.out.emit(map[string]any{"event": "marked", "id": c.ID})
		case "dump":
			f.mu.Lock()
			pods := map[string]any{}
			for id, p := range f.pods {
				pods[id] = p.rec.dump(c.Since)
			}
			f.mu.Unlock()
			f.out.emit(map[string]any{"event": "dump", "id": c.ID, "pods": pods})
		default:
			f.out.emit(map[string]any{"event": "error", "message": fmt.Sprintf("unknown command %q", c.Cmd)})
		}
	}
}
