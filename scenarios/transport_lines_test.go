package scenarios

import (
	"bufio"
	"io/fs"
	"os"
	"strings"
	"testing"
)

// TestRecordedTransportLines grades ch10-nvlink-p2p-off's transport evidence against
// connection lines real NCCL versions printed (testdata/nccl-transport-lines.txt): SHM and
// NET lines are the evidence, P2P lines are the healthy path and must not count.
func TestRecordedTransportLines(t *testing.T) {
	const file = CatalogDir + "/ch10-nvlink-p2p-off.yaml"
	src, err := fs.ReadFile(Embedded(), file)
	if err != nil {
		t.Fatal(err)
	}
	s, probs := Parse(file, src, Options{Topology: testOpts.Topology})
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	ev, err := s.Draw(1).Evidence()
	if err != nil {
		t.Fatal(err)
	}
	var transport *EvidencePattern
	for i := range ev {
		if ev[i].Spec.ID == "transport" {
			transport = &ev[i]
		}
	}
	if transport == nil {
		t.Fatal("no evidence with id transport")
	}

	f, err := os.Open("testdata/nccl-transport-lines.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, text, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("line %d: want <kind>TAB<log line>", n)
		}
		seen[kind]++
		got := transport.Output.MatchString(text)
		switch kind {
		case "shm", "net":
			if !got {
				t.Errorf("line %d: %s line not matched by %v:\n%s", n, kind, transport.Output, text)
			}
		case "p2p":
			if got {
				t.Errorf("line %d: p2p line matched by %v:\n%s", n, transport.Output, text)
			}
		default:
			t.Fatalf("line %d: unknown kind %q", n, kind)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"shm", "net", "p2p"} {
		if seen[kind] < 3 {
			t.Errorf("only %d %s lines in the testdata, want at least 3", seen[kind], kind)
		}
	}
}
