package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// BinEnv names a commlab binary for the tests to run instead of building their own:
// `make test` sets it to the one `make build` just made; on a GPU machine without Go
// the binary is built elsewhere and carried.
const BinEnv = "COMMLAB_TEST_BIN"

// The commlab binary of this test process, made by Commlab, removed by Main.
var (
	binMu  sync.Mutex
	binDir string
)

// Commlab returns the commlab binary that lab ranks, learner shells and Slurm agents
// run: a copy of BinEnv's, or built on first use, once per test process. It lives
// outside /tmp and is readable by everyone: a learner shell sees the binary's
// directory on its PATH, but not the host's /tmp (the sandbox has its own).
func Commlab(t testing.TB) string {
	t.Helper()
	binMu.Lock()
	defer binMu.Unlock()
	if binDir != "" {
		return filepath.Join(binDir, "commlab")
	}
	dir, err := os.MkdirTemp("/var/lib", "commlab-test-")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "commlab")
	var b []byte
	if bin := os.Getenv(BinEnv); bin != "" {
		b, err = exec.Command("install", "-m", "0755", bin, out).CombinedOutput()
	} else {
		b, err = exec.Command("go", "build", "-o", out, "github.com/commlab/commlab/cmd/commlab").CombinedOutput()
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		os.RemoveAll(dir)
		t.Fatalf("commlab binary: %v\n%s", err, b)
	}
	binDir = dir
	return out
}

// Main runs a package's tests, then each of after, then removes the binary Commlab
// made (about 65 MB). Packages whose tests call Commlab call it from TestMain.
func Main(m *testing.M, after ...func()) {
	code := m.Run()
	for _, f := range after {
		f()
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}
