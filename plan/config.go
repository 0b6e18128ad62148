package plan

// Config is a model's architecture summary: what a frontend reads from the
// model file (frontend/arch fills it; arch.Config is this type) and what a
// plan records in its config section, as JSON. It lives here, with the
// format that stores it, so that reading a plan needs no frontend: the plan
// format is a floor below the frontends (docs/ARCHITECTURE.md, import
// floors). Fields that only some families use are omitempty, so that the
// config section of a model without them stays byte for byte what it was.
type Config struct {
	Arch          string
	NLayer        int
	NEmbd         int
	NHead         int
	NHeadKV       int
	HeadDim       int
	NFF           int
	NVocab        int
	NRot          int
	ContextLength int
	RopeBase      float64
	RopeFreqScale float64
	RMSEps        float64
	TiedOutput    bool

	// Mixture of experts, sliding windows and YaRN (gpt-oss); zero and
	// omitted for dense families.
	HeadDimV       int     `json:",omitempty"`
	NExpert        int     `json:",omitempty"`
	NExpertUsed    int     `json:",omitempty"`
	NFFExp         int     `json:",omitempty"`
	SlidingWindow  int     `json:",omitempty"`
	SlidingLayers  []int   `json:",omitempty"`
	RopeScaling    string  `json:",omitempty"`
	RopeOrigCtx    int     `json:",omitempty"`
	RopeAttnFactor float64 `json:",omitempty"`
}
