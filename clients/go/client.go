package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options configure a Client; the zero value is usable.
type Options struct {
	// Token is sent as "Authorization: Bearer" (TCP; the unix socket needs none).
	Token string
	// HTTPClient replaces the default one (its Transport is then the caller's).
	HTTPClient *http.Client
	// Retries is how many times a read (a GET), or a stdin write that
	// carries an offset, is sent again after its connection failed;
	// default 5, negative: none.
	Retries int
	// RetryBackoff is the first pause between tries, doubled each time up to
	// 2 s; default 50 ms.
	RetryBackoff time.Duration
}

// Client talks to one agentd. It is safe for concurrent use.
type Client struct {
	base    string
	token   string
	hc      *http.Client
	retries int
	backoff time.Duration

	mu    sync.Mutex
	tools map[string]*toolState // sessions of ExecCommand/WriteStdin
}

// New returns a client for endpoint: "http://HOST:PORT" or
// "unix:///run/agentd.sock" (an absolute socket path after "unix://").
func New(endpoint string, opts Options) (*Client, error) {
	c := &Client{token: opts.Token, retries: opts.Retries,
		backoff: opts.RetryBackoff, tools: map[string]*toolState{}}
	if c.retries == 0 {
		c.retries = 5
	} else if c.retries < 0 {
		c.retries = 0
	}
	if c.backoff <= 0 {
		c.backoff = 50 * time.Millisecond
	}
	switch {
	case strings.HasPrefix(endpoint, "unix://"):
		path := strings.TrimPrefix(endpoint, "unix://")
		if !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("agentd client: unix socket path %q is not absolute", path)
		}
		c.base = "http://agentd"
		if opts.HTTPClient == nil {
			var d net.Dialer
			tr := &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return d.DialContext(ctx, "unix", path)
				},
				MaxIdleConnsPerHost: 16,
				IdleConnTimeout:     90 * time.Second,
			}
			opts.HTTPClient = &http.Client{Transport: tr}
		}
	case strings.HasPrefix(endpoint, "http://") || strings.HasPrefix(endpoint, "https://"):
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("agentd client: bad endpoint %q", endpoint)
		}
		c.base = strings.TrimRight(endpoint, "/")
	default:
		return nil, fmt.Errorf("agentd client: endpoint %q is neither http:// nor unix://", endpoint)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	c.hc = opts.HTTPClient
	return c, nil
}

// Close lets go of idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// ConnError is a failure of the connection (no complete answer arrived).
type ConnError struct {
	Method, Path string
	Err          error
}

func (e *ConnError) Error() string {
	return fmt.Sprintf("agentd %s %s: connection failed: %v", e.Method, e.Path, e.Err)
}

func (e *ConnError) Unwrap() error { return e.Err }

// once sends one request and reads its whole answer.
func (c *Client) once(ctx context.Context, method, path string, body []byte,
	hdr map[string]string) (*answer, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, &ConnError{method, path, err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, &ConnError{method, path, err}
	}
	return &answer{resp.StatusCode, resp.Header, data}, nil
}

// do sends a request; a read or an idempotent write (retry true) is sent
// again after a connection failure, with the same parameters, so that a
// cursor read resumes exactly and a stdin write at an offset lands once.
func (c *Client) do(ctx context.Context, method, path string, body []byte,
	hdr map[string]string, retry bool) (*answer, error) {
	pause := c.backoff
	for try := 0; ; try++ {
		a, err := c.once(ctx, method, path, body, hdr)
		var ce *ConnError
		if err == nil || !retry || try >= c.retries || !errors.As(err, &ce) ||
			ctx.Err() != nil {
			return a, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		if pause *= 2; pause > 2*time.Second {
			pause = 2 * time.Second
		}
	}
}

// call sends JSON (when in is not nil), expects status want and decodes the
// answer into out (when not nil); any other status is an *Error.
func (c *Client) call(ctx context.Context, method, path string, in interface{},
	want int, out interface{}, retry bool) (*answer, error) {
	var body []byte
	hdr := map[string]string{}
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return nil, err
		}
		hdr["Content-Type"] = "application/json"
	} else if method == http.MethodPost {
		body = []byte{}
	}
	a, err := c.do(ctx, method, path, body, hdr, retry)
	if err != nil {
		return nil, err
	}
	if a.status != want {
		return a, apiError(method, path, a)
	}
	if out != nil {
		if err := json.Unmarshal(a.body, out); err != nil {
			return a, fmt.Errorf("agentd %s %s: bad answer: %w", method, path, err)
		}
	}
	return a, nil
}

// sessionPath is /v1/sessions/{id} with id escaped.
func sessionPath(id string, action string) string {
	p := "/v1/sessions/" + url.PathEscape(id)
	if action != "" {
		p += "/" + action
	}
	return p
}

// budgetQuery adds b's non-zero members to q.
func budgetQuery(q url.Values, b Budget) {
	setInt := func(k string, v int64) {
		if v != 0 {
			q.Set(k, strconv.FormatInt(v, 10))
		}
	}
	setInt("wait_ms", int64(b.WaitMs))
	setInt("yield_ms", int64(b.YieldMs))
	setInt("max_bytes", b.MaxBytes)
	setInt("idle_ms", int64(b.IdleMs))
	setInt("max_bytes_stdout", b.MaxBytesStdout)
	setInt("max_bytes_stderr", b.MaxBytesStderr)
	if b.HeadTail {
		q.Set("head_tail", "true")
	}
	if b.StripANSI {
		q.Set("strip_ansi", "true")
	}
	if b.Encoding != "" {
		q.Set("encoding", b.Encoding)
	}
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// Health is GET /healthz.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	_, err := c.call(ctx, http.MethodGet, "/healthz", nil, 200, &h, true)
	return &h, err
}

// Metrics is GET /metrics, Prometheus' text.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	a, err := c.call(ctx, http.MethodGet, "/metrics", nil, 200, nil, true)
	if err != nil {
		return "", err
	}
	return string(a.body), nil
}

// ListSessions is GET /v1/sessions.
func (c *Client) ListSessions(ctx context.Context) ([]Session, error) {
	var out struct {
		Sessions []Session `json:"sessions"`
	}
	_, err := c.call(ctx, http.MethodGet, "/v1/sessions", nil, 200, &out, true)
	return out.Sessions, err
}

// ListSessionsPage is GET /v1/sessions?limit=N&after=NEXT: at most limit
// sessions after the position after ("" from the start), and the position
// of the next page ("" when none follow).
func (c *Client) ListSessionsPage(ctx context.Context, limit int, after string) ([]Session, string, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("after", after)
	}
	var out struct {
		Sessions []Session `json:"sessions"`
		Next     string    `json:"next"`
	}
	_, err := c.call(ctx, http.MethodGet, withQuery("/v1/sessions", q), nil, 200, &out, true)
	return out.Sessions, out.Next, err
}

// Create is POST /v1/sessions. It is not sent again after a connection
// failure (ExecCommand is, by the session id it chooses).
func (c *Client) Create(ctx context.Context, r CreateRequest) (*SessionWindow, error) {
	var w SessionWindow
	_, err := c.call(ctx, http.MethodPost, "/v1/sessions", r, 201, &w, false)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// Read is GET /v1/sessions/{id}: the chunks after o.Cursor (a long-poll with
// o.WaitMs). Sent again after a connection failure, with the same cursor.
func (c *Client) Read(ctx context.Context, id string, o ReadOptions) (*SessionWindow, error) {
	q := url.Values{}
	q.Set("cursor", strconv.FormatUint(o.Cursor, 10))
	o.Budget.YieldMs = 0
	budgetQuery(q, o.Budget)
	var w SessionWindow
	_, err := c.call(ctx, http.MethodGet, withQuery(sessionPath(id, ""), q), nil, 200, &w, true)
	if err != nil {
		return nil, err
	}
	return &w, nil
}

// ReadRaw is GET /v1/sessions/{id} in raw mode: the window's bytes, and the
// window from the X-Agentd-* headers.
func (c *Client) ReadRaw(ctx context.Context, id string, cursor uint64, maxBytes int64) (*RawWindow, error) {
	q := url.Values{}
	q.Set("cursor", strconv.FormatUint(cursor, 10))
	if maxBytes > 0 {
		q.Set("max_bytes", strconv.FormatInt(maxBytes, 10))
	}
	path := withQuery(sessionPath(id, ""), q)
	a, err := c.do(ctx, http.MethodGet, path, nil,
		map[string]string{"Accept": "application/octet-stream"}, true)
	if err != nil {
		return nil, err
	}
	if a.status != 200 {
		return nil, apiError(http.MethodGet, path, a)
	}
	h := a.header
	u := func(k string) uint64 { n, _ := strconv.ParseUint(h.Get(k), 10, 64); return n }
	w := &RawWindow{Data: a.body, Cursor: u("X-Agentd-Cursor"), Offset: u("X-Agentd-Offset"),
		DroppedChunks: u("X-Agentd-Dropped-Chunks"), More: h.Get("X-Agentd-More") == "true",
		EOF: h.Get("X-Agentd-Eof") == "true", State: h.Get("X-Agentd-State")}
	if v := h.Get("X-Agentd-Exit-Code"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			w.ExitCode = &n
		}
	}
	return w, nil
}

// Stdin is POST /v1/sessions/{id}/stdin with a JSON body. With r.Offset
// set (exactly-once stdin, API.md) it is sent again after a connection
// failure, as reads are: agentd writes only what it has not accepted yet
// and answers a repeat with Duplicate. Without an offset it is never sent
// again. A connection failure that remains is ErrStdinUncertain.
func (c *Client) Stdin(ctx context.Context, id string, r StdinRequest) (*StdinAnswer, error) {
	return c.stdin(ctx, id, r, r.Offset != nil)
}

// stdin posts body (a StdinRequest, or the tools' own) to the session's
// stdin, sent again after a connection failure when retry (an offset).
func (c *Client) stdin(ctx context.Context, id string, body interface{}, retry bool) (*StdinAnswer, error) {
	var out StdinAnswer
	_, err := c.call(ctx, http.MethodPost, sessionPath(id, "stdin"), body, 200, &out, retry)
	var ce *ConnError
	if errors.As(err, &ce) {
		return nil, fmt.Errorf("%w: %v", ErrStdinUncertain, err)
	}
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// StdinRaw is POST /v1/sessions/{id}/stdin with a raw body and the options
// as query parameters. Like Stdin without an offset, it is never sent again.
func (c *Client) StdinRaw(ctx context.Context, id string, data []byte, eof bool, b Budget) (*StdinAnswer, error) {
	return c.stdinRaw(ctx, id, data, nil, eof, b)
}

// StdinRawAt is StdinRaw at an offset (?offset=N): the stdin bytes believed
// accepted before data. Like Stdin with an offset, it is sent again after a
// connection failure.
func (c *Client) StdinRawAt(ctx context.Context, id string, data []byte, offset uint64,
	eof bool, b Budget) (*StdinAnswer, error) {
	return c.stdinRaw(ctx, id, data, &offset, eof, b)
}

func (c *Client) stdinRaw(ctx context.Context, id string, data []byte, offset *uint64,
	eof bool, b Budget) (*StdinAnswer, error) {
	q := url.Values{}
	budgetQuery(q, b)
	if eof {
		q.Set("eof", "true")
	}
	if offset != nil {
		q.Set("offset", strconv.FormatUint(*offset, 10))
	}
	path := withQuery(sessionPath(id, "stdin"), q)
	a, err := c.do(ctx, http.MethodPost, path, data,
		map[string]string{"Content-Type": "application/octet-stream"}, offset != nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStdinUncertain, err)
	}
	if a.status != 200 {
		return nil, apiError(http.MethodPost, path, a)
	}
	var out StdinAnswer
	if err := json.Unmarshal(a.body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Resize is POST /v1/sessions/{id}/resize.
func (c *Client) Resize(ctx context.Context, id string, rows, cols int) (*Session, error) {
	var s Session
	_, err := c.call(ctx, http.MethodPost, sessionPath(id, "resize"),
		map[string]int{"rows": rows, "cols": cols}, 200, &s, true)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Signal is POST /v1/sessions/{id}/signal; sig is "SIGINT", "INT" or "2";
// target is "" (the group), "group" or "foreground".
func (c *Client) Signal(ctx context.Context, id, sig, target string) (*Session, error) {
	body := map[string]string{"signal": sig}
	if target != "" {
		body["target"] = target
	}
	var s Session
	_, err := c.call(ctx, http.MethodPost, sessionPath(id, "signal"), body, 200, &s, false)
	if err != nil {
		return nil, err
	}
	return &s, nil
}

// Delete is DELETE /v1/sessions/{id}; graceMs < 0 leaves agentd's default.
func (c *Client) Delete(ctx context.Context, id string, graceMs int) (*Session, error) {
	q := url.Values{}
	if graceMs >= 0 {
		q.Set("grace_ms", strconv.Itoa(graceMs))
	}
	var s Session
	_, err := c.call(ctx, http.MethodDelete, withQuery(sessionPath(id, ""), q), nil, 200, &s, false)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	delete(c.tools, id)
	c.mu.Unlock()
	return &s, nil
}

// ReadFile is GET /v1/files.
func (c *Client) ReadFile(ctx context.Context, path string, o FileReadOptions) ([]byte, error) {
	q := url.Values{"path": {path}}
	if o.Offset > 0 {
		q.Set("offset", strconv.FormatInt(o.Offset, 10))
	}
	if o.Length > 0 {
		q.Set("length", strconv.FormatInt(o.Length, 10))
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	a, err := c.call(ctx, http.MethodGet, withQuery("/v1/files", q), nil, 200, nil, true)
	if err != nil {
		return nil, err
	}
	return a.body, nil
}

// WriteFile is PUT /v1/files: written atomically. Sent again after a
// connection failure (the same bytes to the same path).
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, o FileWriteOptions) (*FileWritten, error) {
	q := url.Values{"path": {path}}
	if o.Mode != "" {
		q.Set("mode", o.Mode)
	}
	if o.Mkdir {
		q.Set("mkdir", "true")
	}
	if o.User != "" {
		q.Set("user", o.User)
	}
	p := withQuery("/v1/files", q)
	if data == nil {
		data = []byte{}
	}
	a, err := c.do(ctx, http.MethodPut, p, data,
		map[string]string{"Content-Type": "application/octet-stream"}, true)
	if err != nil {
		return nil, err
	}
	if a.status != 200 {
		return nil, apiError(http.MethodPut, p, a)
	}
	var fw FileWritten
	if err := json.Unmarshal(a.body, &fw); err != nil {
		return nil, err
	}
	return &fw, nil
}

// Stat is POST /v1/files/stat.
func (c *Client) Stat(ctx context.Context, paths []string, user string) ([]StatResult, error) {
	body := map[string]interface{}{"paths": paths}
	if user != "" {
		body["user"] = user
	}
	var out struct {
		Results []StatResult `json:"results"`
	}
	_, err := c.call(ctx, http.MethodPost, "/v1/files/stat", body, 200, &out, true)
	return out.Results, err
}

// Fetch is POST /v1/files/fetch.
func (c *Client) Fetch(ctx context.Context, r FetchRequest) (*FileWritten, error) {
	var fw FileWritten
	if _, err := c.call(ctx, http.MethodPost, "/v1/files/fetch", r, 200, &fw, false); err != nil {
		return nil, err
	}
	return &fw, nil
}

// Events is GET /v1/events (issue 23).
func (c *Client) Events(ctx context.Context, o EventsOptions) (*EventPage, error) {
	q := url.Values{}
	q.Set("cursor", strconv.FormatUint(o.Cursor, 10))
	if o.WaitMs > 0 {
		q.Set("wait_ms", strconv.Itoa(o.WaitMs))
	}
	if o.Session != "" {
		q.Set("session", o.Session)
	}
	if len(o.Types) > 0 {
		q.Set("types", strings.Join(o.Types, ","))
	}
	var p EventPage
	if _, err := c.call(ctx, http.MethodGet, withQuery("/v1/events", q), nil, 200, &p, true); err != nil {
		return nil, err
	}
	return &p, nil
}

// Ports is GET /v1/ports (issue 23); port > 0 with waitMs waits for it.
func (c *Client) Ports(ctx context.Context, port, waitMs int) ([]Port, error) {
	q := url.Values{}
	if port > 0 {
		q.Set("port", strconv.Itoa(port))
	}
	if waitMs > 0 {
		q.Set("wait_ms", strconv.Itoa(waitMs))
	}
	var out struct {
		Ports []Port `json:"ports"`
	}
	_, err := c.call(ctx, http.MethodGet, withQuery("/v1/ports", q), nil, 200, &out, true)
	return out.Ports, err
}

// SandboxResumed is POST /v1/sandbox/resumed (issue 22).
func (c *Client) SandboxResumed(ctx context.Context, r ResumedRequest) (*Resumed, error) {
	var out Resumed
	if _, err := c.call(ctx, http.MethodPost, "/v1/sandbox/resumed", r, 200, &out, false); err != nil {
		return nil, err
	}
	return &out, nil
}

// SandboxPause is POST /v1/sandbox/pause (issue 22); it returns the generation.
func (c *Client) SandboxPause(ctx context.Context) (uint64, error) {
	var out struct {
		Generation uint64 `json:"generation"`
	}
	_, err := c.call(ctx, http.MethodPost, "/v1/sandbox/pause", nil, 200, &out, true)
	return out.Generation, err
}

// DebugStat is GET /debug/stat (the unix socket only), as raw JSON.
func (c *Client) DebugStat(ctx context.Context) (json.RawMessage, error) {
	a, err := c.call(ctx, http.MethodGet, "/debug/stat", nil, 200, nil, true)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(a.body), nil
}

// DebugLogs is GET /debug/logs?format=text (the unix socket only).
func (c *Client) DebugLogs(ctx context.Context) (string, error) {
	a, err := c.call(ctx, http.MethodGet, "/debug/logs?format=text", nil, 200, nil, true)
	if err != nil {
		return "", err
	}
	return string(a.body), nil
}

// Follow reads a session from cursor until its output ends (eof), calling
// onChunk for each chunk in order and onGap (when not nil) with the number of
// chunks evicted before they could be read; every chunk comes exactly once,
// also across connection failures. It returns the last window.
func (c *Client) Follow(ctx context.Context, id string, cursor uint64,
	onChunk func(Chunk) error, onGap func(dropped uint64) error) (*SessionWindow, error) {
	for {
		w, err := c.Read(ctx, id, ReadOptions{Cursor: cursor, Budget: Budget{WaitMs: 30000}})
		if err != nil {
			return nil, err
		}
		if w.DroppedChunks > 0 && onGap != nil {
			if err := onGap(w.DroppedChunks); err != nil {
				return w, err
			}
		}
		for _, ch := range w.Output {
			if err := onChunk(ch); err != nil {
				return w, err
			}
		}
		cursor = w.Cursor
		if w.EOF {
			return w, nil
		}
	}
}
