package scenarios

import (
	"embed"
	"io/fs"
)

//go:embed catalog/*.yaml
var catalogFS embed.FS

// CatalogDir is the directory of the shipped scenarios inside Embedded().
const CatalogDir = "catalog"

// Embedded returns the scenarios shipped in the binary.
func Embedded() fs.FS { return catalogFS }
