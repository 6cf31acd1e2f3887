package client

import (
	"bytes"
	"fmt"
	"io"
	"math/rand"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// streamCutter is a TCP proxy that closes each connection after a random
// number (min..min+span) of bytes from agentd: a stream cut anywhere.
func streamCutter(t *testing.T, upstream string, min, span int) (string, *int64) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var cuts int64
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	budgets := make(chan int64, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			budgets <- int64(min + rng.Intn(span))
			go func(c net.Conn, budget int64) {
				defer c.Close()
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { io.Copy(u, c); u.Close() }()
				if n, _ := io.CopyN(c, u, budget); n == budget {
					atomic.AddInt64(&cuts, 1)
				}
			}(c, <-budgets)
		}
	}()
	t.Cleanup(func() { l.Close() })
	return "http://" + l.Addr().String(), &cuts
}

func TestStream(t *testing.T) {
	a := startAgentd(t)
	ctx := testCtx(t)
	direct := a.tcp(t)
	url, cuts := streamCutter(t, a.addr, 300, 20000)
	c, err := New(url, Options{Token: a.token, Retries: 1000, RetryBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, sc := range []*Client{direct, c} {
		w, err := direct.Create(ctx, CreateRequest{
			Cmd: "i=0; while [ $i -lt 3000 ]; do i=$((i+1)); echo \"line $i\"; " +
				"[ $((i % 100)) -eq 0 ] && sleep 0.02; done; exit 7",
			RingBytes: 4 << 20})
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		s, err := sc.Stream(ctx, w.ID, 0, func(ch Chunk) error {
			if ch.Offset != uint64(got.Len()) {
				return fmt.Errorf("chunk %d at offset %d, expected %d", ch.ID, ch.Offset, got.Len())
			}
			got.Write(ch.Data)
			return nil
		}, func(uint64) error { return fmt.Errorf("a gap") })
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != lines(3000) || s.ExitCode == nil || *s.ExitCode != 7 {
			t.Fatalf("%d bytes, session %+v", got.Len(), s)
		}
	}
	if atomic.LoadInt64(cuts) < 2 {
		t.Fatalf("the proxy cut %d streams", *cuts)
	}
	t.Logf("%d streams cut", *cuts)
	if _, err := direct.Stream(ctx, "nope", 0, func(Chunk) error { return nil }, nil); !IsCode(err, "not_found") {
		t.Fatalf("unknown session: %v", err)
	}
}
