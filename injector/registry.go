package injector

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Fault is one fault kind's parameters. Implementations are plain structs whose
// exported fields carry `param:"name"` and `doc:"..."` tags; the registry fills them
// from text and the journal stores them as JSON.
type Fault interface {
	// Kind is the registered kind name, e.g. "nic-rate".
	Kind() string
	// Validate checks the parameters alone, without touching the host.
	Validate() error
	// Apply applies the fault to t. Before it changes anything on the host it passes
	// an Undo to op.Record, which journals it; it records again when it learns more
	// (a pid, a created device). It reads back what it applied. On error the caller
	// reverts the last recorded Undo, so Apply need not clean up after itself.
	Apply(ctx context.Context, t Target, op *Op) (Undo, error)
	// Command is what a person would type inside the node for the same fault,
	// shown in the debrief.
	Command(t Target) []string
}

// Undo reverts one applied fault. It is stored in the journal as JSON, so it holds
// everything needed (target, prior state, names) and works in a fresh process.
type Undo interface {
	// Revert puts back the state before Apply. It is idempotent, works after a
	// partial apply, and treats "no such qdisc/table/file/netns/process" as done.
	Revert(ctx context.Context) error
}

// Op is what one Apply needs besides the target and the parameters.
type Op struct {
	// ID names the fault; objects the fault creates carry it (chains, IFB, tags).
	ID string
	// Deadline is when the fault must be gone; helper processes stop by then.
	Deadline time.Time
	// Record journals u (fsynced) before the host is touched.
	Record func(u Undo) error
	// Helper is the argv prefix that starts commlab's helper process (nic-flap).
	Helper []string
}

// nicUser is implemented by faults that name NICs; the injector checks each one
// against the target namespace's link list before anything is journaled.
type nicUser interface{ nics() []string }

// claimer is implemented by faults that own a resource exclusively (a NIC's root
// qdisc, its MTU); two active faults on one target may not share a claim.
type claimer interface{ claims() []string }

// Feature is something a kind needs from the kernel or the host (see Probe).
type Feature string

// Features a kind may need.
const (
	NeedTBF      Feature = "tbf"
	NeedNetem    Feature = "netem"
	NeedIFB      Feature = "ifb"
	NeedNftables Feature = "nftables"
	NeedIperf3   Feature = "iperf3"
	NeedCgroup   Feature = "cgroup"
	NeedUnshare  Feature = "unshare"
)

// Kind describes one fault kind.
type Kind struct {
	Name    string
	Summary string
	// Needs lists what the kind requires; Apply refuses early if Probe lacks one.
	Needs []Feature
	// Hardware marks a kind that changes real hardware state (a PCIe link): Apply
	// refuses it unless Options.AllowHardware is set by the operator.
	Hardware bool
	// Login marks a kind that changes what a login shell starts with (a profile.d
	// script): shells opened before it is applied would not show it.
	Login bool
	// FixedDeadline marks a kind whose helper processes are started with the
	// deadline and stop by it: its deadline cannot be renewed (a lab's extension
	// reverts such a fault and applies it again, session.Lab.Extend).
	FixedDeadline bool
	// New returns a fault with its defaults set.
	New func() Fault
	// NewUndo returns an empty undo of this kind, for decoding the journal.
	NewUndo func() Undo
}

// Param documents one parameter of a kind.
type Param struct {
	Name     string `json:"name"`
	Doc      string `json:"doc"`
	Default  string `json:"default,omitempty"`
	Required bool   `json:"required,omitempty"`
}

// Registry is the set of fault kinds an injector knows. Build it with NewRegistry.
type Registry struct {
	kinds map[string]Kind
}

// NewRegistry builds a registry from kinds, refusing duplicates and malformed kinds.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r := &Registry{kinds: map[string]Kind{}}
	for _, k := range kinds {
		if k.Name == "" || k.New == nil || k.NewUndo == nil {
			return nil, fmt.Errorf("register kind %q: name, New and NewUndo are required", k.Name)
		}
		if _, dup := r.kinds[k.Name]; dup {
			return nil, fmt.Errorf("register kind %q: registered twice", k.Name)
		}
		if _, err := paramFields(k.New()); err != nil {
			return nil, fmt.Errorf("register kind %q: %w", k.Name, err)
		}
		r.kinds[k.Name] = k
	}
	return r, nil
}

// Builtin lists every kind this package implements.
func Builtin() []Kind {
	return []Kind{
		NICRateKind(), NICDownKind(), NICFlapKind(), MTUMismatchKind(), WrongRouteKind(),
		LossKind(), DelayKind(), JitterKind(), CorruptKind(),
		RoCEDropKind(), PortBlockKind(), CongestionKind(),
		EnvForceKind(), CPUSqueezeKind(), MemPressureKind(), ShmSmallKind(), NUMAMisbindKind(),
		PCIeSpeedKind(),
	}
}

// Kinds returns the registered kinds sorted by name.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Kind returns the kind named name.
func (r *Registry) Kind(name string) (Kind, error) {
	k, ok := r.kinds[name]
	if !ok {
		names := make([]string, 0, len(r.kinds))
		for n := range r.kinds {
			names = append(names, n)
		}
		sort.Strings(names)
		return Kind{}, invalid("unknown fault kind %q (known: %s)", name, strings.Join(names, ", "))
	}
	return k, nil
}

// Params documents the parameters of kind.
func (r *Registry) Params(kind string) ([]Param, error) {
	k, err := r.Kind(kind)
	if err != nil {
		return nil, err
	}
	f := k.New()
	fields, _ := paramFields(f)
	defaults := FormatParams(f)
	out := make([]Param, 0, len(fields))
	for _, fl := range fields {
		out = append(out, Param{Name: fl.name, Doc: fl.doc, Required: fl.required, Default: defaults[fl.name]})
	}
	return out, nil
}

// Parse builds a validated fault of kind from text parameters (CLI flags, scenario
// files). Unknown parameters and bad values are errors naming the parameter.
func (r *Registry) Parse(kind string, params map[string]string) (Fault, error) {
	k, err := r.Kind(kind)
	if err != nil {
		return nil, err
	}
	f := k.New()
	fields, _ := paramFields(f)
	byName := map[string]paramField{}
	var names []string
	for _, fl := range fields {
		byName[fl.name] = fl
		names = append(names, fl.name)
	}
	keys := make([]string, 0, len(params))
	for key := range params {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	v := reflect.ValueOf(f).Elem()
	for _, key := range keys {
		fl, ok := byName[key]
		if !ok {
			return nil, invalid("%s has no parameter %q (it has: %s)", kind, key, strings.Join(names, ", "))
		}
		if err := setField(v.Field(fl.index), params[key]); err != nil {
			return nil, invalid("%s %s: %v", kind, key, err)
		}
	}
	for _, fl := range fields {
		if _, given := params[fl.name]; fl.required && !given && v.Field(fl.index).IsZero() {
			return nil, invalid("%s needs parameter %q (%s)", kind, fl.name, fl.doc)
		}
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", kind, err)
	}
	return f, nil
}

// ParamNames is the union of every kind's parameter names (for CLI flags).
func (r *Registry) ParamNames() []string {
	seen := map[string]bool{}
	for _, k := range r.kinds {
		fields, _ := paramFields(k.New())
		for _, fl := range fields {
			seen[fl.name] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// decode rebuilds a fault of kind from its journaled JSON.
func (r *Registry) decode(kind string, raw json.RawMessage) (Fault, error) {
	k, err := r.Kind(kind)
	if err != nil {
		return nil, err
	}
	f := k.New()
	if err := json.Unmarshal(raw, f); err != nil {
		return nil, fmt.Errorf("decode %s parameters: %w", kind, err)
	}
	return f, nil
}

// FormatParams returns f's parameters as text, keyed by parameter name; zero
// values are left out.
func FormatParams(f Fault) map[string]string {
	out := map[string]string{}
	fields, _ := paramFields(f)
	v := reflect.ValueOf(f).Elem()
	for _, fl := range fields {
		fv := v.Field(fl.index)
		if fv.IsZero() {
			continue
		}
		out[fl.name] = formatField(fv)
	}
	return out
}

type paramField struct {
	index    int
	name     string
	doc      string
	required bool
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

func paramFields(f Fault) ([]paramField, error) {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("fault %T must be a pointer to a struct", f)
	}
	t := v.Elem().Type()
	var out []paramField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("param")
		if !ok {
			continue
		}
		name, opt, _ := strings.Cut(tag, ",")
		if jt := strings.Split(sf.Tag.Get("json"), ",")[0]; jt != name {
			return nil, fmt.Errorf("field %s: json tag %q must equal param tag %q", sf.Name, jt, name)
		}
		switch {
		case reflect.PointerTo(sf.Type).Implements(textUnmarshaler):
		case slices.Contains([]reflect.Kind{reflect.String, reflect.Int, reflect.Float64, reflect.Bool}, sf.Type.Kind()):
		default:
			return nil, fmt.Errorf("field %s: unsupported parameter type %s", sf.Name, sf.Type)
		}
		out = append(out, paramField{index: i, name: name, doc: sf.Tag.Get("doc"), required: opt == "required"})
	}
	return out, nil
}

func setField(fv reflect.Value, s string) error {
	if u, ok := fv.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(s))
	}
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(strings.TrimSpace(s))
	case reflect.Int:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", s)
		}
		fv.SetInt(int64(n))
	case reflect.Float64:
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", s)
		}
		fv.SetFloat(x)
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		fv.SetBool(b)
	}
	return nil
}

func formatField(fv reflect.Value) string {
	if m, ok := fv.Interface().(encoding.TextMarshaler); ok {
		b, _ := m.MarshalText()
		return string(b)
	}
	return fmt.Sprint(fv.Interface())
}
