//go:build !amd64 && !arm64

package kern

// archVariants: only the generic kernels outside amd64 and arm64.
func archVariants() {}
