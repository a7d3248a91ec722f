//go:build linux

package netns

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
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
// the new IPC namespace), confines itself, starts the program as the learner and
// stays as its init (reaping orphans) until the program exits.

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
	// The child is forked from this thread and inherits its bounding set and
	// no_new_privs; the thread is never given back to the runtime.
	runtime.LockOSThread()
	if err := restrictThread(); err != nil {
		return fail(err)
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Env, c.Dir = env, spec.Dir
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{
		Setsid: true, Setctty: spec.Setctty, Ctty: 0,
		Credential:  &syscall.Credential{Uid: spec.UID, Gid: spec.UID, Groups: []uint32{}},
		AmbientCaps: learnerCaps,
	}
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
