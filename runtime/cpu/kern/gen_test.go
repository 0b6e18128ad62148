package kern

import (
	"os"
	"os/exec"
)

// generatorCmd runs a kernel generator with `go run` for the host: a test
// binary cross-built for another GOARCH (run under qemu) must not pass its
// GOOS/GOARCH on, or the generator would be built for the emulated target.
func generatorCmd(gobin, pkg, dir string) *exec.Cmd {
	cmd := exec.Command(gobin, "run", pkg, "-dir", dir)
	cmd.Env = append(os.Environ(), "GOOS=", "GOARCH=", "GOARM64=", "GOAMD64=")
	return cmd
}
