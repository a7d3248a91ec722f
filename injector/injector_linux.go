//go:build linux

package injector

import ()

// Open prepares an injector on opts.DataDir. It does not sweep: the serving process
// calls Sweep at start-up, the CLI does not.
