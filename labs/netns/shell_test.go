//go:build linux

package netns

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clhost "github.com/commlab/commlab/internal/host"
	"github.com/commlab/commlab/labs"
	"github.com/commlab/commlab/labs/cgroup"
)

// session drives a learner terminal like a person would: it types a line and
// reads until a marker the line prints at its end.
type session struct {
	t    *testing.T
	term labs.Terminal
	mu   sync.Mutex
	out  bytes.Buffer
	seen int // bytes of out already consumed
	n    int
}

func newSession(t *testing.T, term labs.Terminal) *session {
	s := &session{t: t, term: term}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := term.Read(b)
			s.mu.Lock()
			s.out.Write(b[:n])
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s
}

// waitFor returns the output up to and including the first match of re
// after what was already consumed.
func (s *session) waitFor(re *regexp.Regexp, timeout time.Duration) ([]string, string) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		rest := s.out.String()[s.seen:]
		if loc := re.FindStringSubmatchIndex(rest); loc != nil {
			s.seen += loc[1]
			m := re.FindStringSubmatch(rest)
			s.mu.Unlock()
			return m, rest[:loc[0]]
		}
		s.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t.Fatalf("no %q within %v; terminal shows:\n%s", re, timeout, s.out.String()[s.seen:])
	return nil, ""
}

// escapes matches terminal control sequences (bash's bracketed paste mode).
var escapes = regexp.MustCompile(`\x1b\[[?0-9;]*[a-zA-Z]`)

// run types line and returns what it printed and its exit status. Markers
// before and after are printed from two halves so that the terminal's echo of
// the typed line never matches them.
func (s *session) run(line string) (string, int) {
	s.t.Helper()
	s.n++
	fmt.Fprintf(s.term, "printf '@@%%s%%s@@\\n' BEG %d; %s; printf '@@%%s%%s@@\\n' END \"%d-$?\"\n", s.n, line, s.n)
	s.waitFor(regexp.MustCompile(fmt.Sprintf(`@@BEG%d@@\r?\n`, s.n)), 20*time.Second)
	m, out := s.waitFor(regexp.MustCompile(fmt.Sprintf(`@@END%d-(\d+)@@`, s.n)), 20*time.Second)
	code, _ := strconv.Atoi(m[1])
	return escapes.ReplaceAllString(strings.ReplaceAll(out, "\r", ""), ""), code
}

func (s *session) must(line string) string {
	s.t.Helper()
	out, code := s.run(line)
	if code != 0 {
		s.t.Errorf("%q exited %d:\n%s", line, code, out)
	}
	return out
}

func (s *session) mustFail(line string) string {
	s.t.Helper()
	out, code := s.run(line)
	if code == 0 {
		s.t.Errorf("%q succeeded in the learner shell:\n%s", line, out)
	}
	return out
}

// TestLearnerShell checks what a learner can and cannot do from a shell.
func TestLearnerShell(t *testing.T) {
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "secret"), []byte("answer: nic-rate on node2"), 0o644); err != nil {
		t.Fatal(err)
	}
	sb := upSandbox(t, "2x1", Options{DataDir: data, Limits: cgroup.Limits{Pids: 96}})
	id := sb.ID()
	hostLinksBefore := host(t, "ip", "-o", "link")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term, err := sb.Shell(ctx, "node1", labs.ShellOptions{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	s := newSession(t, term)
	s.waitFor(regexp.MustCompile(`learner@node1:~\$ `), 20*time.Second)

	t.Run("identity", func(t *testing.T) {
		s.t = t
		if got := strings.TrimSpace(s.must("id -u")); got != strconv.Itoa(int(sb.LearnerUID())) {
			t.Errorf("id -u = %q, want %d", got, sb.LearnerUID())
		}
		if got := strings.TrimSpace(s.must("echo $PPID")); got != "1" {
			t.Errorf("the shell's parent pid in its namespace = %q, want 1 (its init)", got)
		}
		if got := s.must("grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status"); strings.Count(got, "0000000000003000") != 5 {
			t.Errorf("capabilities: want NET_ADMIN+NET_RAW (0x3000) and nothing else in every set:\n%s", got)
		}
		// ... held in the node's user namespace, not the host's.
		hostUserNS, _ := os.Readlink("/proc/self/ns/user")
		if got := strings.TrimSpace(s.must("readlink /proc/self/ns/user")); got == hostUserNS || !strings.HasPrefix(got, "user:[") {
			t.Errorf("the shell's user namespace is %q, the host's %q", got, hostUserNS)
		}
		if got := s.must("cat /proc/self/cgroup"); !strings.Contains(got, "/"+NodeCgroupPath(id, "node1")+"/"+clhost.ShellLeaf+"\n") {
			t.Errorf("shell is not in the node's shell cgroup:\n%s", got)
		}
		if got := strings.TrimSpace(s.must("stty size")); got != "30 100" {
			t.Errorf("stty size = %q, want 30 100", got)
		}
		if err := term.Resize(40, 120); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(s.must("stty size")); got != "40 120" {
			t.Errorf("after Resize, stty size = %q", got)
		}
		if got := strings.TrimSpace(s.must("echo $HOME; pwd; touch ~/notes && ls ~/notes")); got != "/home/learner\n/home/learner\n/home/learner/notes" {
			t.Errorf("home:\n%s", got)
		}
	})

	t.Run("sees only its node", func(t *testing.T) {
		s.t = t
		got := strings.Fields(s.must("ls /sys/class/net"))
		sort.Strings(got)
		if strings.Join(got, " ") != "eth0 lo rdma0" {
			t.Errorf("/sys/class/net = %v, want eth0 lo rdma0", got)
		}
		links := s.must("ip -o link")
		for _, l := range hostLinkNames(t) {
			if l != "lo" && l != "eth0" && strings.Contains(links, " "+l+":") {
				t.Errorf("learner sees host link %s", l)
			}
		}
		for _, mac := range regexp.MustCompile(`link/ether ([0-9a-f:]{17})`).FindAllStringSubmatch(hostLinksBefore, -1) {
			if strings.Contains(links, mac[1]) {
				t.Errorf("learner sees host MAC %s:\n%s", mac[1], links)
			}
		}
		if got := strings.TrimSpace(s.must("ls -A /run/netns; ip netns list")); got != "" {
			t.Errorf("learner sees namespaces: %q", got)
		}
		s.mustFail("nsenter --net=/proc/1/ns/net ip link")
		s.mustFail("ip netns exec " + FabricNetNSName(id) + " ip link")
		// pid 1 is the shell itself: this moves nothing to the host.
		s.run("ip link add cltest0 type veth peer name cltest1 netns 1")
		s.run("ip link set rdma0 netns 1")
		if after := host(t, "ip", "-o", "link"); strings.Contains(after, "cltest") || strings.Contains(after, "rdma0") {
			t.Errorf("learner changed the host's links:\n%s", after)
		}
	})

	t.Run("sees only its own processes and mounts", func(t *testing.T) {
		s.t = t
		// A host process that the learner must not see.
		hostProc := exec.Command("sleep", "300")
		if err := hostProc.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = hostProc.Process.Kill(); _ = hostProc.Wait() }()
		ps := s.must("ps -eo pid=,user=,args=")
		lines := strings.Split(strings.TrimSpace(ps), "\n")
		if len(lines) > 4 {
			t.Errorf("the learner lists %d processes, want init, the shell and ps:\n%s", len(lines), ps)
		}
		if !regexp.MustCompile(`(?m)^\s*1\s+root\s+init\b`).MatchString(ps) {
			t.Errorf("pid 1 is not the learner init:\n%s", ps)
		}
		if strings.Contains(ps, "sleep 300") || strings.Contains(ps, "commlab") {
			t.Errorf("the learner sees host processes:\n%s", ps)
		}
		s.mustFail(fmt.Sprintf("test -e /proc/%d", hostProc.Process.Pid))
		s.mustFail("cat /proc/1/environ")
		mi := s.must("cat /proc/self/mountinfo")
		if strings.Contains(mi, netnsDir+"/") || strings.Contains(mi, "/run/commlab/") {
			t.Errorf("mountinfo names namespaces or commlab's run-time files:\n%s", mi)
		}
	})

	t.Run("has its own IPC namespace", func(t *testing.T) {
		s.t = t
		s.must("ipcmk -M 4096 -p 0600 >/dev/null && ipcs -m | grep -q 4096")
		if out := host(t, "ipcs", "-m"); regexp.MustCompile(`\s` + strconv.Itoa(int(sb.LearnerUID())) + `\s`).MatchString(out) {
			t.Errorf("the learner's shared memory segment is visible on the host:\n%s", out)
		}
	})

	t.Run("cannot reach the host", func(t *testing.T) {
		s.t = t
		for _, addr := range hostIPv4s(t) {
			s.mustFail("ping -c 1 -W 1 " + addr)
		}
	})

	t.Run("cannot read the data dir", func(t *testing.T) {
		s.t = t
		s.mustFail("cat " + filepath.Join(data, "secret"))
		s.mustFail("cat " + statePath(data, id))
		// The data dir is either absent from the learner's view or an empty cover.
		if got, _ := s.run("ls -A " + data); strings.Contains(got, "secret") || strings.Contains(got, stateSubdir) {
			t.Errorf("learner lists the data dir:\n%s", got)
		}
		s.mustFail("ls /run/commlab/labs")
		s.mustFail("touch /etc/commlab-was-here")
		// What the learner writes in world-writable places stays in the sandbox.
		for _, dir := range []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"} {
			f := filepath.Join(dir, "cl-learner-"+id)
			s.must("touch " + f)
			if _, err := os.Stat(f); err == nil {
				os.Remove(f)
				t.Errorf("learner's %s appeared on the host", f)
			}
		}
	})

	t.Run("tc and ping on its own node", func(t *testing.T) {
		s.t = t
		n2, _ := sb.Plan().Node("node2")
		peer, _ := n2.NIC("rdma0")
		s.must("ping -c 1 -W 2 " + peer.Addr.Addr().String())
		s.must("tc qdisc del dev rdma0 root")
		if q := run(t, sb, "node1", "tc", "qdisc", "show", "dev", "rdma0"); strings.Contains(q, "tbf") {
			t.Errorf("tc qdisc del did not remove the tbf:\n%s", q)
		}
		s.must("ip link set rdma0 down && ip link set rdma0 up")
	})

	t.Run("sees its node's cgroup read-only", func(t *testing.T) {
		s.t = t
		s.must("test \"$(cat /sys/fs/cgroup/pids/pids.current 2>/dev/null || cat /sys/fs/cgroup/pids.current)\" -gt 0")
		s.must("! echo 1000000 > /sys/fs/cgroup/pids/pids.max 2>/dev/null")
		s.must("grep -q nr_throttled /sys/fs/cgroup/cpu/cpu.stat 2>/dev/null || grep -q nr_throttled /sys/fs/cgroup/cpu.stat")
	})

	t.Run("diagnostic tools work", func(t *testing.T) {
		s.t = t
		n2, _ := sb.Plan().Node("node2")
		peer, _ := n2.NIC("rdma0")
		for _, line := range []string{
			"ethtool -i rdma0 | grep -q 'driver: veth'",
			"ethtool -S rdma0 | grep -q peer_ifindex",
			"ss -tan state listening",
			"nstat -a | grep -q IpExtInOctets",
			"tc -s qdisc show dev eth0 | grep -q 'qdisc tbf c1:'",
			"ip -s link show rdma0",
			// tcpdump needs CAP_NET_RAW; it sees the ping it waits for.
			// It starts capturing once it prints "listening on"; a loaded host can take a while.
			"(timeout 20 tcpdump -l -c 1 -ni rdma0 icmp > /tmp/cap 2>&1 &) ; for i in $(seq 50); do grep -q 'listening on' /tmp/cap 2>/dev/null && break; sleep 0.2; done; ping -c 5 -i 0.2 " + peer.Addr.Addr().String() + " >/dev/null; ok=1; for i in $(seq 25); do grep -q 'ICMP echo' /tmp/cap && { ok=0; break; }; sleep 0.2; done; [ $ok = 0 ] || { cat /tmp/cap; false; }",
			"iperf3 -v | grep -q iperf",
		} {
			s.must(line)
		}
	})

	t.Run("fork bomb is contained", func(t *testing.T) {
		s.t = t
		fmt.Fprintf(term, ":(){ :|:& };:\n")
		g, err := cgroup.Open(CgroupPath(id))
		if err != nil {
			t.Fatal(err)
		}
		shell, _ := cgroup.Open(NodeCgroupPath(id, "node1") + "/" + clhost.ShellLeaf)
		// The kernel counts refused forks in pids.events ("max N") of the
		// group whose limit was hit or of the forking task's group.
		refused := func() int {
			n := 0
			for _, grp := range []*cgroup.Group{g, shell} {
				ev, _ := grp.Read("pids.events")
				for _, line := range strings.Split(ev, "\n") {
					if f := strings.Fields(line); len(f) == 2 && f[0] == "max" {
						v, _ := strconv.Atoi(f[1])
						n += v
					}
				}
			}
			return n
		}
		for i := 0; i < 200 && refused() == 0; i++ {
			time.Sleep(25 * time.Millisecond)
		}
		cur, _ := g.Read("pids.current")
		maxp, _ := g.Read("pids.max")
		t.Logf("pids.current %s of pids.max %s; %d forks refused", cur, maxp, refused())
		if refused() == 0 {
			t.Errorf("the pids limit never refused a fork")
		}
		if c, _ := strconv.Atoi(cur); c > 96 {
			t.Errorf("pids.current %d exceeds the limit 96", c)
		}
		// The host still forks.
		if out := host(t, "true"); out != "" {
			t.Errorf("host: %q", out)
		}
		term.Close()
		if err := term.Wait(); err == nil {
			t.Log("shell exited cleanly")
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			pids, _ := g.Procs()
			if len(pids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d processes left in the sandbox after closing the shell", len(pids))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := io.ReadAll(term); err != nil {
			t.Errorf("Read after Close: %v", err)
		}
	})
}

// TestLearnerExec checks that a command run as the learner, without a terminal,
// is confined as the learner's shell is.
func TestLearnerExec(t *testing.T) {
	sb := upSandbox(t, "2x1", Options{})
	c, err := sb.LearnerExec(context.Background(), "node1", "/bin/sh", "-c",
		"id -u; echo $PPID; grep ^CapEff /proc/self/status; hostname; ps -e --no-headers | wc -l; pwd") // init, sh, ps, wc
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := fmt.Sprintf("%d\n1\nCapEff:\t0000000000003000\nnode1\n4\n/home/learner\n", sb.LearnerUID())
	if string(out) != want {
		t.Errorf("as the learner:\n%s\nwant:\n%s", out, want)
	}
	c, _ = sb.LearnerExec(context.Background(), "node1", "/bin/sh", "-c", "exit 7")
	var ee *exec.ExitError
	if err := c.Run(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("exit status through the learner init: %v, want 7", err)
	}
}

// TestShellRC checks a shell started with an rc file: it runs, sets the
// prompt, and the learner cannot change it.
func TestShellRC(t *testing.T) {
	sb := upSandbox(t, "2x1", Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term, err := sb.Shell(ctx, "node2", labs.ShellOptions{RC: "PS1='rc@\\h> '\nexport FROM_RC=yes\nreadonly FROM_RC"})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	s := newSession(t, term)
	s.waitFor(regexp.MustCompile(`rc@node2> `), 20*time.Second)
	if got := strings.TrimSpace(s.must("echo $FROM_RC")); got != "yes" {
		t.Errorf("FROM_RC = %q", got)
	}
	if got := strings.TrimSpace(s.must("command -v tc")); got != "/usr/sbin/tc" {
		t.Errorf("tc resolves to %q: the profile's PATH is missing", got)
	}
	rc := strings.TrimSpace(s.must("ls /home/.commlab/node2-*.rc"))
	s.mustFail("echo evil >> " + rc)
	s.mustFail("rm -f " + rc + " && test ! -e " + rc)
}

// TestLearnerFile checks that a workload's file lands in the learner's home,
// owned by the learner, and that a planted symlink is not followed.
func TestLearnerFile(t *testing.T) {
	sb := upSandbox(t, "2x1", Options{})
	f, err := sb.OpenLearnerFile("train.log")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "step 1 busbw 0.19")
	f.Close()
	home := filepath.Join(sandboxRunDir(sb.ID()), "home", "learner")
	fi, err := os.Stat(filepath.Join(home, "train.log"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != sb.LearnerUID() {
		t.Errorf("train.log owned by %d, want %d", st.Uid, sb.LearnerUID())
	}
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(home, "evil.log")); err != nil {
		t.Fatal(err)
	}
	if f, err := sb.OpenLearnerFile("evil.log"); err == nil {
		f.Close()
		t.Error("OpenLearnerFile followed a symlink")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("symlink target changed to %q", b)
	}
	for _, bad := range []string{"", "..", "../x", "a/b"} {
		if f, err := sb.OpenLearnerFile(bad); err == nil {
			f.Close()
			t.Errorf("OpenLearnerFile(%q) succeeded", bad)
		}
	}
}
