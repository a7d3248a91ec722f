package session

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/commlab/commlab/scenarios"
)

// ErrBusy is returned when a learner already has a running lab.
var ErrBusy = errors.New("you already have a lab running: finish or stop it first")

// Manager keeps the labs of every learner: at most PerLearner running at once each,
// and forgets a lab Retain after it ended (its result stays readable that long).
type Manager struct {
	cfg        Config
	ctx        context.Context
	PerLearner int
	Retain     time.Duration

	mu   sync.Mutex
	labs map[string]*Lab
}

// NewManager makes a manager whose labs live at most as long as ctx.
func NewManager(ctx context.Context, cfg Config) *Manager {
	return &Manager{cfg: cfg, ctx: ctx, PerLearner: 1, Retain: time.Hour, labs: map[string]*Lab{}}
}

// Check says whether this host can run a scenario, or why not: its environment, and
// every fault kind it injects. Nothing is built, so a host lacking a feature refuses
// before any sandbox exists.
func (m *Manager) Check(s *scenarios.Scenario) error {
	if err := m.cfg.Provider.Check(s.Environment); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(m.ctx, 30*time.Second)
	defer cancel()
	for _, f := range s.Faults {
		if err := m.cfg.Faults.Supports(ctx, f.Kind); err != nil {
			return err
		}
	}
	return nil
}

// Start starts a lab for a learner, unless they have too many running or this host
// cannot run its environment.
func (m *Manager) Start(learner int64, v *scenarios.Variant) (*Lab, error) {
	return m.StartTTL(learner, v, 0)
}

// StartTTL is Start with a lab TTL of its own (a workshop's); 0 keeps the manager's.
func (m *Manager) StartTTL(learner int64, v *scenarios.Variant, ttl time.Duration) (*Lab, error) {
	return m.StartAs(NewID(), learner, v, ttl)
}

// StartAs is StartTTL for a lab whose id the caller chose (NewID), e.g. to
// claim it elsewhere before it exists.
func (m *Manager) StartAs(id string, learner int64, v *scenarios.Variant, ttl time.Duration) (*Lab, error) {
	if err := m.Check(v.Scenario); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	running := 0
	for _, l := range m.labs {
		if l.Learner == learner && l.Running() {
			running++
		}
	}
	if running >= m.PerLearner {
		return nil, ErrBusy
	}
	cfg := m.cfg
	if ttl > 0 {
		cfg.TTL = ttl
	}
	if _, ok := m.labs[id]; ok {
		return nil, fmt.Errorf("lab %s: the id is taken", shortID(id))
	}
	l := start(m.ctx, cfg, id, learner, v)
	m.labs[l.ID] = l
	go m.forget(l)
	return l, nil
}

// Get returns a learner's lab by id. A lab of someone else is reported as not found,
// so ids cannot be probed.
func (m *Manager) Get(learner int64, id string) (*Lab, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.labs[id]
	if !ok || l.Learner != learner {
		return nil, fmt.Errorf("lab %s: %w", shortID(id), ErrNoLab)
	}
	return l, nil
}

// ErrNoLab is returned for unknown (or someone else's) lab ids.
var ErrNoLab = errors.New("no such lab")

// Current returns the learner's most recent lab, if any.
func (m *Manager) Current(learner int64) (*Lab, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur *Lab
	for _, l := range m.labs {
		if l.Learner == learner && (cur == nil || l.Started.After(cur.Started)) {
			cur = l
		}
	}
	return cur, cur != nil
}

// All returns every lab the manager knows (the instructor dashboard).
func (m *Manager) All() []*Lab {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Lab, 0, len(m.labs))
	for _, l := range m.labs {
		out = append(out, l)
	}
	return out
}

// Shutdown stops every lab and waits for their teardown.
func (m *Manager) Shutdown() {
	for _, l := range m.All() {
		l.Stop()
	}
	for _, l := range m.All() {
		l.Wait()
	}
}

// forget drops a lab Retain after it ended, so memory stays bounded by the labs
// running and those ended recently.
func (m *Manager) forget(l *Lab) {
	<-l.Ended()
	select {
	case <-time.After(m.Retain):
	case <-m.ctx.Done():
	}
	m.mu.Lock()
	delete(m.labs, l.ID)
	m.mu.Unlock()
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
