package exam

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/commlab/commlab/scenarios"
)

// SeedLen is the length of an attempt's seed.
const SeedLen = 32

// NewSeed returns a fresh attempt seed: random, kept on the server, so no
// candidate can predict (or share) the variants of another's attempt.
func NewSeed() []byte {
	b := make([]byte, SeedLen)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return b
}

func derive(seed []byte, what string) uint64 {
	h := sha256.New()
	h.Write([]byte("commlab-exam\x00"))
	h.Write(seed)
	h.Write([]byte("\x00" + what))
	return binary.LittleEndian.Uint64(h.Sum(nil)[:8])
}

// Task is one task of an attempt: a live lab (Scenario with its variant
// Seed) or a section of theory questions.
type Task struct {
	Index     int
	Section   string
	Scenario  string   // lab tasks
	Seed      uint64   // the variant of the lab; never sent to the browser
	Questions []string // theory tasks: "chapter/qid"
}

// Lab reports whether t is a live lab.
func (t Task) Lab() bool { return t.Scenario != "" }

// Variant draws the lab's variant.
func (t Task) Variant(cat *scenarios.Catalog) (*scenarios.Variant, error) {
	s, ok := cat.Get(t.Scenario)
	if !ok {
		return nil, fmt.Errorf("task %d: no scenario %s", t.Index, t.Scenario)
	}
	return s.Draw(t.Seed), nil
}

// Tasks draws the attempt's tasks from its seed: the same seed always gives
// the same tasks, so they need not be stored and survive restarts.
func (s *Set) Tasks(e *Exam, seed []byte) []Task {
	rng := mrand.New(mrand.NewPCG(derive(seed, "draw"), derive(seed, e.ID)))
	var tasks []Task
	for _, sec := range e.Sections {
		for _, p := range sec.Draw {
			cands, _ := p.candidates(s.cat, s.crs)
			rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
			for _, id := range cands[:min(p.Count, len(cands))] {
				tasks = append(tasks, Task{Section: sec.ID, Scenario: id, Seed: derive(seed, "variant\x00"+id)})
			}
		}
		if len(sec.Questions) > 0 {
			tasks = append(tasks, Task{Section: sec.ID, Questions: sec.Questions})
		}
	}
	for i := range tasks {
		tasks[i].Index = i
	}
	return tasks
}

// TaskScore is a graded task: the grader's (or quiz's) score and how many
// hints were opened.
type TaskScore struct {
	Score float64
	Hints int
}

// Score weighs the task scores: each section counts its weight times the mean
// of its tasks, a task not graded counts 0, and every hint opened costs
// Hints.Cost of its task's score.
func (e *Exam) Score(tasks []Task, scores map[int]TaskScore) float64 {
	total := 0.0
	for _, sec := range e.Sections {
		sum, n := 0.0, 0
		for _, t := range tasks {
			if t.Section != sec.ID {
				continue
			}
			n++
			ts := scores[t.Index]
			sum += max(0, ts.Score*(1-float64(ts.Hints)*e.Hints.Cost))
		}
		if n > 0 {
			total += sec.Weight * sum / float64(n)
		}
	}
	return min(1, max(0, total))
}

// Passed reports whether score passes.
func (e *Exam) Passed(score float64) bool { return score >= e.Pass-1e-9 }

// Why a candidate may not start an attempt now.
var (
	ErrNoAttemptsLeft = errors.New("no attempts left")
	ErrCoolingDown    = errors.New("cool-down since the last attempt has not passed")
)

// MayStart says whether a candidate whose earlier (not voided) attempts ended
// at ended may start another at now.
func (e *Exam) MayStart(ended []time.Time, now time.Time) error {
	if len(ended) >= e.Attempts {
		return fmt.Errorf("%w (%d of %d used)", ErrNoAttemptsLeft, len(ended), e.Attempts)
	}
	var last time.Time
	for _, t := range ended {
		if t.After(last) {
			last = t
		}
	}
	if next := last.Add(e.Cooldown); !last.IsZero() && now.Before(next) {
		return fmt.Errorf("%w: next attempt from %s", ErrCoolingDown, next.UTC().Format(time.RFC3339))
	}
	return nil
}
