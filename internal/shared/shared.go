// Package shared locates the project's shared test data (../shared beside the
// repository root: real models and the reference engine's golden outputs).
package shared

import (
	"os"
	"path/filepath"
	"testing"
)

// Root returns the absolute path of the shared/ folder that sits beside the
// module root. It walks up from the working directory to the directory holding
// go.mod, so tests in any package find the same folder.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(filepath.Dir(dir), "shared"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}

// Path joins rel (e.g. "models/gguf/stories260K.gguf") onto the shared root and
// fails the test if the file is not there: CI always has the data, so a missing
// file is a broken checkout, not a reason to skip.
func Path(t testing.TB, rel string) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatalf("cannot find the module root: %v", err)
	}
	p := filepath.Join(root, rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shared test data missing: %v", err)
	}
	return p
}
