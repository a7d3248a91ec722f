package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commlab/commlab/internal/testenv"
)

// syncBuffer is an output buffer the test reads while the lab writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestLabRun drives `commlab lab run` as a learner at a terminal would: wait for the
// task, open a shell, run tc, come back, list history, answer.
func TestLabRun(t *testing.T) {
	testenv.RequireRoot(t, "lab sandboxes")
	ct, probs := loadContent("")
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	sc, _ := ct.scenarios.Get("ch01-tour")
	const seed = 42
	node := sc.Draw(seed).Values["node"]
	g := &globals{dataDir: t.TempDir()}
	inR, inW := io.Pipe()
	out := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- runLab(ctx, g, sc, seed, 10*time.Minute, inR, out) }()
	waitFor := func(want string) {
		t.Helper()
		for !strings.Contains(out.String(), want) {
			if ctx.Err() != nil {
				t.Fatalf("timed out waiting for %q; output:\n%s", want, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("lab> ")
	ids := sandboxes(t, g.dataDir)
	if len(ids) != 1 {
		t.Fatalf("lab list: %d sandboxes %v, want the lab's one", len(ids), ids)
	}
	send("shell " + node + "\n")
	waitFor("learner@" + node)
	send("tc -s qdisc show dev rdma0\n")
	waitFor("qdisc tbf")
	send("\x1d")
	send("history\n")
	waitFor(node + "#1  tc -s qdisc show dev rdma0")
	send("answer class=nic-rate-limited node=" + node + " nic=rdma0 evidence=" + node + "#1\n")
	waitFor("== result")
	inW.Close()
	if err := <-errc; err != nil {
		t.Fatalf("lab run: %v\n%s", err, out.String())
	}
	// The lab is gone when runLab returns: its namespaces, cgroup, shells and ranks.
	assertGone(t, ids[0])
	if ids := sandboxes(t, g.dataDir); len(ids) > 0 {
		t.Errorf("lab list after lab run: %v", ids)
	}
	if !strings.Contains(out.String(), "result: PASSED, score 100%") || !strings.Contains(out.String(), "tc qdisc replace dev rdma0") {
		t.Errorf("output:\n%s", out.String())
	}
}

// sandboxes lists the ids `lab list` shows for a data directory.
func sandboxes(t *testing.T, data string) []string {
	t.Helper()
	out, err := cli(t, data, "lab", "list")
	if err != nil {
		t.Fatalf("lab list: %v\n%s", err, out)
	}
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		ids = append(ids, strings.Fields(line)[0])
	}
	return ids
}
