//go:build linux

package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// A learner's processes run in a PID namespace of their own. A procfs shows the PID
// namespace of the process that mounts it, so only a process inside the new namespace
// can mount the /proc they should see. With the host's /proc a learner lists every
// host process (other labs' shells, the injector's helpers and their arguments), and
// CUDA refuses to start (cudaGetDeviceCount: error 304, "OS call failed or operation
// not supported on this OS"), since /proc/self names no process of the caller's
// namespace. So a learner's program starts through learnerInit, this same binary
// re-executed as PID 1 of the new namespaces: it mounts /proc (and /dev/mqueue for
// the new IPC namespace), starts the program confined (learnerEntry) and stays as
// its init (reaping orphans) until the program exits.
//
// The program's capabilities must count in its node only, so it runs in the user
// namespace that owns the node's network namespace (hostns.CreateConfined), which
// the init gets as its file 3. The init stays in the host's user namespace (its
// mounts need that), and a multi-threaded Go process cannot enter a user namespace,
// so the program is started through two single-threaded util-linux tools: nsenter
// enters the user namespace (which grants every capability there, and a full bounding
// set), then setpriv drops to the learner's uid with learnerCaps only (ambient, and
// the whole bounding set), no supplementary groups and no_new_privs, and execs the
// program. With uids mapped to themselves in that namespace, any other capability
// left there would apply to the host's files: nothing but learnerCaps is kept.

// learnerInitEnv marks a re-exec of this binary as a learner init; its value is the
// JSON learnerInitSpec. The variable is not passed on to the learner's program.
const learnerInitEnv = "COMMLAB_LEARNER_INIT"

// learnerInitArgv0 is what a learner's `ps` shows for PID 1.
const learnerInitArgv0 = "init"

// learnerInitSpec is what learnerInit needs beyond the command line.
type learnerInitSpec struct {
	UID     uint32 `json:"uid"`
	Dir     string `json:"dir"`
	Setctty bool   `json:"setctty"` // stdin is a terminal that becomes the program's controlling tty
}

func init() {
	if spec, ok := os.LookupEnv(learnerInitEnv); ok {
		os.Exit(learnerInit(spec, os.Args[1:]))
	}
}

// learnerInit runs as root and PID 1 of a fresh PID and IPC namespace, in the
// learner's private mount namespace. It returns the program's exit status.
func learnerInit(specJSON string, argv []string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "commlab: learner init: %v\n", err)
		return 127
	}
	var spec learnerInitSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fail(fmt.Errorf("spec: %w", err))
	}
	if len(argv) == 0 {
		return fail(errors.New("no program to run"))
	}
	if err := namespaceMounts(); err != nil {
		return fail(err)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if len(kv) < len(learnerInitEnv)+1 || kv[:len(learnerInitEnv)+1] != learnerInitEnv+"=" {
			env = append(env, kv)
		}
	}
	// The user namespace is named to nsenter as this process's file, which the
	// program must not inherit.
	unix.CloseOnExec(learnerUserNSFile)
	entry, err := learnerEntry(spec.UID, argv)
	if err != nil {
		return fail(err)
	}
	c := exec.Command(entry[0], entry[1:]...)
	c.Env, c.Dir = env, spec.Dir
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: spec.Setctty, Ctty: 0}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGHUP, unix.SIGINT)
	if err := c.Start(); err != nil {
		return fail(err)
	}
	go func() {
		for s := range sigs {
			_ = c.Process.Signal(s)
		}
	}()
	return reapUntil(c.Process.Pid)
}

// learnerUserNSFile is the init's file that holds the node's user namespace (spawn
// passes it as the first of the extra files).
const learnerUserNSFile = 3

// learnerCaps are the capabilities a learner's program keeps, in setpriv's form:
// enough for ip, tc, nft, ping and tcpdump in its own node.
const learnerCaps = "net_admin,net_raw"

// learnerEntry is the command line that starts argv, from the learner init (PID 1),
// in the node's user namespace as uid with learnerCaps only.
func learnerEntry(uid uint32, argv []string) ([]string, error) {
	var tools [2]string
	for i, name := range []string{"nsenter", "setpriv"} {
		p, err := systemTool(name)
		if err != nil {
			return nil, fmt.Errorf("%s (util-linux) is needed to start a learner's program: %w", name, err)
		}
		tools[i] = p
	}
	id := strconv.FormatUint(uint64(uid), 10)
	caps := "-all,+" + strings.ReplaceAll(learnerCaps, ",", ",+")
	return append([]string{
		tools[0], fmt.Sprintf("--user=/proc/1/fd/%d", learnerUserNSFile), "--preserve-credentials", "--",
		tools[1], "--reuid=" + id, "--regid=" + id, "--clear-groups",
		"--bounding-set=" + caps, "--inh-caps=" + caps, "--ambient-caps=" + caps, "--no-new-privs", "--",
	}, argv...), nil
}

// systemTool finds the program name, which runs as root, in the node's system
// directories (nodePath), whatever PATH the learner's program is given.
func systemTool(name string) (string, error) {
	for _, dir := range filepath.SplitList(strings.TrimPrefix(nodePath, "PATH=")) {
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %s", strings.TrimPrefix(nodePath, "PATH="))
}

// namespaceMounts mounts the procfs of this PID namespace over /proc and, where the
// host has /dev/mqueue, the POSIX message queues of this IPC namespace over it.
func namespaceMounts() error {
	const flags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("proc", "/proc", "proc", flags, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if isDir("/dev/mqueue") {
		if err := unix.Mount("mqueue", "/dev/mqueue", "mqueue", flags, ""); err != nil {
			return fmt.Errorf("mount /dev/mqueue: %w", err)
		}
	}
	return nil
}

// reapUntil waits for every child (orphans are re-parented to PID 1) until pid
// exits, and returns pid's exit status as a shell would (128+signal if killed).
// When init returns, the kernel ends whatever is left in the namespace.
func reapUntil(pid int) int {
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 127
		}
		if got != pid {
			continue
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}
