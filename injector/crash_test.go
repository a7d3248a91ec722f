//go:build linux

package injector

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary act as a child process of a test (see runChild).
const childEnv = "COMMLAB_INJECTOR_TEST_CHILD"

// runChild is the test binary run as a child: "crash" applies and reverts faults
// in a loop until killed; "cgexec" joins a cgroup and execs its arguments.
func runChild(mode string) int {
	switch mode {
	case "cgexec":
		cg := os.Getenv("COMMLAB_T_CGROUP")
		if err := cgroupAddProc(cg, os.Getpid()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		argv := os.Args[1:]
		path, err := exec.LookPath(argv[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		err = syscall.Exec(path, argv, os.Environ())
		fmt.Fprintln(os.Stderr, err)
		return 3
	case "crash":
		return crashLoop()
	}
	fmt.Fprintln(os.Stderr, "unknown child mode", mode)
	return 2
}

// crashFaults is what the crash child cycles through: every kind with host state.
func crashFaults() []struct {
	kind   string
	params map[string]string
} {
	return []struct {
		kind   string
		params map[string]string
	}{
		{"nic-rate", map[string]string{"nic": "rdma0", "rate": "100mbit", "direction": "both"}},
		{"loss", map[string]string{"nic": "rdma0", "percent": "5%", "direction": "both"}},
		{"roce-drop", map[string]string{"nic": "rdma0"}},
		{"port-block", map[string]string{"ports": "29500-29510", "direction": "both"}},
		{"mtu-mismatch", map[string]string{"nic": "rdma0", "mtu": "1400"}},
		{"nic-down", map[string]string{"nic": "rdma0"}},
		{"wrong-route", map[string]string{"to": "198.18.1.0/24", "nic": "eth0"}},
		{"env-force", map[string]string{"vars": "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"}},
		{"cpu-squeeze", map[string]string{"cpus": "0.5", "cpuset": "0"}},
		{"mem-pressure", map[string]string{"limit": "512MiB"}},
		{"nic-flap", map[string]string{"nic": "rdma0", "period": "200ms", "duty": "50%"}},
		{"shm-small", map[string]string{"size": "1MiB"}},
		{"congestion", map[string]string{"nic": "rdma0", "senders": "n2", "rate": "10mbit", "port": "5401"}},
		{"corrupt", map[string]string{"nic": "rdma0", "percent": "5%", "direction": "both"}},
		{"delay", map[string]string{"nic": "rdma0", "delay": "2ms", "jitter": "200us"}},
	}
}

func crashLoop() int {
	reg, _ := NewRegistry(Builtin()...)
	in, err := Open(Options{DataDir: os.Getenv("COMMLAB_T_DATA"), Registry: reg})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	tg := Target{Sandbox: os.Getenv("COMMLAB_T_SANDBOX"), Node: "n1", Cgroup: os.Getenv("COMMLAB_T_CGROUP"), EtcDir: os.Getenv("COMMLAB_T_ETC")}
	start, _ := strconv.Atoi(os.Getenv("COMMLAB_T_START"))
	ctx := context.Background()
	faults := crashFaults()
	// Tell the parent the loop starts now: its random kill time counts from here,
	// not from exec, whose duration depends on how busy the machine is.
	fmt.Println("ready")
	for i := start; ; i++ {
		c := faults[i%len(faults)]
		f, err := reg.Parse(c.kind, c.params)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		e, err := in.Apply(ctx, tg, f, time.Minute)
		if err != nil {
			fmt.Fprintln(os.Stderr, "apply:", err)
			return 1
		}
		if err := in.Revert(ctx, e.ID); err != nil {
			fmt.Fprintln(os.Stderr, "revert:", err)
			return 1
		}
	}
}

// TestCrashSweep kills a process at a random moment while it applies or reverts
// faults, then sweeps from a fresh injector: nothing of commlab's may be left
// and the journal must be empty. COMMLAB_CRASH_LOOPS sets the number of loops.
func TestCrashSweep(t *testing.T) {
	loops := 50
	if v, err := strconv.Atoi(os.Getenv("COMMLAB_CRASH_LOOPS")); err == nil && v > 0 {
		loops = v
	}
	if testing.Short() {
		loops = 10
	}
	inflight, byKind := crashLoops(t, loops)
	t.Logf("%d loops, %d killed with a fault in the journal; by kind: %v", loops, inflight, byKind)
	if inflight < loops/5 {
		t.Errorf("only %d of %d kills hit a fault in flight; the test is not exercising the sweep", inflight, loops)
	}
}

// crashLoops runs the kill-then-sweep loop and returns how many kills found a
// fault in the journal, by kind. Any leftover fails the test.
func crashLoops(t *testing.T, loops int) (int, map[string]int) {
	l := newLab(t, 1500, "n1", "n2")
	base := l.snapshot(t, "n1")
	data := t.TempDir()
	// Whatever happens to the test, the last child's faults do not outlive it.
	t.Cleanup(func() { openAt(t, data).Sweep(context.Background()) })
	exe, _ := os.Executable()
	tg := l.target("n1")
	nf := len(crashFaults())
	killedIn, inflight := map[string]int{}, 0
	for i := range loops {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), childEnv+"=crash", "COMMLAB_T_DATA="+data, "COMMLAB_T_SANDBOX="+l.ID,
			"COMMLAB_T_CGROUP="+tg.Cgroup, "COMMLAB_T_ETC="+tg.EtcDir, "COMMLAB_T_START="+strconv.Itoa(i%nf))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(stdout).ReadString('\n'); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("loop %d: child did not start its loop: %v: %s", i, err, stderr.String())
		}
		// Kill somewhere in the first few apply/revert cycles (each takes 1-300 ms).
		time.Sleep(time.Duration(rand.IntN(60_000)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("loop %d: child ended by itself (%v): %s", i, err, stderr.String())
		}
		in := openAt(t, data)
		entries, _ := in.List()
		ids := map[string]bool{}
		for _, e := range entries {
			ids[e.ID] = true
			killedIn[e.Kind]++
		}
		if len(entries) > 0 {
			inflight++
		}
		if _, err := in.Sweep(ctxT(t)); err != nil {
			t.Fatalf("loop %d: sweep: %v", i, err)
		}
		if left, _ := in.List(); len(left) != 0 {
			t.Fatalf("loop %d: journal still lists %v after sweep", i, left)
		}
		assertSame(t, fmt.Sprintf("loop %d", i), base, l.snapshot(t, "n1"))
		// A process started behind the gate but never released (its starter died
		// first) carries the tag only once it execs the helper, possibly after the
		// sweep looked; it then reads end-of-file and exits by itself.
		for wait := time.Now().Add(2 * time.Second); len(taggedWith(ids)) > 0 && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
		}
		if p := taggedWith(ids); len(p) != 0 {
			t.Fatalf("loop %d: tagged processes left: %v", i, p)
		}
		if _, err := os.Stat(filepath.Join(mntnsDir, l.NetNS("n1"))); err == nil {
			t.Fatalf("loop %d: mount namespace file left", i)
		}
		if s := staleProbes(); len(s) > 0 {
			t.Fatalf("loop %d: probe namespaces of dead processes left: %v", i, s)
		}
	}
	return inflight, killedIn
}

func openAt(t testing.TB, data string) *Injector {
	reg, _ := NewRegistry(Builtin()...)
	in, err := Open(Options{DataDir: data, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	return in
}
