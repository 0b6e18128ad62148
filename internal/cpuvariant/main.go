// Command cpuvariant prints the CPU kernel variant in effect (after
// MINERVA_CPU), one of runtime/cpu/kern.Variants(); CI uses it to force each
// SIMD variant the machine has. It exits 1 when MINERVA_CPU names a variant
// this CPU cannot run.
package main

import (
	"fmt"
	"os"

	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

func main() {
	if name := os.Getenv("MINERVA_CPU"); name != "" && kern.Variant() != name {
		fmt.Fprintf(os.Stderr, "cpuvariant: %s not available (have %v)\n", name, kern.Variants())
		os.Exit(1)
	}
	fmt.Println(kern.Variant())
}
