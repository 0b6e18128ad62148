package cuda

import (
	"fmt"
	"strings"
)

// Result is a CUDA driver API status (CUresult).
type Result int32

// The CUresult codes the backend names; any other prints as its number.
const (
	Success                   Result = 0
	ErrorInvalidValue         Result = 1
	ErrorOutOfMemory          Result = 2
	ErrorNotInitialized       Result = 3
	ErrorDeinitialized        Result = 4
	ErrorStubLibrary          Result = 34
	ErrorDeviceUnavailable    Result = 46
	ErrorNoDevice             Result = 100
	ErrorInvalidDevice        Result = 101
	ErrorInvalidImage         Result = 200
	ErrorInvalidContext       Result = 201
	ErrorNoBinaryForGPU       Result = 209
	ErrorInvalidPTX           Result = 218
	ErrorUnsupportedPTXVer    Result = 222
	ErrorInvalidSource        Result = 300
	ErrorFileNotFound         Result = 301
	ErrorInvalidHandle        Result = 400
	ErrorNotFound             Result = 500
	ErrorNotReady             Result = 600
	ErrorIllegalAddress       Result = 700
	ErrorLaunchOutOfResources Result = 701
	ErrorLaunchTimeout        Result = 702
	ErrorIllegalInstruction   Result = 715
	ErrorMisalignedAddress    Result = 716
	ErrorLaunchFailed         Result = 719
	ErrorNotPermitted         Result = 800
	ErrorNotSupported         Result = 801
	ErrorSystemDriverMismatch Result = 803
	ErrorUnknown              Result = 999
)

var resultText = map[Result][2]string{
	Success:                   {"CUDA_SUCCESS", "no error"},
	ErrorInvalidValue:         {"CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	ErrorOutOfMemory:          {"CUDA_ERROR_OUT_OF_MEMORY", "out of device memory"},
	ErrorNotInitialized:       {"CUDA_ERROR_NOT_INITIALIZED", "the driver is not initialized (cuInit not called or failed)"},
	ErrorDeinitialized:        {"CUDA_ERROR_DEINITIALIZED", "the driver is shutting down"},
	ErrorStubLibrary:          {"CUDA_ERROR_STUB_LIBRARY", "libcuda is the toolkit's stub, not the real driver"},
	ErrorDeviceUnavailable:    {"CUDA_ERROR_DEVICE_UNAVAILABLE", "the device is busy or unavailable"},
	ErrorNoDevice:             {"CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	ErrorInvalidDevice:        {"CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	ErrorInvalidImage:         {"CUDA_ERROR_INVALID_IMAGE", "the module image is invalid"},
	ErrorInvalidContext:       {"CUDA_ERROR_INVALID_CONTEXT", "invalid context"},
	ErrorNoBinaryForGPU:       {"CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for this device"},
	ErrorInvalidPTX:           {"CUDA_ERROR_INVALID_PTX", "the PTX failed to compile (JIT)"},
	ErrorUnsupportedPTXVer:    {"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the PTX was produced by a newer toolkit than the driver supports"},
	ErrorInvalidSource:        {"CUDA_ERROR_INVALID_SOURCE", "invalid kernel source"},
	ErrorFileNotFound:         {"CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
	ErrorInvalidHandle:        {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	ErrorNotFound:             {"CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	ErrorNotReady:             {"CUDA_ERROR_NOT_READY", "the operation has not completed yet"},
	ErrorIllegalAddress:       {"CUDA_ERROR_ILLEGAL_ADDRESS", "a kernel accessed an illegal memory address"},
	ErrorLaunchOutOfResources: {"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
	ErrorLaunchTimeout:        {"CUDA_ERROR_LAUNCH_TIMEOUT", "the kernel timed out"},
	ErrorIllegalInstruction:   {"CUDA_ERROR_ILLEGAL_INSTRUCTION", "a kernel executed an illegal instruction"},
	ErrorMisalignedAddress:    {"CUDA_ERROR_MISALIGNED_ADDRESS", "a kernel accessed a misaligned address"},
	ErrorLaunchFailed:         {"CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	ErrorNotPermitted:         {"CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
	ErrorNotSupported:         {"CUDA_ERROR_NOT_SUPPORTED", "operation not supported on this device"},
	ErrorSystemDriverMismatch: {"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "the driver library and the kernel module versions differ"},
	ErrorUnknown:              {"CUDA_ERROR_UNKNOWN", "unknown error"},
}

// Name is the code's identifier in cuda.h, or "CUresult(n)".
func (r Result) Name() string {
	if t, ok := resultText[r]; ok {
		return t[0]
	}
	return fmt.Sprintf("CUresult(%d)", int32(r))
}

// Message describes the code in words.
func (r Result) Message() string {
	if t, ok := resultText[r]; ok {
		return t[1]
	}
	return "unrecognized CUDA error"
}

// Error is a failed driver call: which call and what it returned.
type Error struct {
	Call string // the entry point, e.g. "cuMemAlloc_v2"
	Code Result
}

func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%s)", e.Call, e.Code.Message(), e.Code.Name())
}

// check turns a CUresult into nil or an *Error.
func check(call string, r Result) error {
	if r == Success {
		return nil
	}
	return &Error{Call: call, Code: r}
}

// NVRTCResult is an NVRTC status (nvrtcResult).
type NVRTCResult int32

var nvrtcText = [...]string{
	"NVRTC_SUCCESS",
	"NVRTC_ERROR_OUT_OF_MEMORY",
	"NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	"NVRTC_ERROR_INVALID_INPUT",
	"NVRTC_ERROR_INVALID_PROGRAM",
	"NVRTC_ERROR_INVALID_OPTION",
	"NVRTC_ERROR_COMPILATION",
	"NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	"NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	"NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	"NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	"NVRTC_ERROR_INTERNAL_ERROR",
}

// Name is the code's identifier in nvrtc.h, or "nvrtcResult(n)".
func (r NVRTCResult) Name() string {
	if r >= 0 && int(r) < len(nvrtcText) {
		return nvrtcText[r]
	}
	return fmt.Sprintf("nvrtcResult(%d)", int32(r))
}

// NVRTCError is a failed NVRTC call. Log is the compiler's log when the call
// was nvrtcCompileProgram (possibly several lines); Error() prints its first
// line only.
type NVRTCError struct {
	Call string
	Code NVRTCResult
	Log  string
}

func (e *NVRTCError) Error() string {
	s := fmt.Sprintf("cuda: %s: %s", e.Call, e.Code.Name())
	if l := firstLine(e.Log); l != "" {
		s += ": " + l
	}
	return s
}

func checkNVRTC(call string, r NVRTCResult) error {
	if r == 0 {
		return nil
	}
	return &NVRTCError{Call: call, Code: r}
}

// firstLine is the first non-blank line of s, trimmed.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(strings.TrimRight(l, "\x00")); l != "" {
			return l
		}
	}
	return ""
}
