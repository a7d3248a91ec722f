// Package exams holds the certification exams shipped in the binary, one YAML
// file each; package exam defines and checks them.
package exams

import (
	"embed"
	"io/fs"
)

//go:embed *.yaml
var files embed.FS

// Embedded returns the shipped exam files, at the root.
func Embedded() fs.FS { return files }
