package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"github.com/gorilla/websocket"

	"github.com/commlab/commlab/injector"
	"github.com/commlab/commlab/labs"
)

// A stream carries one process's bytes between the server and a node: a
// learner's terminal or a workload's rank. It has a websocket of its own,
// dialled by the agent, so a busy terminal never holds up the node's requests.

// Conn is the server's end of a stream. It is a learner's terminal
// (session.PTY) or a rank's output; Read ends with io.EOF when the process
// has exited (see Exit).
type Conn struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	rbuf []byte
	exit *Frame
	pid  int
	// fd3, if set, gets what a rank writes on its fd 3 (ctlFd3), as Read
	// meets it.
	fd3 io.Writer
}

func newConn(ws *websocket.Conn) *Conn { return &Conn{ws: ws} }

// Read implements io.Reader.
func (c *Conn) Read(p []byte) (int, error) {
	for len(c.rbuf) == 0 {
		if c.exit != nil {
			return 0, io.EOF
		}
		typ, msg, err := c.ws.ReadMessage()
		if err != nil {
			return 0, err
		}
		if typ == websocket.BinaryMessage {
			c.rbuf = msg
			continue
		}
		var f Frame
		if json.Unmarshal(msg, &f) != nil {
			continue
		}
		switch {
		case f.Op == ctlExit:
			c.exit = &f
		case f.Op == ctlFd3 && c.fd3 != nil:
			_, _ = io.WriteString(c.fd3, f.Output)
		}
	}
	n := copy(p, c.rbuf)
	c.rbuf = c.rbuf[n:]
	return n, nil
}

// Write sends input to the process (a terminal's keystrokes).
func (c *Conn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Resize changes the terminal's size.
func (c *Conn) Resize(rows, cols uint16) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteJSON(Frame{Op: ctlResize, Rows: rows, Cols: cols})
}

// Close ends the stream; the agent kills the process.
func (c *Conn) Close() error { return c.ws.Close() }

// Pid is the process's pid on its node.
func (c *Conn) Pid() int { return c.pid }

// Exit is the process's exit status once Read has returned io.EOF; an error
// when it could not run or the stream broke before it ended.
func (c *Conn) Exit() (int, error) {
	switch {
	case c.exit == nil:
		return -1, errors.New("the node's stream ended before its process did")
	case c.exit.Err != "":
		return -1, errors.New(c.exit.Err)
	}
	return c.exit.Exit, nil
}

// LearnerUID is the uid (and gid) of the learner's shells and ranks on a
// node: nobody. A shell keeps CAP_NET_ADMIN and CAP_NET_RAW, held in the user
// namespace that owns the node's network namespace (createNodeNS), so they act
// in that node only, as the local sandbox's learner's do.
const LearnerUID = 65534

// proc is a stream's process on the node.
type proc struct {
	cmd *exec.Cmd
	out io.Reader // the pty, or the read end of stdout+stderr
	in  io.Writer // the pty; nil for a rank
	tty *os.File  // the pty, for resizes
	fd3 *os.File  // a rank's fd 3 (UniqueID), read end
}

// startStream dials the stream req names, starts its process and pumps its
// bytes until either end goes. It returns the process's pid.
func (a *Agent) startStream(ctx context.Context, req Frame) (int, error) {
	var p *proc
	var err error
	switch req.Op {
	case opShell:
		p, err = a.shell(req)
	case opRank:
		p, err = a.rank(req)
	}
	if err != nil {
		return 0, err
	}
	ws, err := a.dial(ctx, req.Stream)
	if err != nil {
		p.kill()
		return 0, err
	}
	a.mu.Lock()
	if a.procs == nil {
		a.procs = map[*proc]bool{}
	}
	a.procs[p] = true
	a.mu.Unlock()
	go func() {
		p.pump(ws)
		a.mu.Lock()
		delete(a.procs, p)
		a.mu.Unlock()
	}()
	return p.cmd.Process.Pid, nil
}

// asLearner gives cmd, a command in the node's sandbox, the environment and
// directory the learner's programs start with.
func (a *Agent) asLearner(cmd *exec.Cmd) *exec.Cmd {
	home := a.home()
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" + commlabDir() // commlab bench
	cmd.Env = []string{"HOME=" + home, "USER=learner", "LOGNAME=learner", "PATH=" + path,
		"LANG=C.UTF-8", "TERM=xterm-256color", "COMMLAB_NODE=" + a.Node}
	cmd.Dir = home
	return cmd
}

// commlabDir is the directory of this commlab binary.
func commlabDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "/usr/local/bin"
	}
	return filepath.Dir(exe)
}

// home is the learner's home on this node, in the job's data directory (the
// epilog removes it with the journal).
func (a *Agent) home() string { return learnerHome(a.Job, a.Node) }

// learnerHome is the learner's home on node of job.
func learnerHome(job, node string) string { return filepath.Join(JobDataDir(job), "home", node) }

func (a *Agent) makeHome() error {
	h := a.home()
	if err := os.MkdirAll(h, 0o700); err != nil {
		return err
	}
	// The learner must reach its home through directories root owns.
	for _, d := range []string{DataRoot, JobDataDir(a.Job), filepath.Dir(h)} {
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	return os.Chown(h, LearnerUID, LearnerUID)
}

func (a *Agent) shell(req Frame) (*proc, error) {
	if err := a.makeHome(); err != nil {
		return nil, fmt.Errorf("learner home: %w", err)
	}
	// What the local backend's shells read: /etc/profile (the node's
	// profile.d, inNode), the learner's profile, then the server's rc.
	rc := filepath.Join(a.home(), ".commlab-rc")
	if err := os.WriteFile(rc, []byte(labs.ShellRC(labs.OnPath(commlabDir())+req.RC)), 0o644); err != nil {
		return nil, err
	}
	cmd, userNS, err := a.learnerInit(true, "bash", "--rcfile", rc, "-i")
	if err != nil {
		return nil, fmt.Errorf("start the shell: %w", err)
	}
	defer userNS.Close()
	rows, cols := req.Rows, req.Cols
	if rows == 0 || cols == 0 {
		rows, cols = 24, 80
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close()
	// Programs that reopen their terminal by name (less, ssh) need to own it.
	if err := os.Chown(tty.Name(), LearnerUID, LearnerUID); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("chown %s: %w", tty.Name(), err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("size pty: %w", err)
	}
	// The learner init makes the terminal the shell's controlling terminal.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if err := cmd.Start(); err != nil {
		ptmx.Close()
		return nil, fmt.Errorf("start the shell: %w", err)
	}
	return &proc{cmd: cmd, out: ptmx, in: ptmx, tty: ptmx}, nil
}

// rank starts one rank of the workload (commlab bench rank, which reads its
// part from req.Env) as the learner in the node's namespace, without any
// capability: it acts on no namespace, so it needs no learner init, whose file
// 3 would take the place of the rank's (rank 0's unique id).
func (a *Agent) rank(req Frame) (*proc, error) {
	if err := a.makeHome(); err != nil {
		return nil, fmt.Errorf("learner home: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	uid := strconv.Itoa(LearnerUID)
	cmd := a.asLearner(a.inNode(context.Background(), "setpriv", "--reuid="+uid, "--regid="+uid, "--clear-groups", exe, "bench", "rank"))
	// The job's environment, then what env-force hides on this node, as the
	// local backend's ranks get them.
	forced, err := injector.EnvFor(a.target())
	if err != nil {
		return nil, err
	}
	cmd.Env = append(append(cmd.Env, req.Env...), forced...)
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = w, w
	p := &proc{cmd: cmd, out: r}
	var idw *os.File
	if req.UniqueID {
		if p.fd3, idw, err = os.Pipe(); err != nil {
			r.Close()
			w.Close()
			return nil, err
		}
		cmd.ExtraFiles = []*os.File{idw}
	}
	cmd.SysProcAttr = ownGroup()
	err = cmd.Start()
	w.Close()
	if idw != nil {
		idw.Close()
	}
	if err != nil {
		r.Close()
		if p.fd3 != nil {
			p.fd3.Close()
		}
		return nil, fmt.Errorf("start commlab bench rank: %w", err)
	}
	return p, nil
}

// kill ends the process's group: SIGTERM (bench reaps its ranks), then
// SIGKILL.
func (p *proc) kill() {
	pid := p.cmd.Process.Pid
	_ = killGroup(pid, syscall.SIGTERM)
	go func() {
		time.Sleep(5 * time.Second)
		_ = killGroup(pid, syscall.SIGKILL)
	}()
}

// pump copies the process's output (and a rank's fd 3) to ws and ws's input
// to the process; the exit status is the stream's last message. A closed
// stream kills the process.
func (p *proc) pump(ws *websocket.Conn) {
	defer ws.Close()
	var wmu sync.Mutex // one writer at a time: output, fd 3, the exit
	send := func(typ int, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return ws.WriteMessage(typ, b)
	}
	fd3 := make(chan struct{})
	if p.fd3 == nil {
		close(fd3)
	} else {
		go func() {
			defer close(fd3)
			defer p.fd3.Close()
			buf := make([]byte, 4096)
			for {
				n, err := p.fd3.Read(buf)
				if n > 0 {
					msg, _ := json.Marshal(Frame{Op: ctlFd3, Output: string(buf[:n])})
					if send(websocket.TextMessage, msg) != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
	go func() {
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				p.kill()
				return
			}
			var f Frame
			switch {
			case typ == websocket.BinaryMessage && p.in != nil:
				_, _ = p.in.Write(msg)
			case typ == websocket.TextMessage && p.tty != nil && json.Unmarshal(msg, &f) == nil && f.Op == ctlResize:
				_ = pty.Setsize(p.tty, &pty.Winsize{Rows: f.Rows, Cols: f.Cols})
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := p.out.Read(buf)
		if n > 0 {
			if werr := send(websocket.BinaryMessage, buf[:n]); werr != nil {
				p.kill()
				break
			}
		}
		if err != nil { // EOF, or EIO from a pty whose shell is gone
			break
		}
	}
	if c, ok := p.out.(io.Closer); ok {
		c.Close()
	}
	exit := Frame{Op: ctlExit}
	var ee *exec.ExitError
	switch err := p.cmd.Wait(); {
	case errors.As(err, &ee):
		exit.Exit = ee.ExitCode()
	case err != nil:
		exit.Err = err.Error()
	}
	<-fd3 // the rank has exited: its fd 3 is closed
	msg, _ := json.Marshal(exit)
	_ = send(websocket.TextMessage, msg)
	_ = send(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
}
