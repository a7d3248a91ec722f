//go:build linux

package netns

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/commlab/commlab/labs/topology"

	"github.com/commlab/commlab/internal/testenv"
	"github.com/commlab/commlab/internal/testlab"
)

// helperEnv makes the test binary act as a crash-test child (see TestMain).
const helperEnv = "COMMLAB_NETNS_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "up":
		os.Exit(helperUp())
	case "nsid-attack":
		os.Exit(helperNSIDAttack())
	}
	os.Exit(m.Run())
}

// helperUp brings a sandbox up and then waits to be killed.
func helperUp() int {
	top, err := topology.Builtin(os.Getenv("HELPER_TOPO"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	opts := Options{DataDir: os.Getenv("HELPER_DATA"), ID: os.Getenv("HELPER_ID"), Detached: os.Getenv("HELPER_DETACH") != ""}
	if ttl, err := time.ParseDuration(os.Getenv("HELPER_TTL")); err == nil {
		opts.TTL = ttl
	}
	s, err := New(top, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := s.Up(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("UP")
	if os.Getenv("HELPER_EXIT") != "" {
		return 0 // leave the sandbox behind, as a crash would
	}
	time.Sleep(time.Minute)
	return 0
}

func needRoot(t testing.TB) {
	t.Helper()
	testenv.RequireRoot(t, "network namespaces, tc, cgroups")
}

// upSandbox builds a sandbox of a built-in topology and removes it when the
// test ends, failing the test if anything of it is left.
func upSandbox(t *testing.T, topo string, opts Options) *Sandbox {
	t.Helper()
	needRoot(t)
	top, err := topology.Builtin(topo)
	if err != nil {
		t.Fatal(err)
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.ID == "" {
		opts.ID = testlab.NewID()
	}
	s, err := New(top, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		if err := s.Down(dctx); err != nil {
			t.Errorf("Down: %v", err)
		}
		cancel()
		if left := leftovers(s.ID(), opts.DataDir); len(left) > 0 {
			t.Errorf("after Down, sandbox %s left:\n%s", s.ID(), strings.Join(left, "\n"))
		}
	})
	if err := s.Up(ctx); err != nil {
		t.Fatalf("Up(%s): %v", topo, err)
	}
	return s
}

// run runs argv on node and returns its combined output; it fails the test
// if the command fails.
func run(t testing.TB, s *Sandbox, node string, argv ...string) string {
	t.Helper()
	out, err := tryRun(s, node, argv...)
	if err != nil {
		t.Fatalf("%s on %s: %v\n%s", strings.Join(argv, " "), node, err, out)
	}
	return out
}

func tryRun(s *Sandbox, node string, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := s.Exec(ctx, node, argv...)
	if err != nil {
		return "", err
	}
	out, err := c.CombinedOutput()
	return string(out), err
}

// host runs a command on the host (read-only inspection tools only).
func host(t testing.TB, argv ...string) string {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// leftovers lists every trace of sandbox id on the host: what testlab.Leftovers
// finds, and labs/netns's own files and slot lease.
func leftovers(id, dataDir string) []string {
	left := testlab.Leftovers(id)
	for _, p := range []string{sandboxRunDir(id), statePath(dataDir, id)} {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, "file "+p)
		}
	}
	for i, l := range readSlots() {
		if l.ID == id {
			left = append(left, "slot lease "+slotPath(i))
		}
	}
	return left
}
