//go:build !amd64

package kern

// archVariants: only the generic kernels outside amd64.
func archVariants() {}
