//go:build linux

package injector

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startIn starts argv inside node's cgroup (the test binary joins it, then execs).
func (l *testLab) startIn(t *testing.T, node string, argv ...string) *exec.Cmd {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.Command(exe, argv...)
	cmd.Env = append(os.Environ(), childEnv+"=cgexec", "COMMLAB_T_CGROUP="+l.target(node).Cgroup)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// cpuUse measures the CPU the node's cgroup uses over d, in cores.
func (l *testLab) cpuUse(t *testing.T, node string, d time.Duration) float64 {
	t.Helper()
	read := func() float64 {
		if cgMode() == "v2" {
			b, _ := os.ReadFile(filepath.Join(cgroupPath("cpu", l.target(node).Cgroup), "cpu.stat"))
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
					n, _ := strconv.ParseFloat(v, 64)
					return n * 1e3
				}
			}
			return 0
		}
		b, err := os.ReadFile(filepath.Join(cgroupPath("cpuacct", l.target(node).Cgroup), "cpuacct.usage"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		return n
	}
	a := read()
	time.Sleep(d)
	return (read() - a) / float64(d.Nanoseconds())
}

func TestCPUSqueezeRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	spin := l.startIn(t, "n1", "yes")
	time.Sleep(100 * time.Millisecond)
	// Other tests may load the machine: the spinner just has to clearly exceed the quota.
	if u := l.cpuUse(t, "n1", 400*time.Millisecond); u < 0.12 {
		t.Fatalf("spinner uses %.2f cores before the fault, want about 1", u)
	}
	t.Run("quota", func(t *testing.T) {
		roundTrip(t, l, in, "n1", mustParse(t, in, "cpu-squeeze", map[string]string{"cpus": "0.05"}), func(t *testing.T, e Entry) {
			f := "cpu.cfs_quota_us"
			if cgMode() == "v2" {
				f = "cpu.max"
			}
			b, _ := os.ReadFile(filepath.Join(cgroupPath("cpu", l.target("n1").Cgroup), f))
			mustContain(t, "cat "+f, string(b), "5000")
			if u := l.cpuUse(t, "n1", 500*time.Millisecond); u > 0.08 {
				t.Errorf("spinner uses %.2f cores under a 0.05-core quota", u)
			}
		})
	})
	t.Run("cpuset", func(t *testing.T) {
		roundTrip(t, l, in, "n1", mustParse(t, in, "cpu-squeeze", map[string]string{"cpuset": "0"}), func(t *testing.T, e Entry) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(spin.Process.Pid) + "/status")
			mustContain(t, "/proc/<pid>/status", string(b), "Cpus_allowed_list:\t0\n")
		})
	})
}

func TestMemPressureRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	roundTrip(t, l, in, "n1", mustParse(t, in, "mem-pressure", map[string]string{"limit": "16MiB"}), func(t *testing.T, e Entry) {
		b, _ := os.ReadFile(filepath.Join(cgroupPath("memory", l.target("n1").Cgroup), memFile()))
		if strings.TrimSpace(string(b)) != "16777216" {
			t.Errorf("%s = %s, want 16777216", memFile(), b)
		}
		// dd with a 64 MiB buffer cannot live in 16 MiB: the OOM killer ends it.
		dd := l.startIn(t, "n1", "dd", "if=/dev/zero", "of=/dev/null", "bs=64M", "count=4")
		err := dd.Wait()
		ws, _ := dd.ProcessState.Sys().(syscall.WaitStatus)
		if err == nil || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Errorf("dd with 64 MiB in a 16 MiB cgroup: %v, want killed by the OOM killer", err)
		}
	})
}

func TestShmSmallRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	roundTrip(t, l, in, "n1", mustParse(t, in, "shm-small", map[string]string{"size": "1MiB"}), func(t *testing.T, e Entry) {
		mnt, ok := ShmNamespace(l.target("n1"))
		if !ok {
			t.Fatal("no mount namespace for the node")
		}
		out, err := exec.Command("nsenter", "--mount="+mnt, "df", "-B1", "--output=size", "/dev/shm").CombinedOutput()
		if err != nil {
			t.Fatalf("df: %v: %s", err, out)
		}
		mustContain(t, "df /dev/shm in the node", string(out), "1048576")
		out, err = exec.Command("nsenter", "--mount="+mnt, "dd", "if=/dev/zero", "of=/dev/shm/cl-test", "bs=1M", "count=4").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "No space left on device") {
			t.Errorf("writing 4 MiB to a 1 MiB /dev/shm: %v: %s", err, out)
		}
		var st syscall.Statfs_t
		if syscall.Statfs("/dev/shm", &st); uint64(st.Blocks)*uint64(st.Bsize) <= 1<<20 {
			t.Errorf("the host's /dev/shm shrank too")
		}
	})
}
