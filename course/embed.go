package course

import (
	"embed"
	"io/fs"
)

//go:embed content
var embedded embed.FS

// Embedded returns the course content compiled into the binary.
func Embedded() fs.FS {
	sub, err := fs.Sub(embedded, "content")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}
