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
