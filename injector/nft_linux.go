//go:build linux

package injector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/commlab/commlab/internal/host"
)

// nftTable is the table commlab owns in each node of a sandbox; every fault adds
// its own chains, named after the fault id, and removes only those.
func nftTable(sandbox string, fam nftables.TableFamily) *nftables.Table {
	return &nftables.Table{Name: host.FaultTable(sandbox), Family: fam}
}

// nftChain is one base chain a fault adds.
type nftChain struct {
	name   string
	hook   *nftables.ChainHook
	device string // netdev family only
	rules  [][]expr.Any
	// priority defaults to filter (0).
	priority *nftables.ChainPriority
}

// Rules carry no comment and chains are named by fault id only: the learner
// can list them (`nft list ruleset`), and the kind is the answer, kept in the
// root-only journal.

// nftConns keeps one nftables netlink socket per namespace (by inode; an open
// socket keeps its namespace, so the inode cannot be reused meanwhile). Closing
// such a socket makes nf_tables wait for its pending frees under its commit
// lock, an RCU grace period (~10 ms) that would also stall the next fault in
// that namespace; idle sockets are closed in the background instead.
var nftConns = struct {
	sync.Mutex
	m       map[uint64]*nftCached
	janitor bool
}{m: map[uint64]*nftCached{}}

type nftCached struct {
	c    *nftables.Conn
	last time.Time
}

// nftIdle is how long an unused socket stays open.
const nftIdle = 30 * time.Second

// nftConn returns the nftables connection for t's namespace; release(true)
// drops it (after an error, so the next call starts afresh).
func nftConn(t Target) (c *nftables.Conn, release func(failed bool), err error) {
	ns, err := openNS(t)
	if err != nil {
		return nil, nil, err
	}
	defer ns.Close() // the socket, once open, stays in the namespace
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return nil, nil, fmt.Errorf("stat namespace %s: %w", t.netnsName(), err)
	}
	nftConns.Lock()
	defer nftConns.Unlock()
	cc, ok := nftConns.m[st.Ino]
	if !ok {
		conn, err := nftables.New(nftables.WithNetNSFd(int(ns)), nftables.AsLasting())
		if err != nil {
			return nil, nil, fmt.Errorf("nftables in %s: %w", t.netnsName(), err)
		}
		cc = &nftCached{c: conn}
		nftConns.m[st.Ino] = cc
		if !nftConns.janitor {
			nftConns.janitor = true
			go nftJanitor()
		}
	}
	cc.last = time.Now()
	return cc.c, func(failed bool) {
		if !failed {
			return
		}
		nftConns.Lock()
		defer nftConns.Unlock()
		if nftConns.m[st.Ino] == cc {
			delete(nftConns.m, st.Ino)
			go cc.c.CloseLasting()
		}
	}, nil
}

// nftJanitor closes sockets unused for nftIdle; it runs for the life of the process.
func nftJanitor() {
	for range time.Tick(nftIdle / 3) {
		nftConns.Lock()
		for ino, cc := range nftConns.m {
			if time.Since(cc.last) > nftIdle {
				delete(nftConns.m, ino)
				go cc.c.CloseLasting()
			}
		}
		nftConns.Unlock()
	}
}

// nftAdd adds chains to the sandbox's table of family fam in t's namespace, in one
// transaction (either all of them exist afterwards or none), and reads them back.
func nftAdd(t Target, fam nftables.TableFamily, chains []nftChain) error {
	return withHostLock("nft", func() error {
		c, release, err := nftConn(t)
		if err != nil {
			return err
		}
		failed := true
		defer func() { release(failed) }()
		tab := queueAdd(c, t.Sandbox, fam, chains)
		if err := c.Flush(); err != nil {
			return fmt.Errorf("add nftables chains to table %s in %s: %w", tab.Name, t.netnsName(), err)
		}
		have, err := c.ListChainsOfTableFamily(fam)
		if err != nil {
			return fmt.Errorf("read back nftables chains in %s: %w", t.netnsName(), err)
		}
		for _, ch := range chains {
			if !slices.ContainsFunc(have, func(h *nftables.Chain) bool { return h.Table.Name == tab.Name && h.Name == ch.name }) {
				return fmt.Errorf("read back: chain %s missing from table %s in %s", ch.name, tab.Name, t.netnsName())
			}
		}
		failed = false
		return nil
	})
}

// queueAdd queues, on c, the sandbox's fault table of family fam (added if
// missing) and chains with their rules.
func queueAdd(c *nftables.Conn, sandbox string, fam nftables.TableFamily, chains []nftChain) *nftables.Table {
	tab := c.AddTable(nftTable(sandbox, fam))
	for _, ch := range chains {
		policy := nftables.ChainPolicyAccept
		prio := ch.priority
		if prio == nil {
			prio = nftables.ChainPriorityFilter
		}
		chain := c.AddChain(&nftables.Chain{Name: ch.name, Table: tab, Type: nftables.ChainTypeFilter,
			Hooknum: ch.hook, Priority: prio, Device: ch.device, Policy: &policy})
		for _, r := range ch.rules {
			c.AddRule(&nftables.Rule{Table: tab, Chain: chain, Exprs: r})
		}
	}
	return tab
}

// nftDel removes the named chains from the sandbox's table in t's namespace, and
// the table once no chain is left. Missing chains, table or namespace are fine.
func nftDel(t Target, fam nftables.TableFamily, names []string) error {
	return withHostLock("nft", func() error {
		c, release, err := nftConn(t)
		if errors.Is(err, errGone) {
			return nil
		}
		if err != nil {
			return err
		}
		failed := true
		defer func() { release(failed) }()
		tab := nftTable(t.Sandbox, fam)
		chains, err := c.ListChainsOfTableFamily(fam)
		if err != nil {
			return fmt.Errorf("list nftables chains in %s: %w", t.netnsName(), err)
		}
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		left, deleted := 0, 0
		for _, ch := range chains {
			if ch.Table.Name != tab.Name {
				continue
			}
			if want[ch.Name] {
				c.DelChain(&nftables.Chain{Name: ch.Name, Table: tab})
				deleted++
			} else {
				left++
			}
		}
		tableExists := deleted > 0 || left > 0
		if !tableExists {
			tables, err := c.ListTablesOfFamily(fam)
			if err != nil {
				return fmt.Errorf("list nftables tables in %s: %w", t.netnsName(), err)
			}
			for _, tb := range tables {
				tableExists = tableExists || tb.Name == tab.Name
			}
		}
		if left == 0 && tableExists {
			c.DelTable(tab)
		}
		if deleted == 0 && !(left == 0 && tableExists) {
			failed = false
			return nil
		}
		if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete nftables chains %v of %s in %s: %w", names, tab.Name, t.netnsName(), err)
		}
		failed = false
		return nil
	})
}

// randomBelow matches a fraction n/10000 of packets: numgen random mod 10000 < n,
// then the tail expressions. n = 10000 matches everything (no numgen at all).
func randomBelow(reg, n uint32, tail ...expr.Any) []expr.Any {
	if n >= 10000 {
		return tail
	}
	return append([]expr.Any{
		&expr.Numgen{Register: reg, Modulus: 10000, Type: unix.NFT_NG_RANDOM},
		// numgen yields host byte order; cmp compares bytes, so turn it big-endian first.
		&expr.Byteorder{SourceRegister: reg, DestRegister: reg, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpLt, Register: reg, Data: binaryutil.BigEndian.PutUint32(n)},
	}, tail...)
}

// matchL4 matches an IPv4/IPv6 packet of protocol proto whose destination port
// lies in ports.
func matchL4(proto uint8, ports PortRange) []expr.Any {
	out := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
	lo, hi := make([]byte, 2), make([]byte, 2)
	binary.BigEndian.PutUint16(lo, ports.Lo)
	binary.BigEndian.PutUint16(hi, ports.Hi)
	if ports.Lo == ports.Hi {
		return append(out, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: lo})
	}
	return append(out, &expr.Range{Op: expr.CmpOpEq, Register: 1, FromData: lo, ToData: hi})
}

// matchIfname matches the input (in) or output interface name.
func matchIfname(in bool, name string) []expr.Any {
	key := expr.MetaKeyOIFNAME
	if in {
		key = expr.MetaKeyIIFNAME
	}
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: b}}
}

func drop() []expr.Any {
	return []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}
}

// withHostLock serializes fn with every commlab process on this host (flock on
// /run/commlab/<name>.lock); used where check-then-act spans several syscalls.
func withHostLock(name string, fn func() error) error {
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", runDir, err)
	}
	f, err := os.OpenFile(filepath.Join(runDir, name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open %s lock: %w", name, err)
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	defer unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return fn()
}
