package client

import (
	"encoding/json"
	"time"
)

// Session is API.md's session object.
type Session struct {
	ID         string   `json:"id"`
	PID        int      `json:"pid"`
	Tty        bool     `json:"tty"`
	Rows       int      `json:"rows"`
	Cols       int      `json:"cols"`
	Argv       []string `json:"argv"`
	Cwd        string   `json:"cwd"`
	User       string   `json:"user"`
	State      string   `json:"state"` // "running" or "exited"
	ExitCode   *int     `json:"exit_code"`
	Signal     *string  `json:"signal"`
	TimedOut   bool     `json:"timed_out"`
	StartedAt  string   `json:"started_at"`
	EndedAt    *string  `json:"ended_at"`
	LastChunk  uint64   `json:"last_chunk"`
	BytesOut   uint64   `json:"bytes_out"`
	OOMKilled  *bool    `json:"oom_killed,omitempty"`  // issue 21
	Usage      *Usage   `json:"usage,omitempty"`       // issue 21
	StdinBytes *uint64  `json:"stdin_bytes,omitempty"` // issue 24
}

// Running tells whether the session's process still runs.
func (s *Session) Running() bool { return s.State == "running" }

// Usage is a session's resource use (nil members: the kernel lacks the file).
type Usage struct {
	CPUMs           *uint64 `json:"cpu_ms"`
	MemoryPeakBytes *uint64 `json:"memory_peak_bytes"`
	PidsPeak        *uint64 `json:"pids_peak"`
}

// Chunk is one piece of output. Data holds its bytes whichever field the
// answer carried: "data" (base64, decoded) or, with encoding=text, "text"
// (then IsText is true). Text gives them as a string.
type Chunk struct {
	ID     uint64 `json:"id"`
	Stream string `json:"stream"` // "pty", "stdout" or "stderr"
	Offset uint64 `json:"offset"`
	Data   []byte `json:"data"`
	IsText bool   `json:"-"` // the answer carried "text" (issue 33)
}

// Text is the chunk's bytes as a string (valid UTF-8 when IsText).
func (c Chunk) Text() string { return string(c.Data) }

// UnmarshalJSON takes "data" (base64) or "text" (issue 33).
func (c *Chunk) UnmarshalJSON(b []byte) error {
	var w struct {
		ID     uint64  `json:"id"`
		Stream string  `json:"stream"`
		Offset uint64  `json:"offset"`
		Data   []byte  `json:"data"`
		Text   *string `json:"text"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = Chunk{ID: w.ID, Stream: w.Stream, Offset: w.Offset, Data: w.Data}
	if w.Text != nil {
		c.Data, c.IsText = []byte(*w.Text), true
	}
	return nil
}

// Text is the window's bytes, all chunks in order, as a string.
func (w *Window) Text() string {
	var n int
	for _, c := range w.Output {
		n += len(c.Data)
	}
	b := make([]byte, 0, n)
	for _, c := range w.Output {
		b = append(b, c.Data...)
	}
	return string(b)
}

// Window is the output window added to answers that carry output.
type Window struct {
	Output          []Chunk `json:"output"`
	Cursor          uint64  `json:"cursor"`
	DroppedChunks   uint64  `json:"dropped_chunks"`
	More            bool    `json:"more"`
	EOF             bool    `json:"eof"`
	TruncatedBytes  *uint64 `json:"truncated_bytes,omitempty"`  // head_tail only
	TruncatedCursor *uint64 `json:"truncated_cursor,omitempty"` // head_tail, when cut
}

// SessionWindow is a session object with an output window.
type SessionWindow struct {
	Session
	Window
}

// StdinAnswer is the answer of POST /v1/sessions/{id}/stdin.
type StdinAnswer struct {
	Written   uint64 `json:"written"`
	Duplicate bool   `json:"duplicate,omitempty"` // issue 24: the same write again
	SessionWindow
}

// Budget holds the output options shared by create, stdin and reads.
type Budget struct {
	YieldMs        int   `json:"yield_ms,omitempty"`
	WaitMs         int   `json:"wait_ms,omitempty"`
	MaxBytes       int64 `json:"max_bytes,omitempty"`
	HeadTail       bool  `json:"head_tail,omitempty"`
	IdleMs         int   `json:"idle_ms,omitempty"`
	StripANSI      bool  `json:"strip_ansi,omitempty"`       // issue 24
	MaxBytesStdout int64 `json:"max_bytes_stdout,omitempty"` // issue 24
	MaxBytesStderr int64 `json:"max_bytes_stderr,omitempty"` // issue 24
	// Encoding is "base64" or "text" ("": agentd's --encoding); issue 33.
	Encoding string `json:"encoding,omitempty"`
}

// Limits caps a session's resources (issue 21); zero means the default.
type Limits struct {
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	Pids        int64 `json:"pids,omitempty"`
	CPUPercent  int64 `json:"cpu_percent,omitempty"`
}

// CreateRequest is the body of POST /v1/sessions: exactly one of Cmd, Argv.
type CreateRequest struct {
	ID        string            `json:"id,omitempty"`
	Cmd       string            `json:"cmd,omitempty"`
	Argv      []string          `json:"argv,omitempty"`
	Shell     string            `json:"shell,omitempty"`
	Login     bool              `json:"login,omitempty"`
	Tty       bool              `json:"tty,omitempty"`
	Rows      int               `json:"rows,omitempty"`
	Cols      int               `json:"cols,omitempty"`
	Cwd       string            `json:"cwd,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	User      string            `json:"user,omitempty"`
	Stdin     *bool             `json:"stdin,omitempty"`
	TimeoutMs int64             `json:"timeout_ms,omitempty"`
	RingBytes int64             `json:"ring_bytes,omitempty"`
	Limits    *Limits           `json:"limits,omitempty"`  // issue 21
	Profile   string            `json:"profile,omitempty"` // issue 24
	Budget
}

// StdinRequest is the JSON body of POST /v1/sessions/{id}/stdin: Data
// (sent as base64) or Text.
type StdinRequest struct {
	Data   []byte  `json:"data,omitempty"`
	Text   string  `json:"text,omitempty"`
	EOF    bool    `json:"eof,omitempty"`
	Offset *uint64 `json:"offset,omitempty"` // issue 24: exactly-once stdin
	Budget
}

// ReadOptions are the query parameters of GET /v1/sessions/{id}.
type ReadOptions struct {
	Cursor uint64
	Budget // YieldMs is not used by reads
}

// RawWindow is a raw-mode read (Accept: application/octet-stream).
type RawWindow struct {
	Data          []byte
	Cursor        uint64
	Offset        uint64
	DroppedChunks uint64
	More          bool
	EOF           bool
	State         string
	ExitCode      *int
}

// Health is GET /healthz.
type Health struct {
	Status      string  `json:"status"`
	Version     string  `json:"version"`
	Sessions    int     `json:"sessions"`
	UptimeMs    int64   `json:"uptime_ms"`
	PID         int     `json:"pid"`
	Containment string  `json:"containment,omitempty"` // issue 21
	Generation  *uint64 `json:"generation,omitempty"`  // issue 22
}

// FileWritten is the answer of PUT /v1/files and POST /v1/files/fetch.
type FileWritten struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// FileReadOptions are the query parameters of GET /v1/files.
type FileReadOptions struct {
	Offset int64
	Length int64 // 0: to the end
	User   string
}

// FileWriteOptions are the query parameters of PUT /v1/files.
type FileWriteOptions struct {
	Mode  string // octal, "0644" when empty
	Mkdir bool
	User  string
}

// StatResult is one entry of POST /v1/files/stat.
type StatResult struct {
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Type   string `json:"type,omitempty"` // file, dir, symlink, other
	Size   int64  `json:"size,omitempty"`
	Mode   string `json:"mode,omitempty"`
	Mtime  string `json:"mtime,omitempty"`
	UID    int    `json:"uid,omitempty"`
	GID    int    `json:"gid,omitempty"`
	Target string `json:"target,omitempty"`
	Error  string `json:"error,omitempty"`
}

// FetchRequest is the body of POST /v1/files/fetch.
type FetchRequest struct {
	URL       string `json:"url"`
	Path      string `json:"path"`
	Mode      string `json:"mode,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	TimeoutMs *int64 `json:"timeout_ms,omitempty"`
	CAFile    string `json:"ca_file,omitempty"`
	Mkdir     bool   `json:"mkdir,omitempty"`
	User      string `json:"user,omitempty"`
}

// Event is one entry of the sandbox's event feed (issue 23); the fields of
// its type are in Fields as well as in the typed members.
type Event struct {
	ID        uint64                     `json:"id"`
	Type      string                     `json:"type"`
	At        string                     `json:"at"`
	Session   *string                    `json:"session"`
	ExitCode  *int                       `json:"exit_code,omitempty"`
	Signal    *string                    `json:"signal,omitempty"`
	TimedOut  *bool                      `json:"timed_out,omitempty"`
	OOMKilled *bool                      `json:"oom_killed,omitempty"`
	Port      *int                       `json:"port,omitempty"`
	Address   *string                    `json:"address,omitempty"`
	Protocol  *string                    `json:"protocol,omitempty"`
	PID       *int                       `json:"pid,omitempty"`
	Fields    map[string]json.RawMessage `json:"-"`
}

// UnmarshalJSON fills the typed members and Fields (every member but id,
// type, at and session).
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	if err := json.Unmarshal(b, (*plain)(e)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &e.Fields); err != nil {
		return err
	}
	for _, k := range []string{"id", "type", "at", "session"} {
		delete(e.Fields, k)
	}
	return nil
}

// EventPage is GET /v1/events.
type EventPage struct {
	Events        []Event `json:"events"`
	Cursor        uint64  `json:"cursor"`
	DroppedEvents uint64  `json:"dropped_events"`
}

// EventsOptions are the query parameters of GET /v1/events.
type EventsOptions struct {
	Cursor  uint64
	WaitMs  int
	Session string
	Types   []string
}

// Port is one listening socket (issue 23).
type Port struct {
	Address  string  `json:"address"`
	Port     int     `json:"port"`
	Protocol string  `json:"protocol"` // tcp, tcp6, udp, udp6
	PID      *int    `json:"pid"`
	Session  *string `json:"session"`
}

// ResumedRequest is the body of POST /v1/sandbox/resumed (issue 22).
type ResumedRequest struct {
	UnixMs  int64  `json:"unix_ms,omitempty"`
	Entropy []byte `json:"entropy,omitempty"` // 32..512 bytes, sent as base64
}

// Resumed is the answer of POST /v1/sandbox/resumed.
type Resumed struct {
	Generation        uint64 `json:"generation"`
	ClockStepMs       int64  `json:"clock_step_ms"`
	SameRestore       bool   `json:"same_restore"`
	Clock             string `json:"clock"` // "unix_ms", "rtc" or "none"
	ClockError        string `json:"clock_error,omitempty"`
	EntropyBytes      int    `json:"entropy_bytes,omitempty"`
	EntropyError      string `json:"entropy_error,omitempty"`
	ConnectionsProbed int    `json:"connections_probed,omitempty"`
}

// ExecArgs are exec_command's arguments.
type ExecArgs struct {
	Cmd             string
	Workdir         string
	Tty             bool
	YieldTimeMs     int // default 10000, within 250..30000
	MaxOutputTokens int // default 10000; the byte budget is 4 bytes a token
	Shell           string
	Login           bool
	Env             map[string]string
	SessionID       string // optional: the session's id (else one is made)
}

// WriteStdinArgs are write_stdin's arguments.
type WriteStdinArgs struct {
	SessionID       string
	Chars           string // "" polls for output without writing
	YieldTimeMs     int    // default 250, within 250..30000
	MaxOutputTokens int    // default 10000
}

// ExecResult is what a tool call hands back to the model.
type ExecResult struct {
	SessionID     string
	Running       bool
	ExitCode      *int // nil while running
	Output        string
	OmittedBytes  int64 // bytes left out between the head and the tail
	OriginalBytes int64 // output bytes of this call, omitted ones included
	WallTime      time.Duration
}
