package cuda_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmuShim checks the parts of cudaemu.h the emitted kernels do not use
// yet (__shared__, __syncthreads, __shfl_xor_sync, an int __shfl_sync,
// gridDim/blockDim) with a hand-written kernel, and that a full-mask
// shuffle some lanes never reach aborts the run rather than hanging or
// returning stale values.
func TestEmuShim(t *testing.T) {
	clang := clangxxOrSkip(t)
	run := func(t *testing.T, src string) (string, error) {
		dir := t.TempDir()
		path := filepath.Join(dir, "k.cpp")
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(dir, "k")
		if out, err := exec.Command(clang, append(emuArgs(), "-o", exe, "-x", "c++", path)...).CombinedOutput(); err != nil {
			t.Fatalf("clang++: %v\n%s", err, out)
		}
		out, err := exec.Command(exe).CombinedOutput()
		return string(out), err
	}
	t.Run("block_reduce", func(t *testing.T) {
		t.Parallel()
		out, err := run(t, blockReduceSrc)
		if err != nil || !strings.Contains(out, "ok") {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	t.Run("divergent_shuffle", func(t *testing.T) {
		t.Parallel()
		out, err := run(t, divergentSrc)
		if err == nil || !strings.Contains(out, "non-uniform control flow") {
			t.Fatalf("a shuffle that lane 3 never reaches was not reported: %v\n%s", err, out)
		}
	})
}

// blockReduceSrc: each block of 96 threads sums its 96 inputs (warp
// butterfly, then the three warp sums through shared memory between two
// barriers); every thread writes the block sum and lane 5's id.
const blockReduceSrc = `
extern "C" __global__ void __launch_bounds__(96) block_sum(const float* x, float* out, int* ids) {
    __shared__ float part[3];
    const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const unsigned i = blockIdx.x * blockDim.x + tid;
    float v = x[i];
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    if (lane == 0) {
        part[warp] = v;
    }
    __syncthreads();
    const float s = part[0] + part[1] + part[2];
    __syncthreads(); // the next block's writes wait for every read
    out[i] = s;
    ids[i] = __shfl_sync(0xffffffffu, int(i), 5) + int(gridDim.x) * 1000;
}

int main() {
    const unsigned blocks = 5, n = blocks * 96;
    std::vector<float> x(n), out(n);
    std::vector<int> ids(n);
    for (unsigned i = 0; i < n; ++i) {
        x[i] = float(i % 7) - 2.5f + float(i) / 64.0f;
    }
    cudaemu::launch(dim3{blocks, 1, 1}, dim3{96, 1, 1}, [&] { block_sum(x.data(), out.data(), ids.data()); });
    for (unsigned i = 0; i < n; ++i) {
        const unsigned b = i / 96;
        float want = 0;
        for (unsigned j = b * 96; j < b * 96 + 96; ++j) {
            want += x[j];
        }
        const int wantID = int(i / 32 * 32 + 5) + 5000;
        if (std::fabs(out[i] - want) > 1e-3f * std::fabs(want) + 1e-3f || ids[i] != wantID) {
            std::printf("thread %u: sum %g want %g, id %d want %d\n", i, out[i], want, ids[i], wantID);
            return 1;
        }
    }
    std::printf("ok\n");
    return 0;
}
`

// divergentSrc: lane 3 returns before a full-mask shuffle.
const divergentSrc = `
extern "C" __global__ void bad(float* out) {
    const unsigned lane = threadIdx.x & 31u;
    if (lane == 3) {
        return;
    }
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, 1.0f, 1);
}

int main() {
    std::vector<float> out(32);
    cudaemu::launch(dim3{1, 1, 1}, dim3{32, 1, 1}, [&] { bad(out.data()); });
    std::printf("no error\n");
    return 0;
}
`
