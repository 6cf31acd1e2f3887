package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// lines is "line 1\n" .. "line n\n".
func lines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

// A reader whose connections are cut in the middle of answers resumes from
// its cursor: every byte once, in order.
func TestFollowAcrossCutConnections(t *testing.T) {
	a := startAgentd(t)
	ctx := testCtx(t)
	direct := a.tcp(t)
	p := newCutter(t, a.addr, 3)
	c, err := New(p.url(), Options{Token: a.token, Retries: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	w, err := direct.Create(ctx, CreateRequest{
		Cmd: "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo \"line $i\"; " +
			"[ $((i % 100)) -eq 0 ] && sleep 0.02; done",
		RingBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	gaps := 0
	end, err := c.Follow(ctx, w.ID, 0, func(ch Chunk) error {
		if ch.Offset != uint64(got.Len()) {
			return fmt.Errorf("chunk %d at offset %d, expected %d", ch.ID, ch.Offset, got.Len())
		}
		got.Write(ch.Data)
		return nil
	}, func(uint64) error { gaps++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if gaps != 0 || got.String() != lines(3000) || *end.ExitCode != 0 {
		t.Fatalf("gaps %d, %d bytes, want %d", gaps, got.Len(), len(lines(3000)))
	}
	if atomic.LoadInt64(&p.cuts) < 3 {
		t.Fatalf("the proxy cut only %d connections", p.cuts)
	}
	t.Logf("%d connections, %d cut", p.conns, p.cuts)
}

// The tools go on across cut connections: exec_command's create answer lost
// (it reads the session by its id), polls resent; no output lost or repeated.
func TestToolsAcrossCutConnections(t *testing.T) {
	a := startAgentd(t)
	ctx := testCtx(t)
	p := newCutter(t, a.addr, 3)
	c, err := New(p.url(), Options{Token: a.token, Retries: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 5; i++ {
		atomic.StoreInt32(&p.force, int32(i%2)) // the create's answer is lost
		r, err := c.ExecCommand(ctx, ExecArgs{
			Cmd:             "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); echo \"line $i\"; done",
			MaxOutputTokens: 1 << 20, YieldTimeMs: 20000})
		if err != nil {
			t.Fatal(err)
		}
		if r.Running || *r.ExitCode != 0 || r.OmittedBytes != 0 || r.Output != lines(2000) {
			t.Fatalf("run %d: running %v, %d bytes, omitted %d", i, r.Running, len(r.Output), r.OmittedBytes)
		}
	}
	// A command still running, polled through write_stdin with no chars.
	r, err := c.ExecCommand(ctx, ExecArgs{
		Cmd: "i=0; while [ $i -lt 1500 ]; do i=$((i+1)); echo \"line $i\"; " +
			"[ $((i % 100)) -eq 0 ] && sleep 0.1; done", YieldTimeMs: 250, MaxOutputTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	out := r.Output
	for polls := 0; r.Running; polls++ {
		if polls > 200 {
			t.Fatal("still running after 200 polls")
		}
		if r, err = c.WriteStdin(ctx, WriteStdinArgs{SessionID: r.SessionID, YieldTimeMs: 300,
			MaxOutputTokens: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		out += r.Output
	}
	if out != lines(1500) {
		t.Fatalf("%d bytes, want %d", len(out), len(lines(1500)))
	}
	if atomic.LoadInt64(&p.cuts) < 3 {
		t.Fatalf("the proxy cut only %d connections", p.cuts)
	}
	t.Logf("%d connections, %d cut", p.conns, p.cuts)
}

// A stdin write whose answer is lost after agentd took the bytes: without
// an offset it is not sent again (ErrStdinUncertain, written once); with one
// (Stdin, StdinRawAt) it is, and agentd answers the repeat as a duplicate.
// cat echoes every line exactly once.
func TestStdinAcrossLostAnswers(t *testing.T) {
	a := startAgentd(t)
	ctx := testCtx(t)
	direct := a.tcp(t)
	p := newCutter(t, a.addr, 0)
	atomic.StoreInt32(&p.stdinEvery, 2) // each write's first try
	c, err := New(p.url(), Options{Token: a.token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := direct.Create(ctx, CreateRequest{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stdin(ctx, w.ID, StdinRequest{Text: "line 1\n"}); !errors.Is(err, ErrStdinUncertain) {
		t.Fatalf("a write without offset, its answer lost: %v", err)
	}
	atomic.StoreInt64(&p.stdinReqs, 0)
	off := uint64(len("line 1\n"))
	for i := 2; i <= 10; i++ {
		line := fmt.Sprintf("line %d\n", i)
		var in *StdinAnswer
		if i%2 == 0 {
			in, err = c.Stdin(ctx, w.ID, StdinRequest{Text: line, Offset: &off})
		} else {
			in, err = c.StdinRawAt(ctx, w.ID, []byte(line), off, false, Budget{})
		}
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		off += uint64(len(line))
		if in.Written != 0 || !in.Duplicate || *in.StdinBytes != off {
			t.Fatalf("line %d: the resend answered %+v", i, in)
		}
	}
	if got := echoed(t, ctx, direct, w.ID); got != lines(10) {
		t.Fatalf("cat echoed %q", got)
	}
	if n := atomic.LoadInt64(&p.stdinCuts); n != 10 {
		t.Fatalf("the proxy dropped %d stdin answers, want 10", n)
	}
}

// echoed ends the stdin of id (a cat) and returns all that it wrote.
func echoed(t *testing.T, ctx context.Context, c *Client, id string) string {
	t.Helper()
	if _, err := c.Stdin(ctx, id, StdinRequest{EOF: true}); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if _, err := c.Follow(ctx, id, 0, func(ch Chunk) error { got.Write(ch.Data); return nil }, nil); err != nil {
		t.Fatal(err)
	}
	return got.String()
}

// WriteStdin across lost stdin answers: each write's first try is taken by
// agentd and its answer dropped, and the resend lands as a duplicate. On a
// session the tools did not start they read stdin_bytes first (7 here: a
// line written directly); on one ExecCommand started they have it from the
// create. cat echoes every line exactly once.
func TestWriteStdinAcrossLostAnswers(t *testing.T) {
	a := startAgentd(t)
	ctx := testCtx(t)
	direct := a.tcp(t)
	p := newCutter(t, a.addr, 0)
	c, err := New(p.url(), Options{Token: a.token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := direct.Create(ctx, CreateRequest{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Stdin(ctx, w.ID, StdinRequest{Text: "line 1\n"}); err != nil {
		t.Fatal(err)
	}
	e, err := c.ExecCommand(ctx, ExecArgs{Cmd: "cat", YieldTimeMs: 250})
	if err != nil || !e.Running {
		t.Fatalf("%+v %v", e, err)
	}
	atomic.StoreInt32(&p.stdinEvery, 2)
	out := ""
	for i := 2; i <= 6; i++ {
		line := fmt.Sprintf("line %d\n", i)
		if _, err := c.WriteStdin(ctx, WriteStdinArgs{SessionID: w.ID, Chars: line}); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		r, err := c.WriteStdin(ctx, WriteStdinArgs{SessionID: e.SessionID, Chars: line})
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		out += r.Output
	}
	if n := atomic.LoadInt64(&p.stdinCuts); n != 10 {
		t.Fatalf("the proxy dropped %d stdin answers, want 10", n)
	}
	if _, err := direct.Stdin(ctx, e.SessionID, StdinRequest{EOF: true}); err != nil {
		t.Fatal(err)
	}
	if got := echoed(t, ctx, direct, w.ID); got != lines(6) {
		t.Fatalf("cat echoed %q", got)
	}
	r, err := c.WriteStdin(ctx, WriteStdinArgs{SessionID: e.SessionID, YieldTimeMs: 5000})
	if err != nil || r.Running {
		t.Fatalf("%+v %v", r, err)
	}
	if out += r.Output; out != lines(6)[len("line 1\n"):] {
		t.Fatalf("exec_command's cat echoed %q", out)
	}
}

// WriteStdin reads stdin_bytes again after a write whose outcome stayed
// unknown (no retries here), so its next write neither repeats nor leaves a
// gap; a count that no longer holds (the session deleted and created again
// under its id) gives stdin_offset_mismatch once, then agentd's count.
func TestWriteStdinUncertainAndMismatch(t *testing.T) {
	a := startAgentd(t)
	ctx := testCtx(t)
	direct := a.tcp(t)
	p := newCutter(t, a.addr, 0)
	c, err := New(p.url(), Options{Token: a.token, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := direct.Create(ctx, CreateRequest{ID: "u", Argv: []string{"cat"}}); err != nil {
		t.Fatal(err)
	}
	atomic.StoreInt32(&p.stdinEvery, 2)
	if _, err := c.WriteStdin(ctx, WriteStdinArgs{SessionID: "u", Chars: "a\n"}); !errors.Is(err, ErrStdinUncertain) {
		t.Fatalf("the answer lost, no retries: %v", err)
	}
	if _, err := c.WriteStdin(ctx, WriteStdinArgs{SessionID: "u", Chars: "b\n"}); err != nil {
		t.Fatal(err)
	}
	atomic.StoreInt32(&p.stdinEvery, 0)
	if got := echoed(t, ctx, direct, "u"); got != "a\nb\n" {
		t.Fatalf("cat echoed %q", got)
	}

	// A session with no output, so that the tools' cursor (0) stays valid
	// for the next one of that id.
	if _, err := direct.Create(ctx, CreateRequest{ID: "job", Cmd: "cat >/dev/null"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WriteStdin(ctx, WriteStdinArgs{SessionID: "job", Chars: "a\n"}); err != nil {
		t.Fatal(err)
	}
	echoed(t, ctx, direct, "job")
	if _, err := direct.Delete(ctx, "job", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Create(ctx, CreateRequest{ID: "job", Argv: []string{"cat"}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.WriteStdin(ctx, WriteStdinArgs{SessionID: "job", Chars: "c\n"})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Code != "stdin_offset_mismatch" ||
		apiErr.StdinBytes == nil || *apiErr.StdinBytes != 0 {
		t.Fatalf("a count past the session's: %v", err)
	}
	r, err := c.WriteStdin(ctx, WriteStdinArgs{SessionID: "job", Chars: "c\n", YieldTimeMs: 1000})
	if err != nil || r.Output != "c\n" {
		t.Fatalf("%+v %v", r, err)
	}
	if got := echoed(t, ctx, direct, "job"); got != "c\n" {
		t.Fatalf("cat echoed %q", got)
	}
}
