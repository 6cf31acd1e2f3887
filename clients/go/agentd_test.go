package client

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// agentd is one real agentd (env AGENTD) on a free port and a private socket.
type agentd struct {
	cmd    *exec.Cmd
	addr   string
	socket string
	token  string
	dir    string
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startAgentd starts agentd for one test and stops it (SIGTERM, exit 0) at
// its end. --clock-step 0: a restore reported by a test never steps the
// machine's clock.
func startAgentd(t *testing.T) *agentd {
	t.Helper()
	bin := os.Getenv("AGENTD")
	if bin == "" {
		t.Skip("AGENTD (path to the agentd binary) is not set")
	}
	dir := t.TempDir()
	a := &agentd{dir: dir, socket: filepath.Join(dir, "agentd.sock"),
		token: fmt.Sprintf("tok%d", rand.Int63())}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(a.token), 0o600); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		a.addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
		a.cmd = exec.Command(bin, "--listen", a.addr, "--socket", a.socket,
			"--token-file", filepath.Join(dir, "token"), "--workdir", work,
			"--shutdown-grace", "1000", "--clock-step", "0")
		logf, err := os.OpenFile(filepath.Join(dir, "stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		a.cmd.Stderr = logf
		a.cmd.Env = append(os.Environ(), "AGENTD_TOKEN=")
		err = a.cmd.Start()
		logf.Close()
		if err != nil {
			t.Fatal(err)
		}
		if a.waitReady() {
			break
		}
		a.cmd.Process.Kill()
		a.cmd.Wait()
		if try == 2 {
			t.Fatal("agentd did not start")
		}
	}
	t.Cleanup(func() {
		defer func() {
			if t.Failed() {
				log, _ := os.ReadFile(filepath.Join(dir, "stderr"))
				t.Logf("agentd stderr:\n%s", log)
			}
		}()
		a.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- a.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agentd exited with %v", err)
			}
		case <-time.After(15 * time.Second):
			a.cmd.Process.Kill()
			t.Error("agentd did not stop within 15 s of SIGTERM")
		}
	})
	return a
}

func (a *agentd) waitReady() bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r, err := http.Get("http://" + a.addr + "/healthz")
		if err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func (a *agentd) tcp(t *testing.T) *Client {
	c, err := New("http://"+a.addr, Options{Token: a.token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (a *agentd) unix(t *testing.T) *Client {
	c, err := New("unix://"+a.socket, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// cutter is a TCP proxy that cuts some answers in the middle: it reads each
// answer of agentd whole (every answer has Content-Length) and, with
// probability one in `every` (0: never), passes on a random part of it and
// closes both connections. A request sent again on a new connection gets
// through sooner or later, however large its answer.
//
// With stdinEvery n > 0 it also drops the whole answer of every n-th stdin
// request (the first, the n+1-th, ...) and closes both connections: agentd
// took the bytes, the client never hears so.
type cutter struct {
	l          net.Listener
	upstream   string
	every      int
	force      int32 // 1: cut the next answer
	stdinEvery int32
	stdinReqs  int64
	stdinCuts  int64
	cuts       int64
	conns      int64
	mu         sync.Mutex
	rng        *rand.Rand
}

func newCutter(t *testing.T, upstream string, every int) *cutter {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutter{l: l, upstream: upstream, every: every,
		rng: rand.New(rand.NewSource(time.Now().UnixNano()))}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			atomic.AddInt64(&p.conns, 1)
			go p.serve(c)
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return p
}

// cutAt is where to cut an answer of n bytes, or -1 to pass it whole.
func (p *cutter) cutAt(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n >= 2 && atomic.CompareAndSwapInt32(&p.force, 1, 0) {
		return 1 + p.rng.Intn(n-1)
	}
	if n < 2 || p.every <= 0 || p.rng.Intn(p.every) != 0 {
		return -1
	}
	return 1 + p.rng.Intn(n-1)
}

// dropAnswer tells whether the answer to the request whose head is req is
// to be dropped (stdinEvery).
func (p *cutter) dropAnswer(req []byte) bool {
	f := strings.Fields(string(req[:bytes.IndexByte(req, '\n')+1]))
	if len(f) < 2 || f[0] != "POST" {
		return false
	}
	path, _, _ := strings.Cut(f[1], "?")
	n := int64(atomic.LoadInt32(&p.stdinEvery))
	return strings.HasSuffix(path, "/stdin") && n > 0 &&
		(atomic.AddInt64(&p.stdinReqs, 1)-1)%n == 0
}

// readMessage reads one HTTP message whole: its head and its Content-Length
// bytes of body (requests and answers here have no other framing).
func readMessage(br *bufio.Reader) ([]byte, error) {
	var head bytes.Buffer
	length := 0
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		head.WriteString(line)
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok &&
			strings.EqualFold(k, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
		if line == "\r\n" {
			break
		}
	}
	if strings.HasPrefix(head.String(), "HTTP/1.1 100") {
		length = 0
	}
	msg := append(head.Bytes(), make([]byte, length)...)
	if _, err := io.ReadFull(br, msg[head.Len():]); err != nil {
		return nil, err
	}
	return msg, nil
}

func (p *cutter) serve(c net.Conn) {
	defer c.Close()
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer u.Close()
	// Requests go up whole, one by one; whether a request's answer is to be
	// dropped is queued before agentd has the request.
	drop := make(chan bool, 16)
	go func() {
		defer u.Close()
		bc := bufio.NewReader(c)
		for {
			req, err := readMessage(bc)
			if err != nil {
				return
			}
			drop <- p.dropAnswer(req)
			if _, err := u.Write(req); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReader(u)
	for {
		answer, err := readMessage(br)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(answer, []byte("HTTP/1.1 100")) {
			select {
			case d := <-drop:
				if d {
					atomic.AddInt64(&p.stdinCuts, 1)
					return
				}
			default: // an answer to no request (agentd closing)
			}
		}
		if at := p.cutAt(len(answer)); at >= 0 {
			c.Write(answer[:at])
			atomic.AddInt64(&p.cuts, 1)
			return
		}
		if _, err := c.Write(answer); err != nil {
			return
		}
	}
}

func (p *cutter) url() string { return "http://" + p.l.Addr().String() }
