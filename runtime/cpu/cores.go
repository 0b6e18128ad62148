package cpu

import (
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
)

// physicalCores returns the number of physical cores among the CPUs this
// process may use (GOMAXPROCS), counting SMT siblings once: two hardware
// threads of one core share its load and vector units, and matrix-vector
// kernels that saturate them gain nothing from the second thread but
// synchronisation. Where the topology cannot be read it returns GOMAXPROCS.
func physicalCores() int {
	return countCores(goruntime.GOMAXPROCS(0), func(cpu int) (string, error) {
		b, err := os.ReadFile(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu))
		return string(b), err
	})
}

// countCores counts the distinct sibling sets of CPUs 0..n-1 (siblings
// returns a CPU's thread_siblings_list), n when any cannot be read.
func countCores(n int, siblings func(cpu int) (string, error)) int {
	seen := map[string]bool{}
	for c := 0; c < n; c++ {
		s, err := siblings(c)
		if err != nil {
			return n
		}
		seen[strings.TrimSpace(s)] = true
	}
	return max(1, min(n, len(seen)))
}
