package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/plan"
)

const manifestDir = "../../deploy/kubernetes"

// decodeStrict decodes one manifest file into v: a field the Kubernetes
// type does not have, or one given twice, is an error.
func decodeStrict(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(manifestDir, name))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(b, v), name)
}

// The deploy/kubernetes manifests decode strictly into the k8s.io/api types
// and hold together: the Deployment runs `minervac serve` with /health
// probes on its port and Prometheus annotations for /metrics, its memory
// request is inspect's serving estimate for the model and flags it serves
// (stories260K), the Service selects its pods, and the autoscaler scales it
// on CPU and on serve's queue-depth gauge, which GET /metrics reports.
func TestKubernetesManifests(t *testing.T) {
	entries, err := os.ReadDir(manifestDir)
	require.NoError(t, err)
	var files []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	require.ElementsMatch(t, []string{"deployment.yaml", "service.yaml", "hpa.yaml", "models-pvc.yaml"}, files, "every manifest is checked here")

	var dep appsv1.Deployment
	decodeStrict(t, "deployment.yaml", &dep)
	var svc corev1.Service
	decodeStrict(t, "service.yaml", &svc)
	var hpa autoscalingv2.HorizontalPodAutoscaler
	decodeStrict(t, "hpa.yaml", &hpa)
	var pvc corev1.PersistentVolumeClaim
	decodeStrict(t, "models-pvc.yaml", &pvc)
	for _, tm := range []struct{ kind, apiVersion, wantKind, wantAPI string }{
		{dep.Kind, dep.APIVersion, "Deployment", "apps/v1"},
		{svc.Kind, svc.APIVersion, "Service", "v1"},
		{hpa.Kind, hpa.APIVersion, "HorizontalPodAutoscaler", "autoscaling/v2"},
		{pvc.Kind, pvc.APIVersion, "PersistentVolumeClaim", "v1"},
	} {
		require.Equal(t, tm.wantKind, tm.kind)
		require.Equal(t, tm.wantAPI, tm.apiVersion)
	}

	// The Deployment.
	pod := dep.Spec.Template
	for k, v := range dep.Spec.Selector.MatchLabels {
		require.Equal(t, v, pod.Labels[k], "the selector selects the pods")
	}
	require.Equal(t, map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080", "prometheus.io/path": "/metrics"}, pod.Annotations)
	require.Len(t, pod.Spec.Containers, 1)
	c := pod.Spec.Containers[0]
	require.Equal(t, "serve", c.Args[0])
	flag := func(name string) string {
		i := slices.Index(c.Args, name)
		require.Positive(t, i, "args set %s", name)
		return c.Args[i+1]
	}
	require.Equal(t, "0.0.0.0", flag("--host"))
	require.Len(t, c.Ports, 1)
	require.Equal(t, flag("--port"), strconv.Itoa(int(c.Ports[0].ContainerPort)))
	require.Equal(t, "http", c.Ports[0].Name)
	for name, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		require.NotNil(t, p, name)
		require.NotNil(t, p.HTTPGet, name)
		require.Equal(t, "/health", p.HTTPGet.Path, name)
		require.Equal(t, intstr.FromString("http"), p.HTTPGet.Port, name)
	}
	model := c.Args[1]
	require.Equal(t, "/models/model.gguf", model)
	mounted := false
	for _, m := range c.VolumeMounts {
		mounted = mounted || m.MountPath == filepath.Dir(model) && m.ReadOnly
	}
	require.True(t, mounted, "the model's directory is a read-only volume")

	// The memory request is the serving estimate of stories260K with the
	// Deployment's --parallel and --ctx.
	planPath := filepath.Join(t.TempDir(), "stories.plan")
	_, stderr, code := minervac(t, "compile", shared.Path(t, "models/gguf/stories260K.gguf"), "-o", planPath)
	require.Equal(t, 0, code, stderr)
	pf, err := plan.Open(planPath)
	require.NoError(t, err)
	mem := pf.Plan.Memory
	pf.Close()
	parallel, err := strconv.Atoi(flag("--parallel"))
	require.NoError(t, err)
	ctx, err := strconv.Atoi(flag("--ctx"))
	require.NoError(t, err)
	want := resource.MustParse(strconv.FormatInt(mib(serveMemory(mem, ctx, parallel, serveChunk)), 10) + "Mi")
	require.Zero(t, want.Cmp(c.Resources.Requests[corev1.ResourceMemory]), "memory request %s, estimate %s", c.Resources.Requests.Memory(), want.String())
	require.Zero(t, want.Cmp(c.Resources.Limits[corev1.ResourceMemory]), "memory limit")
	cpu := c.Resources.Requests[corev1.ResourceCPU]
	require.False(t, cpu.IsZero(), "a CPU request: the autoscaler's utilization is relative to it")
	threads := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "MINERVA_THREADS" })
	require.GreaterOrEqual(t, threads, 0)
	require.Equal(t, strconv.FormatInt(cpu.Value(), 10), c.Env[threads].Value, "a worker thread per requested core")
	claim := slices.IndexFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil })
	require.GreaterOrEqual(t, claim, 0)
	require.Equal(t, pvc.Name, pod.Spec.Volumes[claim].PersistentVolumeClaim.ClaimName)

	// The Service.
	for k, v := range svc.Spec.Selector {
		require.Equal(t, v, pod.Labels[k], "the Service selects the pods")
	}
	require.Equal(t, intstr.FromString("http"), svc.Spec.Ports[0].TargetPort)

	// The autoscaler, on CPU and on the queue depth serve reports.
	require.Equal(t, "Deployment", hpa.Spec.ScaleTargetRef.Kind)
	require.Equal(t, dep.Name, hpa.Spec.ScaleTargetRef.Name)
	var metrics []string
	for _, m := range hpa.Spec.Metrics {
		switch m.Type {
		case autoscalingv2.ResourceMetricSourceType:
			metrics = append(metrics, string(m.Resource.Name))
		case autoscalingv2.PodsMetricSourceType:
			metrics = append(metrics, m.Pods.Metric.Name)
		}
	}
	require.Equal(t, []string{"cpu", "minerva_queue_depth"}, metrics)
	url, _, _ := startServe(t, shared.Path(t, "models/gguf/stories260K.gguf"))
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(body), "\n# TYPE minerva_queue_depth gauge\n")
}

// The image's base fits the binary: minervac built with CGO_ENABLED=0 still
// names the C library's loader (purego opens libcuda at run time), so the
// runtime stage is distroless/base (glibc), never distroless/static or
// scratch, whose containers could not start it.
func TestDockerfileBase(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	var froms []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "FROM" {
			froms = append(froms, f[1])
		}
	}
	require.Len(t, froms, 2, "a build stage and a runtime stage")
	require.Contains(t, string(b), "CGO_ENABLED=0 go build")
	f, err := elf.Open(minervacBin)
	require.NoError(t, err)
	defer f.Close()
	interp := slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP })
	base := froms[1]
	if interp {
		require.True(t, strings.HasPrefix(base, "gcr.io/distroless/base") || strings.HasPrefix(base, "gcr.io/distroless/cc"),
			"minervac needs the glibc loader; %s lacks it", base)
	} else {
		require.True(t, strings.HasPrefix(base, "gcr.io/distroless/"), base)
	}
}
