package serve

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are what GET /metrics reports, in a registry of the server's own
// (two servers in one process, as in tests, do not collide). They are the
// scheduler's Observer.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	steps        prometheus.Counter
	stepRows     prometheus.Histogram
	stepSeconds  prometheus.Histogram
	queued       prometheus.Gauge
	busy         prometheus.Gauge
	slots        prometheus.Gauge
	ttft         prometheus.Histogram
	itl          prometheus.Histogram
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "minerva_requests_total",
			Help: "HTTP requests by endpoint and status code."}, []string{"endpoint", "code"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "minerva_prompt_tokens_total",
			Help: "Prompt tokens of the requests admitted to the queue."}),
		genTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: "minerva_generated_tokens_total",
			Help: "Tokens generated."}),
		steps: prometheus.NewCounter(prometheus.CounterOpts{Name: "minerva_steps_total",
			Help: "Batched model steps run."}),
		stepRows: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "minerva_step_rows",
			Help: "Rows (decode and prompt tokens of all sequences) per step.", Buckets: prometheus.ExponentialBuckets(1, 2, 11)}),
		stepSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "minerva_step_seconds",
			Help: "Time of one batched step.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{Name: "minerva_queue_depth",
			Help: "Requests waiting for a slot."}),
		busy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "minerva_slots_busy",
			Help: "Slots holding a sequence."}),
		slots: prometheus.NewGauge(prometheus.GaugeOpts{Name: "minerva_slots",
			Help: "Slots (--parallel)."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "minerva_time_to_first_token_seconds",
			Help: "From a request's admission to the queue to its first token.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "minerva_inter_token_seconds",
			Help: "Between two tokens of one request.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
	}
	m.reg.MustRegister(m.requests, m.promptTokens, m.genTokens, m.steps, m.stepRows, m.stepSeconds,
		m.queued, m.busy, m.slots, m.ttft, m.itl,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) Step(rows, promptRows int, d time.Duration) {
	m.steps.Inc()
	m.stepRows.Observe(float64(rows))
	m.stepSeconds.Observe(d.Seconds())
}

func (m *metrics) Token(first bool, ttft, gap time.Duration) {
	m.genTokens.Inc()
	if first {
		m.ttft.Observe(ttft.Seconds())
	} else {
		m.itl.Observe(gap.Seconds())
	}
}

func (m *metrics) Load(queued, busy int) {
	m.queued.Set(float64(queued))
	m.busy.Set(float64(busy))
}

func timeNow() int64 { return time.Now().Unix() }
