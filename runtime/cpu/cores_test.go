package cpu

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCountCores(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		sib  []string
		want int
	}{
		{"no SMT", 4, []string{"0\n", "1\n", "2\n", "3\n"}, 4},
		{"2-way SMT, lists", 4, []string{"0,2\n", "1,3\n", "0,2\n", "1,3\n"}, 2},
		{"2-way SMT, ranges", 4, []string{"0-1\n", "0-1\n", "2-3\n", "2-3\n"}, 2},
		{"unreadable", 3, nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := countCores(tc.n, func(c int) (string, error) {
				if tc.sib == nil {
					return "", errors.New("no sysfs")
				}
				return tc.sib[c], nil
			})
			require.Equal(t, tc.want, got)
		})
	}
	require.GreaterOrEqual(t, physicalCores(), 1)
}

// oneRowPerSlot tells decode rows (one per slot: attention's cold-cache
// prefetch) from prompt rows, which share their slot.
func TestOneRowPerSlot(t *testing.T) {
	for _, c := range []struct {
		rows []int
		want bool
	}{
		{[]int{0}, true},
		{[]int{256, 0, 512}, true},
		{[]int{0, 0}, false},
		{[]int{0, 256, 512, 256}, false},
		{distinctRows(256), true},
		{distinctRows(257), false}, // a prompt's size: not looked at
	} {
		if got := oneRowPerSlot(c.rows); got != c.want {
			t.Errorf("oneRowPerSlot(%v) = %v, want %v", c.rows, got, c.want)
		}
	}
}

// distinctRows is n rows, each of its own slot.
func distinctRows(n int) []int {
	r := make([]int, n)
	for i := range r {
		r[i] = 256 * i
	}
	return r
}
