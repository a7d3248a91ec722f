package injector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// TTL bounds: every fault has a deadline, and none outlives a long lab day.
const (
	MinTTL = time.Second
	MaxTTL = 7 * 24 * time.Hour
)

// Options configure an Injector. DataDir and Registry are required.
type Options struct {
	// DataDir holds the journal at <DataDir>/injector/journal.
	DataDir string
	// Registry is the set of kinds this injector can apply and revert.
	Registry *Registry
	// Helper is the argv prefix that starts the helper process (the gate of every
	// process a fault starts, nic-flap's driver); empty means this executable
	// with argument "injector-helper", which the package's init intercepts.
	Helper []string
	// Logger receives sweep and watchdog events; nil means slog.Default().
	Logger *slog.Logger
	// Features, if set, replaces Probe (tests that pretend a feature is missing).
	Features *Features
	// AllowHardware lets hardware kinds (pcie-speed) run. Only an operator sets it
	// (--allow-hardware-faults), on a machine nobody else uses.
	AllowHardware bool
}

// Injector applies faults, journals them and reverts them. Several processes
// (the server, the CLI) may share one data directory.
type Injector struct {
	reg      *Registry
	j        *journal
	helper   []string
	log      *slog.Logger
	features *Features
	allowHW  bool
	// resolve checks a target against the host (Target.resolve); the engine's
	// tests replace it to run journal, conflict and revert logic without root.
	resolve func(Target) (Target, error)
}

// Open prepares an injector on opts.DataDir. It does not sweep: the serving process
// calls Sweep at start-up, the CLI does not.
func Open(opts Options) (*Injector, error) {
	if opts.DataDir == "" || opts.Registry == nil {
		return nil, errors.New("open injector: DataDir and Registry are required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	j, err := openJournal(filepath.Join(opts.DataDir, "injector"), log)
	if err != nil {
		return nil, fmt.Errorf("open injector: %w", err)
	}
	helper := opts.Helper
	if len(helper) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("open injector: find own executable for the helper: %w", err)
		}
		helper = []string{exe, helperArg}
	}
	return &Injector{reg: opts.Registry, j: j, helper: helper, log: log, features: opts.Features, allowHW: opts.AllowHardware,
		resolve: Target.resolve}, nil
}

// Registry returns the injector's kinds.
func (in *Injector) Registry() *Registry { return in.reg }

// Features returns what this host supports (probed once per process).
func (in *Injector) Features(ctx context.Context) Features {
	if in.features != nil {
		return *in.features
	}
	return Probe(ctx)
}

// Supports reports whether this host can apply faults of kind: nil, or an
// ErrUnsupported error saying what is missing (e.g. "this kernel has no
// sch_netem"), so a lab can refuse to start instead of failing halfway.
// ChangesLogin reports whether kind changes what a login shell starts with, so a
// learner's shell must open after it is applied (an unknown kind: false).
func (in *Injector) ChangesLogin(kind string) bool {
	k, err := in.reg.Kind(kind)
	return err == nil && k.Login
}

// Supports says, without applying anything, whether this host can apply kind.
func (in *Injector) Supports(ctx context.Context, kind string) error {
	k, err := in.reg.Kind(kind)
	if err != nil {
		return err
	}
	if k.Hardware && !in.allowHW {
		return fmt.Errorf("%w: %s changes real hardware; an operator can allow it with --allow-hardware-faults, never on a machine others use", ErrHardwareOff, kind)
	}
	if len(k.Needs) == 0 {
		return nil
	}
	feats := in.Features(ctx)
	for _, need := range k.Needs {
		if err := feats.Has(need); err != nil {
			return fmt.Errorf("%s: %w", kind, err)
		}
	}
	return nil
}

// Apply validates f, journals it and applies it to t; the fault is reverted by
// its deadline (now + ttl) at the latest. Bad input returns an ErrInvalid error
// with nothing applied and nothing journaled.
func (in *Injector) Apply(ctx context.Context, t Target, f Fault, ttl time.Duration) (Entry, error) {
	if f == nil {
		return Entry{}, invalid("no fault given")
	}
	kind, err := in.reg.Kind(f.Kind())
	if err != nil {
		return Entry{}, err
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return Entry{}, invalid("ttl %s: want between %s and %s", ttl, MinTTL, MaxTTL)
	}
	if err := f.Validate(); err != nil {
		return Entry{}, fmt.Errorf("%s: %w", kind.Name, err)
	}
	t, err = in.resolve(t)
	if err != nil {
		return Entry{}, err
	}
	if err := in.Supports(ctx, kind.Name); err != nil {
		return Entry{}, fmt.Errorf("%w (on %s)", err, t)
	}
	if nu, ok := f.(nicUser); ok {
		if err := checkNICs(t, nu.nics()); err != nil {
			return Entry{}, fmt.Errorf("%s: %w", kind.Name, err)
		}
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return Entry{}, fmt.Errorf("encode %s: %w", kind.Name, err)
	}
	now := time.Now().UTC()
	e := Entry{
		ID: newID(), Kind: kind.Name, Params: FormatParams(f), Fault: raw, Target: t,
		Created: now, Deadline: now.Add(ttl), BootID: bootID(),
		PID: os.Getpid(), PIDStart: procStart(os.Getpid()), Command: f.Command(t),
	}
	var claims []string
	if c, ok := f.(claimer); ok {
		claims = c.claims()
	}
	// Refuse a conflict before the kind looks at the host (it would report what
	// it finds there less clearly); Record checks again under the same lock.
	if err := in.j.locked(func() error {
		live, _, _, err := in.j.load()
		if err != nil {
			return err
		}
		return in.conflict(live, e, f, claims)
	}); err != nil {
		return Entry{}, fmt.Errorf("apply %s on %s: %w", kind.Name, t, err)
	}
	var last Undo
	journaled := false
	op := &Op{ID: e.ID, Deadline: e.Deadline, Helper: in.helper, Record: func(u Undo) error {
		ub, err := json.Marshal(u)
		if err != nil {
			return fmt.Errorf("encode undo: %w", err)
		}
		err = in.j.locked(func() error {
			if journaled {
				return in.j.append(record{Op: recUndo, ID: e.ID, Undo: ub})
			}
			live, _, _, err := in.j.load()
			if err != nil {
				return err
			}
			if err := in.conflict(live, e, f, claims); err != nil {
				return err
			}
			e.Undo = ub
			return in.j.append(record{Op: recApply, ID: e.ID, Entry: &e})
		})
		if err == nil {
			journaled, last = true, u
		}
		return err
	}}
	undo, err := f.Apply(ctx, t, op)
	if err != nil {
		if !journaled {
			return Entry{}, fmt.Errorf("apply %s on %s: %w", kind.Name, t, err)
		}
		// Undo the partial apply; on failure the entry stays for the sweep.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if rerr := in.revertEntry(rctx, e.ID, kind, last); rerr != nil {
			return Entry{}, fmt.Errorf("apply %s on %s: %w (and reverting the partial apply failed: %v; it stays journaled for the sweep)", kind.Name, t, err, rerr)
		}
		return Entry{}, fmt.Errorf("apply %s on %s: %w", kind.Name, t, err)
	}
	if !journaled {
		return Entry{}, fmt.Errorf("apply %s on %s: the kind did not journal an undo (bug)", kind.Name, t)
	}
	if err := in.j.locked(func() error { return in.j.appendNoSync(record{Op: recApplied, ID: e.ID}) }); err != nil {
		return Entry{}, fmt.Errorf("apply %s on %s: %w", kind.Name, t, err)
	}
	e.Applied = true
	if undo != nil {
		e.Undo, _ = json.Marshal(undo)
	}
	return e, nil
}

// conflict refuses a fault whose claims overlap an active fault on the same node.
func (in *Injector) conflict(live map[string]*Entry, e Entry, f Fault, claims []string) error {
	if len(claims) == 0 {
		return nil
	}
	for _, other := range live {
		if other.Target.netnsName() != e.Target.netnsName() || other.Target.NetNSInode != e.Target.NetNSInode {
			continue
		}
		of, err := in.reg.decode(other.Kind, other.Fault)
		if err != nil {
			continue
		}
		oc, ok := of.(claimer)
		if !ok {
			continue
		}
		for _, c := range oc.claims() {
			if slices.Contains(claims, c) {
				return fmt.Errorf("%w: %s already holds %s on %s (revert %s first)", ErrConflict, other.ID, c, e.Target, other.ID)
			}
		}
	}
	return nil
}

// Revert reverts the fault id and removes it from the journal.
func (in *Injector) Revert(ctx context.Context, id string) error {
	if err := ValidFaultID(id); err != nil {
		return err
	}
	var e *Entry
	if err := in.j.locked(func() error {
		live, _, _, err := in.j.load()
		e = live[id]
		return err
	}); err != nil {
		return err
	}
	if e == nil {
		return fmt.Errorf("revert %s: %w: no active fault with this id (see commlab faults)", id, ErrNotFound)
	}
	return in.revert(ctx, *e)
}

func (in *Injector) revert(ctx context.Context, e Entry) error {
	kind, err := in.reg.Kind(e.Kind)
	if err != nil {
		return fmt.Errorf("revert %s: %w", e.ID, err)
	}
	u := kind.NewUndo()
	if len(e.Undo) > 0 {
		if err := json.Unmarshal(e.Undo, u); err != nil {
			return fmt.Errorf("revert %s: decode undo: %w", e.ID, err)
		}
	}
	return in.revertEntry(ctx, e.ID, kind, u)
}

func (in *Injector) revertEntry(ctx context.Context, id string, kind Kind, u Undo) error {
	if u != nil {
		if err := u.Revert(ctx); err != nil {
			return fmt.Errorf("revert %s %s: %w", kind.Name, id, err)
		}
	}
	return in.j.locked(func() error {
		if err := in.j.appendNoSync(record{Op: recReverted, ID: id}); err != nil {
			return err
		}
		live, order, dead, err := in.j.load()
		if err != nil || dead < compactAfter {
			return err
		}
		return in.j.compact(live, order)
	})
}

// ErrFixedDeadline is returned for renewing a fault whose kind cannot be renewed.
var ErrFixedDeadline = errors.New("its helper process stops at the deadline it was started with")

// Renew moves the deadline of fault id to now+ttl, earlier or later. The new
// deadline holds once its record is journaled (fsynced) and the old one until
// then, so a process killed mid-renew leaves the fault reverted by one of the two
// (by the watchdog of any process sharing the journal), never kept.
func (in *Injector) Renew(id string, ttl time.Duration) (Entry, error) {
	if err := ValidFaultID(id); err != nil {
		return Entry{}, err
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return Entry{}, invalid("ttl %s: want between %s and %s", ttl, MinTTL, MaxTTL)
	}
	var out Entry
	err := in.j.locked(func() error {
		live, _, _, err := in.j.load()
		if err != nil {
			return err
		}
		e := live[id]
		if e == nil {
			return fmt.Errorf("renew %s: %w: no active fault with this id (see commlab faults)", id, ErrNotFound)
		}
		if k, err := in.reg.Kind(e.Kind); err != nil {
			return fmt.Errorf("renew %s: %w", id, err)
		} else if k.FixedDeadline {
			return fmt.Errorf("renew %s: %s: %w", id, e.Kind, ErrFixedDeadline)
		}
		now := time.Now().UTC()
		if e.Expired(now) {
			// The watchdog may be reverting it now.
			return fmt.Errorf("renew %s: %w: its deadline %s has passed", id, ErrNotFound, e.Deadline.Format(time.RFC3339))
		}
		deadline := now.Add(ttl)
		if err := in.j.append(record{Op: recRenewed, ID: id, Deadline: deadline}); err != nil {
			return err
		}
		out = *e
		out.Deadline = deadline
		return nil
	})
	return out, err
}

// List returns the journaled faults, oldest first.
func (in *Injector) List() ([]Entry, error) { return in.j.entries() }

// Sweep reverts every journaled fault (start-up, commlab sweep). It goes on past
// failures and returns the ids it reverted and the errors joined.
func (in *Injector) Sweep(ctx context.Context) ([]string, error) {
	removeStaleProbes()
	return in.sweep(ctx, func(Entry) bool { return true })
}

// RevertExpired reverts the journaled faults whose deadline has passed.
func (in *Injector) RevertExpired(ctx context.Context) ([]string, error) {
	now := time.Now()
	return in.sweep(ctx, func(e Entry) bool { return e.Expired(now) })
}

func (in *Injector) sweep(ctx context.Context, match func(Entry) bool) ([]string, error) {
	entries, err := in.List()
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, e := range entries {
		if !match(e) {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := in.revert(ctx, e); err != nil {
			in.log.Error("injector: revert failed", "id", e.ID, "kind", e.Kind, "target", e.Target.String(), "err", err)
			errs = append(errs, err)
			continue
		}
		in.log.Info("injector: reverted", "id", e.ID, "kind", e.Kind, "target", e.Target.String())
		done = append(done, e.ID)
	}
	return done, errors.Join(errs...)
}

// Watch is the deadline watchdog: every interval it reverts the expired faults
// of any process sharing the journal, until ctx ends.
func (in *Injector) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if _, err := in.RevertExpired(ctx); err != nil && ctx.Err() == nil {
				in.log.Warn("injector: watchdog", "err", err)
			}
		}
	}
}

func newID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return "f" + hex.EncodeToString(b[:])
}
