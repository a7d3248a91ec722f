package bench

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// DataType is an element type; both are 4 bytes, little-endian on the wire.
type DataType int

// Element types, named as nccl-tests names them.
const (
	Float32 DataType = iota
	Int32
)

func (d DataType) String() string {
	if d == Int32 {
		return "int32"
	}
	return "float"
}

// Size is the element size in bytes.
func (d DataType) Size() int { return 4 }

// Op is a reduction operation.
type Op int

// Reduction operations.
const (
	Sum Op = iota
	Max
	Min
)

func (o Op) String() string {
	switch o {
	case Max:
		return "max"
	case Min:
		return "min"
	}
	return "sum"
}

// parseTypes reads nccl-tests' -d value.
func parseTypes(s string) ([]DataType, error) {
	switch strings.ToLower(s) {
	case "float", "float32", "":
		return []DataType{Float32}, nil
	case "int32", "int":
		return []DataType{Int32}, nil
	case "all":
		return []DataType{Float32, Int32}, nil
	}
	return nil, fmt.Errorf("-d %q: unknown data type (want float, int32 or all)", s)
}

// parseOps reads nccl-tests' -o value.
func parseOps(s string) ([]Op, error) {
	switch strings.ToLower(s) {
	case "sum", "":
		return []Op{Sum}, nil
	case "max":
		return []Op{Max}, nil
	case "min":
		return []Op{Min}, nil
	case "all":
		return []Op{Sum, Max, Min}, nil
	}
	return nil, fmt.Errorf("-o %q: unknown reduction (want sum, max, min or all)", s)
}

// reduceFn computes dst = a op b element-wise; dst may alias a or b.
type reduceFn func(dst, a, b []byte)

var le = binary.LittleEndian

func reducer(t DataType, op Op) reduceFn {
	if t == Float32 {
		switch op {
		case Max:
			return func(dst, a, b []byte) {
				a, b = a[:len(dst)], b[:len(dst)]
				for i := 0; i+4 <= len(dst); i += 4 {
					x, y := math.Float32frombits(le.Uint32(a[i:])), math.Float32frombits(le.Uint32(b[i:]))
					le.PutUint32(dst[i:], math.Float32bits(max(x, y)))
				}
			}
		case Min:
			return func(dst, a, b []byte) {
				a, b = a[:len(dst)], b[:len(dst)]
				for i := 0; i+4 <= len(dst); i += 4 {
					x, y := math.Float32frombits(le.Uint32(a[i:])), math.Float32frombits(le.Uint32(b[i:]))
					le.PutUint32(dst[i:], math.Float32bits(min(x, y)))
				}
			}
		}
		return func(dst, a, b []byte) {
			a, b = a[:len(dst)], b[:len(dst)]
			for i := 0; i+4 <= len(dst); i += 4 {
				x, y := math.Float32frombits(le.Uint32(a[i:])), math.Float32frombits(le.Uint32(b[i:]))
				le.PutUint32(dst[i:], math.Float32bits(x+y))
			}
		}
	}
	switch op {
	case Max:
		return func(dst, a, b []byte) {
			a, b = a[:len(dst)], b[:len(dst)]
			for i := 0; i+4 <= len(dst); i += 4 {
				le.PutUint32(dst[i:], uint32(max(int32(le.Uint32(a[i:])), int32(le.Uint32(b[i:])))))
			}
		}
	case Min:
		return func(dst, a, b []byte) {
			a, b = a[:len(dst)], b[:len(dst)]
			for i := 0; i+4 <= len(dst); i += 4 {
				le.PutUint32(dst[i:], uint32(min(int32(le.Uint32(a[i:])), int32(le.Uint32(b[i:])))))
			}
		}
	}
	return func(dst, a, b []byte) {
		a, b = a[:len(dst)], b[:len(dst)]
		for i := 0; i+4 <= len(dst); i += 4 {
			le.PutUint32(dst[i:], le.Uint32(a[i:])+le.Uint32(b[i:]))
		}
	}
}

// genValue is the input element i of rank r: a pseudo-random small integer,
// so that float sums are exact in any order (ring and tree agree bit for bit).
func genValue(seed uint64, r, i int) int32 {
	x := seed ^ uint64(r+1)*0x9E3779B97F4A7C15 ^ uint64(i)*0xBF58476D1CE4E5B9
	x ^= x >> 31
	x *= 0x94D049BB133111EB
	x ^= x >> 29
	return int32(x%129) - 64
}

func putValue(t DataType, b []byte, v int32) {
	if t == Float32 {
		le.PutUint32(b, math.Float32bits(float32(v)))
		return
	}
	le.PutUint32(b, uint32(v))
}

func getValue(t DataType, b []byte) float64 {
	if t == Float32 {
		return float64(math.Float32frombits(le.Uint32(b)))
	}
	return float64(int32(le.Uint32(b)))
}

// fill writes rank r's elements first..first+n-1 into b.
func fill(t DataType, b []byte, seed uint64, r, first, n int) {
	for i := range n {
		putValue(t, b[4*i:], genValue(seed, r, first+i))
	}
}

func combine(op Op, acc, v int64) int64 {
	switch op {
	case Max:
		return max(acc, v)
	case Min:
		return min(acc, v)
	}
	return acc + v
}

// expectReduced is op over all ranks of element i.
func expectReduced(op Op, seed uint64, nranks, i int) int64 {
	acc := int64(genValue(seed, 0, i))
	for r := 1; r < nranks; r++ {
		acc = combine(op, acc, int64(genValue(seed, r, i)))
	}
	return acc
}
