package slurm

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// ErrNoAgent marks a call to a node whose agent is not connected.
var ErrNoAgent = errors.New("the node's agent is not connected")

// Hub is the server's end of the agents' websockets (mount it at /agent). A lab
// is registered before its job is submitted; its agents then connect with the
// lab's token, say which node they are, and answer the server's requests.
type Hub struct {
	Log *slog.Logger

	mu   sync.Mutex
	labs map[string]*hubLab
	up   websocket.Upgrader
}

type hubLab struct {
	token   string
	nodes   []string
	agents  map[string]*agentConn
	changed chan struct{}                   // closed and replaced when an agent comes or goes
	streams map[string]chan *websocket.Conn // awaited stream dials, by id
}

// NewHub makes an empty hub.
func NewHub(log *slog.Logger) *Hub {
	if log == nil {
		log = slog.Default()
	}
	return &Hub{Log: log, labs: map[string]*hubLab{}}
}

// Register admits agents of lab for nodes and returns the token they must show.
func (h *Hub) Register(lab string, nodes []string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.labs[lab]; ok {
		return "", fmt.Errorf("lab %s is already registered", lab)
	}
	tok := hex.EncodeToString(b)
	h.labs[lab] = &hubLab{token: tok, nodes: nodes, agents: map[string]*agentConn{}, changed: make(chan struct{}),
		streams: map[string]chan *websocket.Conn{}}
	return tok, nil
}

// Forget closes lab's agent connections and refuses its token from now on.
func (h *Hub) Forget(lab string) {
	h.mu.Lock()
	l := h.labs[lab]
	delete(h.labs, lab)
	h.mu.Unlock()
	if l != nil {
		for _, c := range l.agents {
			c.close()
		}
	}
}

// Drop closes node's connection, as a network blip would; its agent reconnects.
func (h *Hub) Drop(lab, node string) {
	h.mu.Lock()
	var c *agentConn
	if l := h.labs[lab]; l != nil {
		c = l.agents[node]
	}
	h.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// ServeHTTP upgrades an agent's request: /agent?lab=ID with the lab's token.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lab := r.URL.Query().Get("lab")
	h.mu.Lock()
	l := h.labs[lab]
	h.mu.Unlock()
	got := []byte(r.Header.Get(tokenHeader))
	if l == nil || subtle.ConstantTimeCompare(got, []byte("Bearer "+l.token)) != 1 {
		http.Error(w, "unknown lab or wrong token", http.StatusUnauthorized)
		return
	}
	if id := r.URL.Query().Get("stream"); id != "" {
		h.serveStream(w, r, l, id)
		return
	}
	ws, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered
	}
	ws.SetReadLimit(maxFrame)
	var hello Frame
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != opHello || !slices.Contains(l.nodes, hello.Node) {
		_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "want hello from a node of this lab"))
		ws.Close()
		return
	}
	c := newAgentConn(ws, hello)
	h.mu.Lock()
	if h.labs[lab] != l { // forgotten meanwhile
		h.mu.Unlock()
		c.close()
		return
	}
	old := l.agents[hello.Node]
	l.agents[hello.Node] = c
	l.notify()
	h.mu.Unlock()
	if old != nil {
		old.close()
	}
	h.Log.Info("slurm agent connected", "lab", lab, "node", hello.Node, "host", hello.Host)
	c.readLoop()
	h.mu.Lock()
	if l.agents[hello.Node] == c {
		delete(l.agents, hello.Node)
		l.notify()
	}
	h.mu.Unlock()
	h.Log.Info("slurm agent gone", "lab", lab, "node", hello.Node)
}

// serveStream hands a stream's websocket, dialled by the agent, to the Stream
// call that awaits it.
func (h *Hub) serveStream(w http.ResponseWriter, r *http.Request, l *hubLab, id string) {
	h.mu.Lock()
	ch := l.streams[id]
	h.mu.Unlock()
	if ch == nil {
		http.Error(w, "no such stream", http.StatusNotFound)
		return
	}
	ws, err := h.up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(maxFrame)
	select {
	case ch <- ws:
	default: // dialled twice
		ws.Close()
	}
}

// Stream asks node's agent to start req's process (a shell, a rank) and
// returns the websocket that carries its bytes (see [Conn]).
func (h *Hub) Stream(ctx context.Context, lab, node string, req Frame) (*Conn, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	req.Stream = hex.EncodeToString(b)
	ch := make(chan *websocket.Conn, 1)
	h.mu.Lock()
	l := h.labs[lab]
	if l != nil {
		l.streams[req.Stream] = ch
	}
	h.mu.Unlock()
	if l == nil {
		return nil, fmt.Errorf("lab %s: %w", lab, ErrNoAgent)
	}
	defer func() {
		h.mu.Lock()
		delete(l.streams, req.Stream)
		h.mu.Unlock()
	}()
	rep, err := h.Call(ctx, lab, node, req)
	if err != nil {
		select {
		case ws := <-ch:
			ws.Close()
		default:
		}
		return nil, err
	}
	// The agent replies once its dial is answered; the handler may still be
	// on its way to the channel.
	select {
	case ws := <-ch:
		c := newConn(ws)
		c.pid = rep.Pid
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		return nil, fmt.Errorf("lab %s node %s: the agent started %s but its stream never arrived", lab, node, req.Op)
	}
}

func (l *hubLab) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Connected returns the hello of every connected agent of lab, by node.
func (h *Hub) Connected(lab string) map[string]Frame {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]Frame{}
	if l := h.labs[lab]; l != nil {
		for n, c := range l.agents {
			out[n] = c.hello
		}
	}
	return out
}

// Changed returns a channel closed when an agent of lab connects or goes.
func (h *Hub) Changed(lab string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.labs[lab]; l != nil {
		return l.changed
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// Call sends req to node's agent and waits for its reply. A node whose agent is
// reconnecting is waited for until ctx ends.
func (h *Hub) Call(ctx context.Context, lab, node string, req Frame) (Frame, error) {
	for {
		h.mu.Lock()
		l := h.labs[lab]
		if l == nil {
			h.mu.Unlock()
			return Frame{}, fmt.Errorf("lab %s: %w", lab, ErrNoAgent)
		}
		c, changed := l.agents[node], l.changed
		h.mu.Unlock()
		if c != nil {
			rep, err := c.call(ctx, req)
			if !errors.Is(err, errConnClosed) {
				return rep, err
			}
		}
		select {
		case <-ctx.Done():
			return Frame{}, fmt.Errorf("lab %s node %s: %w (%w)", lab, node, ErrNoAgent, ctx.Err())
		case <-changed:
		}
	}
}

var errConnClosed = errors.New("agent connection closed")

// agentConn is one agent's websocket with its requests in flight.
type agentConn struct {
	ws    *websocket.Conn
	hello Frame

	wmu     sync.Mutex
	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan Frame
	done    chan struct{}
	once    sync.Once
}

func newAgentConn(ws *websocket.Conn, hello Frame) *agentConn {
	return &agentConn{ws: ws, hello: hello, pending: map[uint64]chan Frame{}, done: make(chan struct{})}
}

func (c *agentConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.ws.Close()
	})
}

func (c *agentConn) readLoop() {
	defer c.close()
	for {
		var f Frame
		if err := c.ws.ReadJSON(&f); err != nil {
			return
		}
		if f.Op != opReply {
			continue
		}
		c.mu.Lock()
		ch := c.pending[f.ID]
		delete(c.pending, f.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	}
}

func (c *agentConn) call(ctx context.Context, req Frame) (Frame, error) {
	ch := make(chan Frame, 1)
	c.mu.Lock()
	c.next++
	req.ID = c.next
	c.pending[req.ID] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, req.ID)
		c.mu.Unlock()
	}()
	c.wmu.Lock()
	err := c.ws.WriteJSON(req)
	c.wmu.Unlock()
	if err != nil {
		c.close()
		return Frame{}, errConnClosed
	}
	select {
	case rep := <-ch:
		if rep.Err != "" {
			return rep, errors.New(rep.Err)
		}
		return rep, nil
	case <-c.done:
		return Frame{}, errConnClosed
	case <-ctx.Done():
		return Frame{}, ctx.Err()
	}
}
