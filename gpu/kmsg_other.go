//go:build !linux

package gpu

import "errors"

// KernelXids needs Linux's /dev/kmsg.
func KernelXids() ([]XidEvent, error) {
	return nil, errors.New("reading the kernel log for Xids needs Linux")
}
