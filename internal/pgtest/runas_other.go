//go:build !unix

package pgtest

import "syscall"

// runAs: PostgreSQL's programs run as this process (there is no root here).
func runAs(string) (*syscall.SysProcAttr, error) { return nil, nil }
