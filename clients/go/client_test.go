package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestRoutes(t *testing.T) {
	a := startAgentd(t)
	c := a.tcp(t)
	ctx := testCtx(t)

	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.PID <= 0 || h.Containment == "" || h.Generation == nil {
		t.Fatalf("health %+v %v", h, err)
	}
	w, err := c.Create(ctx, CreateRequest{ID: "job.1", Cmd: "echo out; echo err >&2; exit 3",
		Budget: Budget{YieldMs: 5000}})
	if err != nil {
		t.Fatal(err)
	}
	if w.ID != "job.1" || w.Running() || w.ExitCode == nil || *w.ExitCode != 3 ||
		w.OOMKilled == nil || *w.OOMKilled || w.Usage == nil {
		t.Fatalf("create: %+v", w.Session)
	}
	streams := map[string]string{}
	for _, ch := range w.Output {
		streams[ch.Stream] += string(ch.Data)
	}
	if streams["stdout"] != "out\n" || streams["stderr"] != "err\n" {
		t.Fatalf("streams %q", streams)
	}
	r, err := c.Read(ctx, "job.1", ReadOptions{})
	if err != nil || !r.EOF || r.Cursor != w.LastChunk {
		t.Fatalf("read %+v %v", r, err)
	}
	raw, err := c.ReadRaw(ctx, "job.1", 0, 0)
	if err != nil || string(raw.Data) != "out\nerr\n" && string(raw.Data) != "err\nout\n" ||
		!raw.EOF || raw.State != "exited" || raw.ExitCode == nil || *raw.ExitCode != 3 {
		t.Fatalf("raw %+v %v", raw, err)
	}
	list, err := c.ListSessions(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "job.1" {
		t.Fatalf("list %+v %v", list, err)
	}

	page, next, err := c.ListSessionsPage(ctx, 1, "")
	if err != nil || len(page) != 1 || next != "" {
		t.Fatalf("page %+v %q %v", page, next, err)
	}

	// Errors are typed and carry the API's code.
	_, err = c.Read(ctx, "nope", ReadOptions{})
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != "not_found" {
		t.Fatalf("unknown session: %v", err)
	}
	_, err = c.Read(ctx, "job.1", ReadOptions{Cursor: 999})
	if !IsCode(err, "invalid_cursor") {
		t.Fatalf("cursor past the end: %v", err)
	}
	_, err = c.Create(ctx, CreateRequest{ID: "job.1", Cmd: "true"})
	if !errors.As(err, &apiErr) || apiErr.Code != "session_exists" || apiErr.Session == nil ||
		apiErr.Session.ID != "job.1" {
		t.Fatalf("session_exists: %v", err)
	}
	if _, err = c.Signal(ctx, "job.1", "SIGINT", ""); !IsCode(err, "session_exited") {
		t.Fatalf("signal exited: %v", err)
	}

	// stdin on pipes, then eof.
	cat, err := c.Create(ctx, CreateRequest{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Stdin(ctx, cat.ID, StdinRequest{Text: "hello\n", Budget: Budget{WaitMs: 5000}})
	if err != nil || in.Written != 6 {
		t.Fatalf("stdin %+v %v", in, err)
	}
	in, err = c.StdinRaw(ctx, cat.ID, []byte("raw\n"), true, Budget{YieldMs: 5000})
	if err != nil || in.Written != 4 {
		t.Fatalf("stdin raw %+v %v", in, err)
	}
	var got bytes.Buffer
	end, err := c.Follow(ctx, cat.ID, 0, func(ch Chunk) error { got.Write(ch.Data); return nil }, nil)
	if err != nil || got.String() != "hello\nraw\n" || end.ExitCode == nil || *end.ExitCode != 0 {
		t.Fatalf("follow %q %+v %v", got.String(), end, err)
	}
	if _, err = c.Stdin(ctx, cat.ID, StdinRequest{Text: "x"}); !IsCode(err, "session_exited") {
		t.Fatalf("stdin after exit: %v", err)
	}

	// A tty: resize and signal, then delete.
	tty, err := c.Create(ctx, CreateRequest{Cmd: "sleep 60", Tty: true, Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Resize(ctx, tty.ID, 40, 120)
	if err != nil || s.Rows != 40 || s.Cols != 120 {
		t.Fatalf("resize %+v %v", s, err)
	}
	if _, err = c.Resize(ctx, cat.ID, 40, 120); !IsCode(err, "not_a_tty") && !IsCode(err, "session_exited") {
		t.Fatalf("resize pipes: %v", err)
	}
	if _, err = c.Signal(ctx, tty.ID, "SIGSTOP", "group"); err != nil {
		t.Fatal(err)
	}
	if _, err = c.Signal(ctx, tty.ID, "CONT", ""); err != nil {
		t.Fatal(err)
	}
	s, err = c.Delete(ctx, tty.ID, 500)
	if err != nil || s.Running() {
		t.Fatalf("delete %+v %v", s, err)
	}
	if _, err = c.Delete(ctx, tty.ID, -1); !IsCode(err, "not_found") {
		t.Fatalf("delete again: %v", err)
	}

	// Files.
	p := a.dir + "/work/sub/f.txt"
	fw, err := c.WriteFile(ctx, p, []byte("data\n"), FileWriteOptions{Mode: "0600", Mkdir: true})
	if err != nil || fw.Size != 5 || len(fw.SHA256) != 64 {
		t.Fatalf("put %+v %v", fw, err)
	}
	data, err := c.ReadFile(ctx, p, FileReadOptions{Offset: 1, Length: 3})
	if err != nil || string(data) != "ata" {
		t.Fatalf("get %q %v", data, err)
	}
	st, err := c.Stat(ctx, []string{p, a.dir + "/none"}, "")
	if err != nil || len(st) != 2 || !st[0].Exists || st[0].Mode != "0600" || st[0].Type != "file" ||
		st[1].Exists || st[1].Error != "ENOENT" {
		t.Fatalf("stat %+v %v", st, err)
	}
	if _, err = c.ReadFile(ctx, a.dir, FileReadOptions{}); !IsCode(err, "is_a_directory") {
		t.Fatalf("get dir: %v", err)
	}
	if _, err = c.ReadFile(ctx, "rel", FileReadOptions{}); !IsCode(err, "invalid_request") {
		t.Fatalf("relative: %v", err)
	}
	if _, err = c.Fetch(ctx, FetchRequest{URL: "http://" + a.addr + "/healthz", Path: "rel"}); !IsCode(err, "invalid_request") {
		t.Fatalf("fetch relative: %v", err)
	}
	m, err := c.Metrics(ctx)
	if err != nil || !strings.Contains(m, "agentd_sessions_started_total 3") {
		t.Fatalf("metrics: %v\n%s", err, m)
	}
}

func TestAuthAndUnixSocket(t *testing.T) {
	a := startAgentd(t)
	ctx := testCtx(t)
	bad, err := New("http://"+a.addr, Options{Token: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err = bad.ListSessions(ctx); !IsCode(err, "unauthorized") {
		t.Fatalf("wrong token: %v", err)
	}
	u := a.unix(t)
	if _, err = u.ListSessions(ctx); err != nil {
		t.Fatalf("unix socket: %v", err)
	}
	st, err := u.DebugStat(ctx)
	if err != nil || !bytes.Contains(st, []byte(`"pid"`)) {
		t.Fatalf("debug stat %s %v", st, err)
	}
	if _, err = a.tcp(t).DebugStat(ctx); !IsCode(err, "not_found") {
		t.Fatalf("debug over tcp: %v", err)
	}
	if _, err = New("unix://relative.sock", Options{}); err == nil {
		t.Fatal("a relative socket path was taken")
	}
}

func TestExecCommand(t *testing.T) {
	a := startAgentd(t)
	c := a.tcp(t)
	ctx := testCtx(t)

	r, err := c.ExecCommand(ctx, ExecArgs{Cmd: "echo hi; exit 3"})
	if err != nil || r.Running || r.ExitCode == nil || *r.ExitCode != 3 || r.Output != "hi\n" ||
		r.OmittedBytes != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	if !strings.HasPrefix(r.Text(), "session "+r.SessionID+"\nexit code 3\nhi\n") {
		t.Fatalf("text %q", r.Text())
	}

	// Cut head and tail, the omitted amount exact.
	var want strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	r, err = c.ExecCommand(ctx, ExecArgs{Cmd: "seq 1 100000", MaxOutputTokens: 100, YieldTimeMs: 20000})
	if err != nil || r.Running || *r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
	w := want.String()
	marker := fmt.Sprintf("\n[... %d bytes omitted ...]\n", r.OmittedBytes)
	i := strings.Index(r.Output, marker)
	if i < 0 || r.OriginalBytes != int64(len(w)) {
		t.Fatalf("no marker or wrong total: %d vs %d: %q", r.OriginalBytes, len(w), r.Output)
	}
	head, tail := r.Output[:i], r.Output[i+len(marker):]
	if len(head) != 200 || len(tail) != 200 || !strings.HasPrefix(w, head) || !strings.HasSuffix(w, tail) ||
		r.OmittedBytes != int64(len(w)-400) {
		t.Fatalf("head %d tail %d omitted %d", len(head), len(tail), r.OmittedBytes)
	}
	if !strings.Contains(r.Text(), fmt.Sprintf("\n%d bytes omitted\n", r.OmittedBytes)) {
		t.Fatalf("text %q", r.Text())
	}

	// A running command keeps its session id; write_stdin answers it.
	r, err = c.ExecCommand(ctx, ExecArgs{Cmd: "sh", Tty: true, YieldTimeMs: 500})
	if err != nil || !r.Running || r.ExitCode != nil {
		t.Fatalf("%+v %v", r, err)
	}
	id := r.SessionID
	if !strings.Contains(r.Text(), "still running\n") {
		t.Fatalf("text %q", r.Text())
	}
	r, err = c.WriteStdin(ctx, WriteStdinArgs{SessionID: id, Chars: "echo $((6*7))\n", YieldTimeMs: 1000})
	if err != nil || !r.Running || !strings.Contains(r.Output, "42") {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = c.WriteStdin(ctx, WriteStdinArgs{SessionID: id, Chars: "exit 5\n", YieldTimeMs: 5000})
	if err != nil || r.Running || r.ExitCode == nil || *r.ExitCode != 5 || strings.Contains(r.Output, "42") {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err = c.WriteStdin(ctx, WriteStdinArgs{SessionID: "nope", Chars: "x"}); !IsCode(err, "not_found") {
		t.Fatalf("unknown session: %v", err)
	}

	// The yield bounds the wait; a later poll gets what followed.
	t0 := time.Now()
	r, err = c.ExecCommand(ctx, ExecArgs{Cmd: "echo a; sleep 1.5; echo b", YieldTimeMs: 300})
	if err != nil || !r.Running || r.Output != "a\n" || time.Since(t0) > 1200*time.Millisecond {
		t.Fatalf("%+v %v after %v", r, err, time.Since(t0))
	}
	r, err = c.WriteStdin(ctx, WriteStdinArgs{SessionID: r.SessionID, YieldTimeMs: 5000})
	if err != nil || r.Running || r.Output != "b\n" || *r.ExitCode != 0 {
		t.Fatalf("%+v %v", r, err)
	}
}

// WriteStdin's own stdin write asked max_bytes 1, which makes the session
// publish one chunk per read from then on (API.md): 100 lines written while
// nobody looks came back as 100 chunks, not one.
func TestWriteStdinLeavesTheJoiningAlone(t *testing.T) {
	a := startAgentd(t)
	c := a.tcp(t)
	ctx := testCtx(t)

	r, err := c.ExecCommand(ctx, ExecArgs{Cmd: "read x; sleep 1; for i in $(seq 1 100); " +
		"do echo $i; sleep 0.002; done", YieldTimeMs: 250})
	if err != nil || !r.Running {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := c.WriteStdin(ctx, WriteStdinArgs{SessionID: r.SessionID, Chars: "go\n",
		YieldTimeMs: 250}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * time.Second) // nobody looks while the lines are written
	w, err := c.Read(ctx, r.SessionID, ReadOptions{})
	if err != nil || w.Session.Running() {
		t.Fatalf("%+v %v", w, err)
	}
	var got, want strings.Builder
	for _, ch := range w.Output {
		got.Write(ch.Data)
	}
	for i := 1; i <= 100; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if got.String() != want.String() || len(w.Output) >= 10 {
		t.Fatalf("%d chunks: %q", len(w.Output), got.String())
	}
}

func TestCollector(t *testing.T) {
	c := newCollector(10, 0)
	c.add(0, []byte("abc"))
	c.add(3, []byte("def"))
	if out, om := c.render(); out != "abcdef" || om != 0 {
		t.Fatalf("%q %d", out, om)
	}
	c.add(6, []byte("ghijklmnop")) // 16 bytes: head 5, tail 5
	out, om := c.render()
	if out != "abcde\n[... 6 bytes omitted ...]\nlmnop" || om != 6 {
		t.Fatalf("%q %d", out, om)
	}
	// A gap (eviction, head_tail cut) restarts the tail and counts.
	c = newCollector(10, 0)
	c.add(0, []byte("ab"))
	c.add(5, []byte("xyz"))
	if out, om := c.render(); out != "ab\n[... 3 bytes omitted ...]\nxyz" || om != 3 {
		t.Fatalf("%q %d", out, om)
	}
	// No cut inside a UTF-8 sequence.
	c = newCollector(6, 0)
	c.add(0, []byte("ééééé")) // 10 bytes: head "é" + half, tail half + "é"
	if out, om := c.render(); out != "é\n[... 6 bytes omitted ...]\né" || om != 6 {
		t.Fatalf("%q %d", out, om)
	}
}

func TestSandbox(t *testing.T) {
	a := startAgentd(t) // --clock-step 0: the machine's clock is never stepped
	c := a.tcp(t)
	ctx := testCtx(t)
	g, err := c.SandboxPause(ctx)
	if err != nil || g != 0 {
		t.Fatalf("pause %d %v", g, err)
	}
	r, err := c.SandboxResumed(ctx, ResumedRequest{})
	if err != nil || r.Generation != 1 || r.SameRestore || r.Clock != "none" {
		t.Fatalf("resumed %+v %v", r, err)
	}
	if _, err = c.SandboxResumed(ctx, ResumedRequest{Entropy: []byte("short")}); !IsCode(err, "invalid_request") {
		t.Fatalf("short entropy: %v", err)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Generation == nil || *h.Generation != 1 {
		t.Fatalf("health %+v %v", h, err)
	}
}

func TestEventDecoding(t *testing.T) {
	var p EventPage
	err := json.Unmarshal([]byte(`{"events": [{"id": 1, "type": "session.exited",
		"at": "2026-12-02T11:00:00.000Z", "session": "s1", "exit_code": 0, "signal": null,
		"timed_out": false, "oom_killed": false}], "cursor": 1, "dropped_events": 0}`), &p)
	if err != nil || len(p.Events) != 1 {
		t.Fatal(err)
	}
	e := p.Events[0]
	if e.ID != 1 || *e.Session != "s1" || *e.ExitCode != 0 || e.Signal != nil ||
		string(e.Fields["timed_out"]) != "false" || len(e.Fields) != 4 {
		t.Fatalf("%+v", e)
	}
}

func TestEvents(t *testing.T) {
	a := startAgentd(t)
	c := a.tcp(t)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, CreateRequest{ID: "ev", Cmd: "sleep 0.2; exit 4"}); err != nil {
		t.Fatal(err)
	}
	// One long-poll: "any of my sessions exited".
	p, err := c.Events(ctx, EventsOptions{WaitMs: 10000, Types: []string{"session.exited"}})
	if err != nil || len(p.Events) != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	e := p.Events[0]
	if e.Type != "session.exited" || *e.Session != "ev" || *e.ExitCode != 4 || p.Cursor < e.ID {
		t.Fatalf("%+v", e)
	}
	all, err := c.Events(ctx, EventsOptions{Session: "ev"})
	if err != nil || len(all.Events) != 2 || all.Events[0].Type != "session.created" ||
		all.DroppedEvents != 0 {
		t.Fatalf("%+v %v", all, err)
	}
	if _, err = c.Events(ctx, EventsOptions{Cursor: 999}); !IsCode(err, "invalid_cursor") {
		t.Fatalf("cursor past the newest: %v", err)
	}
}

func TestPorts(t *testing.T) {
	a := startAgentd(t)
	c := a.tcp(t)
	ctx := testCtx(t)
	w, err := c.Create(ctx, CreateRequest{ID: "srv", Argv: []string{"python3", "-c",
		"import socket, time\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\n" +
			"print(s.getsockname()[1], flush=True)\ntime.sleep(60)"}, Budget: Budget{WaitMs: 10000}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, ch := range w.Output {
		out.Write(ch.Data)
	}
	port, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("port %q: %v", out.String(), err)
	}
	ps, err := c.Ports(ctx, port, 10000)
	if err != nil || len(ps) != 1 || ps[0].Port != port || ps[0].Protocol != "tcp" ||
		ps[0].Session == nil || *ps[0].Session != "srv" || ps[0].PID == nil {
		t.Fatalf("%+v %v", ps, err)
	}
	all, err := c.Ports(ctx, 0, 0)
	if err != nil || len(all) == 0 {
		t.Fatalf("%+v %v", all, err)
	}
	if _, err = c.Ports(ctx, 70000, 0); !IsCode(err, "invalid_request") {
		t.Fatalf("port 70000: %v", err)
	}
	if _, err = c.Delete(ctx, "srv", 0); err != nil {
		t.Fatal(err)
	}
}

func TestChunkTextOrData(t *testing.T) {
	var w Window
	err := json.Unmarshal([]byte(`{"output": [
		{"id": 1, "stream": "stdout", "offset": 0, "text": "h\u00e9\u0000\n"},
		{"id": 2, "stream": "stdout", "offset": 5, "data": "/w=="}],
		"cursor": 2, "dropped_chunks": 0, "more": false, "eof": false}`), &w)
	if err != nil || len(w.Output) != 2 {
		t.Fatal(err)
	}
	if !w.Output[0].IsText || w.Output[0].Text() != "h\u00e9\x00\n" ||
		!bytes.Equal(w.Output[0].Data, []byte("h\xc3\xa9\x00\n")) {
		t.Fatalf("text chunk %+v", w.Output[0])
	}
	if w.Output[1].IsText || !bytes.Equal(w.Output[1].Data, []byte{0xff}) {
		t.Fatalf("data chunk %+v", w.Output[1])
	}
	if w.Text() != "h\u00e9\x00\n\xff" {
		t.Fatalf("window text %q", w.Text())
	}
}

func TestEncodingText(t *testing.T) {
	a := startAgentd(t)
	c := a.tcp(t)
	ctx := testCtx(t)

	w, err := c.Create(ctx, CreateRequest{Cmd: `printf 'h\303\251llo\n'`,
		Budget: Budget{YieldMs: 5000, Encoding: "text"}})
	if err != nil || len(w.Output) != 1 || !w.Output[0].IsText || w.Text() != "héllo\n" {
		t.Fatalf("create %+v %v", w, err)
	}
	// Windows of 2 bytes: the cursor goes on inside the chunk; every byte once.
	var got []byte
	cursor := uint64(0)
	for {
		r, err := c.Read(ctx, w.ID, ReadOptions{Cursor: cursor,
			Budget: Budget{MaxBytes: 2, Encoding: "text"}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, []byte(r.Text())...)
		cursor = r.Cursor
		if r.EOF {
			break
		}
	}
	if string(got) != "héllo\n" {
		t.Fatalf("read %q", got)
	}
}
