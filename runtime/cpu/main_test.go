package cpu_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/minerva-llm/minerva/runtime/cpu/kern"
)

// TestMain lets CI run the whole package under one kernel variant:
// $MINERVA_CPU becomes the process default, which the programs the tests
// compile use (their Options name none).
func TestMain(m *testing.M) {
	if name := os.Getenv("MINERVA_CPU"); name != "" {
		if err := kern.SetVariant(name); err != nil {
			fmt.Fprintln(os.Stderr, "MINERVA_CPU:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}
