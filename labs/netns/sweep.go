//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/commlab/commlab/labs/cgroup"
)

// Sweep removes every sandbox on this host whose owner process is gone or
// whose TTL has passed, and every commlab object no sandbox records at all
// (once older than DefaultUnrecordedGrace):
// namespaces cl-<id>-*, host links cl-<id>-* and host nftables tables cl-<id>
// (never created, removed in case), cgroups commlab/<id>, run-time directories,
// state files under dataDir and slot leases. Sandboxes of live owners (found
// through dataDir or through the host-wide slot leases, whatever their data
// directory) are left alone. It returns the ids it removed.
//
// Run it at start-up and from `commlab sweep`; it is safe to run at any time.
func Sweep(ctx context.Context, dataDir string) ([]string, error) {
	return SweepWith(ctx, dataDir, SweepOptions{})
}

// SweepWith is Sweep with options.
func SweepWith(ctx context.Context, dataDir string, opts SweepOptions) ([]string, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	grace := opts.UnrecordedGrace
	if grace == 0 {
		grace = DefaultUnrecordedGrace
	}
	match := opts.Match
	if match == nil {
		match = func(string) bool { return true }
	}
	now := time.Now()
	var errs []error

	// Everything commlab may have left, by sandbox id.
	ids := map[string]bool{}
	add := func(id string) {
		if match(id) {
			ids[id] = true
		}
	}
	if ents, err := os.ReadDir(netnsDir); err == nil {
		for _, e := range ents {
			if id, ok := idFromObject(e.Name()); ok {
				add(id)
			}
		}
	}
	if ents, err := os.ReadDir(runDir); err == nil {
		for _, e := range ents {
			if id, ok := idFromObject(e.Name()); ok && e.IsDir() {
				add(id)
			}
		}
	}
	if names, err := cgroup.Children(cgroup.Root); err == nil {
		for _, n := range names {
			if ValidID(n) == nil {
				add(n)
			}
		}
	} else {
		errs = append(errs, err)
	}
	hostLinks := hostLinksByID()
	for id := range hostLinks {
		add(id)
	}
	hostTables := hostTablesByID()
	for id := range hostTables {
		add(id)
	}
	states := map[string]*State{}
	if list, err := ListStates(dataDir); err == nil {
		for _, st := range list {
			states[st.ID] = st
			add(st.ID)
		}
	} else {
		errs = append(errs, err)
	}
	leases := readSlots()
	leaseOf := map[string]lease{}
	for _, l := range leases {
		if l.ID != "" {
			leaseOf[l.ID] = l
			add(l.ID)
		}
	}

	var removed []string
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		st := states[id]
		l, hasLease := leaseOf[id]
		switch {
		case st != nil && live(st.Owner, st.Expires, now):
			continue
		case st == nil && hasLease && live(l.Owner, l.Expires, now):
			continue
		}
		if st == nil && !hasLease && grace > 0 && now.Sub(youngest(id)) < grace {
			continue
		}
		why := "no owner recorded"
		switch {
		case st != nil && !st.Owner.Alive(), st == nil && hasLease && !l.Owner.Alive():
			why = "owner process gone"
		case st != nil || hasLease:
			why = "TTL expired"
		}
		if st == nil && hasLease && l.State != "" {
			// Recorded under another data directory.
			if other, err := readStateFile(l.State); err == nil && other.ID == id {
				st = other
			}
		}
		if err := removeHostObjects(id, hostLinks[id], hostTables[id]); err != nil {
			errs = append(errs, err)
		}
		if err := destroy(ctx, log, id, st); err != nil {
			errs = append(errs, fmt.Errorf("sweep sandbox %s: %w", id, err))
			continue
		}
		// destroy released what st recorded; also drop what only the lease or
		// this data directory knew.
		if err := os.Remove(statePath(dataDir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		for i, l := range leases {
			if l.ID == id {
				releaseSlot(i, id)
			}
		}
		removed = append(removed, id)
		log.Info("swept sandbox", "sandbox", id, "why", why)
	}
	// Leases torn by a crash between create and write carry no id; free them
	// once they are clearly not being written right now.
	if opts.Match == nil {
		for i, l := range leases {
			if l.ID == "" {
				if fi, err := os.Stat(slotPath(i)); err == nil && now.Sub(fi.ModTime()) > 10*time.Second {
					_ = os.Remove(slotPath(i))
				}
			}
		}
	}
	return removed, errors.Join(errs...)
}

// youngest returns the newest modification time among sandbox id's
// namespace files, cgroup directories and run-time directory.
func youngest(id string) time.Time {
	var t time.Time
	paths := []string{sandboxRunDir(id)}
	if names, err := namespacesOf(id); err == nil {
		for _, n := range names {
			paths = append(paths, filepath.Join(netnsDir, n))
		}
	}
	if g, err := cgroup.Open(CgroupPath(id)); err == nil {
		paths = append(paths, g.Dirs()...)
	}
	for _, p := range paths {
		if fi, err := os.Lstat(p); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
	}
	return t
}

// hostLinksByID finds links in the host namespace named cl-<id>-...; the
// backend never creates any (every link lives in a sandbox namespace), so any
// found are leftovers of something older.
func hostLinksByID() map[string][]netlink.Link {
	out := map[string][]netlink.Link{}
	links, err := netlink.LinkList()
	if err != nil {
		return out
	}
	for _, l := range links {
		name := l.Attrs().Name
		if !strings.HasPrefix(name, Prefix) || strings.Count(name, "-") < 2 {
			continue
		}
		if id, ok := idFromObject(name); ok {
			out[id] = append(out[id], l)
		}
	}
	return out
}

// hostTablesByID finds nftables tables named cl-<id> in the host namespace
// (never created there; the sandbox's table lives in its fabric namespace).
func hostTablesByID() map[string][]*nftables.Table {
	out := map[string][]*nftables.Table{}
	c, err := nftables.New()
	if err != nil {
		return out
	}
	tables, err := c.ListTables()
	if err != nil {
		return out
	}
	for _, t := range tables {
		if id, ok := idFromObject(t.Name); ok && t.Name == NFTable(id) {
			out[id] = append(out[id], t)
		}
	}
	return out
}

func removeHostObjects(id string, links []netlink.Link, tables []*nftables.Table) error {
	var errs []error
	for _, l := range links {
		if err := netlink.LinkDel(l); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete host link %s: %w", l.Attrs().Name, err))
		}
	}
	if len(tables) > 0 {
		c, err := nftables.New()
		if err != nil {
			return errors.Join(append(errs, err)...)
		}
		for _, t := range tables {
			c.DelTable(t)
		}
		if err := c.Flush(); err != nil {
			errs = append(errs, fmt.Errorf("delete host nftables table %s: %w", NFTable(id), err))
		}
	}
	return errors.Join(errs...)
}
