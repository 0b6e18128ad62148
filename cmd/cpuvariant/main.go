// Command cpuvariant prints the CPU kernel variant this machine runs by
// default, one of runtime/cpu/kern.Variants(); with a variant name as its
// argument it prints that name if this CPU can run it and exits 1 if not.
// CI uses it to force each SIMD variant the machine has. A command, so it
// lives under cmd/, the top floor: it imports runtime/cpu/kern, which no
// package under internal/ (a bottom floor) may.
package main

import (
	"fmt"
	"os"

	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

func main() {
	if len(os.Args) > 1 {
		ks, err := kern.Use(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "cpuvariant:", err)
			os.Exit(1)
		}
		fmt.Println(ks.Name())
		return
	}
	fmt.Println(kern.Variant())
}
