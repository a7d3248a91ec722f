package scenarios

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
)

//go:embed catalog/*.yaml
var catalogFS embed.FS

// alertTestsFS holds promtool rule unit tests, one directory per set: each *.yaml file
// is one case, its rule_files naming the learner's rules as alerts.yml. They ship
// inside the binary, so a learner sees them only in the debrief.
//
//go:embed alerttests
var alertTestsFS embed.FS

// CatalogDir is the directory of the shipped scenarios inside Embedded().
const CatalogDir = "catalog"

// Embedded returns the scenarios shipped in the binary.
func Embedded() fs.FS { return catalogFS }

// AlertTests returns the shipped promtool test set name (its case files at the root).
func AlertTests(name string) (fs.FS, error) {
	if name == "" || !fs.ValidPath(name) || path.Base(name) != name {
		return nil, fmt.Errorf("alert test set %q: want the name of a directory in scenarios/alerttests", name)
	}
	sub, err := fs.Sub(alertTestsFS, "alerttests/"+name)
	if err != nil {
		return nil, err
	}
	cases, err := fs.Glob(sub, "*.yaml")
	if err != nil || len(cases) == 0 {
		sets, _ := fs.ReadDir(alertTestsFS, "alerttests")
		names := make([]string, 0, len(sets))
		for _, s := range sets {
			names = append(names, s.Name())
		}
		slices.Sort(names)
		return nil, fmt.Errorf("alert test set %q: no such set (shipped: %v)", name, names)
	}
	return sub, nil
}
