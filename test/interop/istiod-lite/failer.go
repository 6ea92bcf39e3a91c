package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// failer satisfies Istio's test.Failer outside `go test`: a fatal error ends the process with
// the message on stderr, cleanups run at shutdown, temp dirs live under the state folder.
type failer struct {
	mu       sync.Mutex
	cleanups []func()
	tmpRoot  string
	tmpCount int
}

func newFailer(stateDir string) *failer {
	return &failer{tmpRoot: filepath.Join(stateDir, "tmp")}
}

func (f *failer) Fail()                          { fatalf("Fail called") }
func (f *failer) FailNow()                       { fatalf("FailNow called") }
func (f *failer) Fatal(args ...any)              { fatalf("%s", fmt.Sprint(args...)) }
func (f *failer) Fatalf(format string, a ...any) { fatalf(format, a...) }
func (f *failer) Log(args ...any)                { fmt.Fprintln(os.Stderr, args...) }
func (f *failer) Logf(format string, a ...any)   { fmt.Fprintf(os.Stderr, format+"\n", a...) }
func (f *failer) Helper()                        {}
func (f *failer) Skip(args ...any)               { fatalf("Skip called: %s", fmt.Sprint(args...)) }

func (f *failer) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *failer) TempDir() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tmpCount++
	dir := filepath.Join(f.tmpRoot, fmt.Sprint(f.tmpCount))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fatalf("temp dir: %v", err)
	}
	return dir
}

// runCleanups runs the registered cleanups in reverse order, as testing.T does.
func (f *failer) runCleanups() {
	f.mu.Lock()
	fns := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}
