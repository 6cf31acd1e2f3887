package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The tools' bounds, as Codex's unified exec has them.
const (
	DefaultExecYieldMs   = 10000
	DefaultStdinYieldMs  = 250
	MinYieldMs           = 250
	MaxYieldMs           = 30000
	DefaultMaxOutTokens  = 10000
	BytesPerToken        = 4
	toolPollPause        = 100 * time.Millisecond
	omittedMarkerPattern = "\n[... %d bytes omitted ...]\n"
)

// toolState is what the tools remember of a session: the cursor of the last
// output handed to the model and the offset that follows it (under
// Client.mu), and the session's stdin count as last learnt (under stdinMu,
// which also keeps the tools' writes to the session one at a time).
type toolState struct {
	cursor uint64
	next   uint64

	stdinMu    sync.Mutex
	stdin      uint64 // stdin_bytes, when stdinKnown
	stdinKnown bool
}

// collector keeps the head and the tail of a run of output within a byte
// budget. Pieces come in offset order; a piece that does not start where the
// last ended (a head_tail cut, an eviction) leaves a gap: the head stops
// growing at the first gap and the tail restarts after each one, so
// everything not kept lies between head and tail.
type collector struct {
	budget int
	head   []byte
	tail   []byte
	sealed bool   // the head takes no more bytes
	total  int64  // bytes of the run, gaps included
	next   uint64 // the offset that follows the last byte seen
}

// newCollector starts a run at offset next (output before it was seen).
func newCollector(budget int, next uint64) *collector {
	return &collector{budget: budget, next: next}
}

// add takes a piece of output at offset.
func (c *collector) add(offset uint64, data []byte) {
	if offset > c.next {
		c.total += int64(offset - c.next)
		c.sealed = true
		c.tail = c.tail[:0]
	} else if offset < c.next {
		// Already seen (cannot happen with one cursor); skip the overlap.
		skip := c.next - offset
		if skip >= uint64(len(data)) {
			return
		}
		data = data[skip:]
		offset = c.next
	}
	c.next = offset + uint64(len(data))
	c.total += int64(len(data))
	hb := c.budget / 2
	if !c.sealed && len(c.head) < hb {
		n := hb - len(c.head)
		if n > len(data) {
			n = len(data)
		}
		c.head = append(c.head, data[:n]...)
		data = data[n:]
		if len(data) == 0 {
			return
		}
	}
	c.sealed = true
	c.tail = append(c.tail, data...)
	if tb := c.budget - len(c.head); len(c.tail) > tb {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-tb:]...)
	}
}

// render gives the output with the omitted amount said between head and
// tail; cuts never split a UTF-8 sequence (the bytes dropped for it count).
func (c *collector) render() (string, int64) {
	head, tail := c.head, c.tail
	omitted := c.total - int64(len(head)) - int64(len(tail))
	if omitted == 0 {
		return string(append(append([]byte{}, head...), tail...)), 0
	}
	for n := 0; n < utf8.UTFMax && len(head) > 0; n++ {
		r, size := utf8.DecodeLastRune(head)
		if r != utf8.RuneError || size > 1 {
			break
		}
		head = head[:len(head)-1]
	}
	for n := 0; n < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); n++ {
		tail = tail[1:]
	}
	omitted = c.total - int64(len(head)) - int64(len(tail))
	return string(head) + fmt.Sprintf(omittedMarkerPattern, omitted) + string(tail), omitted
}

// feed adds a window's chunks.
func (c *collector) feed(w *Window) {
	for _, ch := range w.Output {
		c.add(ch.Offset, ch.Data)
	}
}

func clampYield(ms, def int) int {
	if ms <= 0 {
		ms = def
	}
	if ms < MinYieldMs {
		ms = MinYieldMs
	}
	if ms > MaxYieldMs {
		ms = MaxYieldMs
	}
	return ms
}

func budgetBytes(tokens int) int {
	if tokens <= 0 {
		tokens = DefaultMaxOutTokens
	}
	return tokens * BytesPerToken
}

func newSessionID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "exec-" + hex.EncodeToString(b[:])
}

// ExecCommand is the exec_command tool: start Cmd through a shell and wait
// up to YieldTimeMs for it to end. A command that ends comes back with its
// exit code; one still running comes back Running with its SessionID, for
// WriteStdin. The output is cut to MaxOutputTokens (head and tail kept).
// If the connection fails, the call goes on by the session's id (chosen
// here): from cursor 0, with nothing lost or repeated.
func (c *Client) ExecCommand(ctx context.Context, a ExecArgs) (*ExecResult, error) {
	t0 := time.Now()
	yield := clampYield(a.YieldTimeMs, DefaultExecYieldMs)
	budget := budgetBytes(a.MaxOutputTokens)
	id := a.SessionID
	if id == "" {
		id = newSessionID()
	}
	req := CreateRequest{ID: id, Cmd: a.Cmd, Shell: a.Shell, Login: a.Login,
		Tty: a.Tty, Cwd: a.Workdir, Env: a.Env,
		Budget: Budget{YieldMs: yield, MaxBytes: int64(budget), HeadTail: true}}
	col := newCollector(budget, 0)
	deadline := t0.Add(time.Duration(yield) * time.Millisecond)
	var w *SessionWindow
	var err error
	for try := 0; ; try++ {
		w, err = c.Create(ctx, req)
		var ce *ConnError
		if err == nil || !errors.As(err, &ce) || try >= c.retries {
			break
		}
		// The answer was lost: did the create arrive? Read it by its id.
		w, err = c.Read(ctx, id, ReadOptions{Budget: Budget{MaxBytes: int64(budget), HeadTail: true}})
		if err == nil || !IsCode(err, "not_found") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	col.feed(&w.Window)
	st := &toolState{cursor: w.Cursor, next: col.next}
	if w.StdinBytes != nil {
		st.stdin, st.stdinKnown = *w.StdinBytes, true
	}
	c.mu.Lock()
	c.tools[id] = st
	c.mu.Unlock()
	if w.Running() && time.Now().Before(deadline) {
		if w, err = c.pollUntil(ctx, id, st, col, deadline, budget); err != nil {
			return nil, err
		}
	}
	return result(id, &w.Session, col, t0), nil
}

// WriteStdin is the write_stdin tool: write Chars to the session (none: only
// poll), then hand back the output since the last call, waiting up to
// YieldTimeMs or until the command ends.
//
// Chars go exactly once (API.md's exactly-once stdin): the write carries
// the session's stdin count as its offset and is resent after a connection
// failure. The count comes from a session object (ExecCommand's create, or
// a read before the first write to a session the tools did not start),
// then from each answer. After a failed write (ErrStdinUncertain: every
// try's connection broke, its outcome unknown) the count is read again
// before the next write; a 409 stdin_offset_mismatch is returned once, and
// the next call writes at agentd's count. The tools assume they are the
// session's only stdin writer: bytes written by others (Stdin, another
// client) while the tools' count is known make the tools' next write look
// like a repeat, and agentd drops it (or its first bytes).
func (c *Client) WriteStdin(ctx context.Context, a WriteStdinArgs) (*ExecResult, error) {
	t0 := time.Now()
	yield := clampYield(a.YieldTimeMs, DefaultStdinYieldMs)
	budget := budgetBytes(a.MaxOutputTokens)
	c.mu.Lock()
	st := c.tools[a.SessionID]
	if st == nil {
		st = &toolState{}
		c.tools[a.SessionID] = st
	}
	next := st.next
	c.mu.Unlock()
	if a.Chars != "" {
		if err := c.toolWrite(ctx, a.SessionID, st, a.Chars); err != nil {
			return nil, err
		}
	}
	col := newCollector(budget, next)
	w, err := c.pollUntil(ctx, a.SessionID, st, col, t0.Add(time.Duration(yield)*time.Millisecond), budget)
	if err != nil {
		return nil, err
	}
	return result(a.SessionID, &w.Session, col, t0), nil
}

// toolStdin is the tools' stdin body. Its max_bytes is 0: the window that
// comes back (one chunk at most) is not used, and a small max_bytes would
// make the session publish a chunk per read from then on (API.md).
type toolStdin struct {
	Text     string  `json:"text"`
	Offset   *uint64 `json:"offset,omitempty"`
	MaxBytes int64   `json:"max_bytes"`
}

// toolWrite writes chars to the session at st's stdin count (read first
// when not known) and keeps the count (WriteStdin).
func (c *Client) toolWrite(ctx context.Context, id string, st *toolState, chars string) error {
	st.stdinMu.Lock()
	defer st.stdinMu.Unlock()
	if !st.stdinKnown {
		s, err := c.session(ctx, id)
		if err != nil {
			return err
		}
		if s.StdinBytes != nil {
			st.stdin, st.stdinKnown = *s.StdinBytes, true
		}
	}
	r := toolStdin{Text: chars}
	if st.stdinKnown { // else an agentd without stdin_bytes: no offset
		off := st.stdin
		r.Offset = &off
	}
	in, err := c.stdin(ctx, id, r, r.Offset != nil)
	var e *Error
	switch {
	case err == nil:
		st.stdinKnown = in.StdinBytes != nil
		if st.stdinKnown {
			st.stdin = *in.StdinBytes
		}
	case errors.As(err, &e) && e.Code == "stdin_offset_mismatch" && e.StdinBytes != nil:
		st.stdin = *e.StdinBytes
	default:
		// ErrStdinUncertain, a cancelled ctx, or an error answer to a resend
		// whose first try may have arrived: read the count again.
		st.stdinKnown = false
	}
	return err
}

// session is GET /v1/sessions/{id} for the session object (max_bytes=0:
// at most one chunk comes with it).
func (c *Client) session(ctx context.Context, id string) (*Session, error) {
	var w SessionWindow
	path := withQuery(sessionPath(id, ""), url.Values{"max_bytes": {"0"}})
	if _, err := c.call(ctx, http.MethodGet, path, nil, 200, &w, true); err != nil {
		return nil, err
	}
	return &w.Session, nil
}

// pollUntil reads from st's cursor into col until the session has ended
// and its output is read, or the deadline; st follows.
func (c *Client) pollUntil(ctx context.Context, id string, st *toolState, col *collector,
	deadline time.Time, budget int) (*SessionWindow, error) {
	for {
		left := time.Until(deadline)
		wait := int(left / time.Millisecond)
		if wait < 0 {
			wait = 0
		}
		c.mu.Lock()
		cursor := st.cursor
		c.mu.Unlock()
		w, err := c.Read(ctx, id, ReadOptions{Cursor: cursor,
			Budget: Budget{WaitMs: wait, MaxBytes: int64(budget), HeadTail: true}})
		if err != nil {
			return nil, err
		}
		col.feed(&w.Window)
		c.mu.Lock()
		st.cursor, st.next = w.Cursor, col.next
		c.mu.Unlock()
		if w.EOF || (!w.Running() && len(w.Output) == 0) || time.Until(deadline) <= 0 {
			return w, nil
		}
		if len(w.Output) > 0 {
			// Let output gather rather than answering chunk by chunk.
			p := toolPollPause
			if left := time.Until(deadline); left < p {
				p = left
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(p):
			}
		}
	}
}

func result(id string, s *Session, col *collector, t0 time.Time) *ExecResult {
	out, omitted := col.render()
	r := &ExecResult{SessionID: id, Running: s.Running(), Output: out,
		OmittedBytes: omitted, OriginalBytes: col.total, WallTime: time.Since(t0)}
	if !r.Running {
		r.ExitCode = s.ExitCode
	}
	return r
}

// Text is the result as a tool hands it to the model: the session id, then
// "exit code N" or "still running", then "N bytes omitted" when the output
// was cut, then the output.
func (r *ExecResult) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "session %s\n", r.SessionID)
	if r.Running || r.ExitCode == nil {
		b.WriteString("still running\n")
	} else {
		fmt.Fprintf(&b, "exit code %d\n", *r.ExitCode)
	}
	if r.OmittedBytes > 0 {
		fmt.Fprintf(&b, "%d bytes omitted\n", r.OmittedBytes)
	}
	b.WriteString(r.Output)
	return b.String()
}
