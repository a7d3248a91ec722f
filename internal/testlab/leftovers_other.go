//go:build !linux

package testlab

// Leftovers lists every trace of sandbox id on the host. Off Linux no sandbox can
// be made (labs refuse with labs.ErrNeedsLinux), so there is none.
func Leftovers(id string) []string { return nil }
