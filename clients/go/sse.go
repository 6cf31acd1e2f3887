package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// sseEvent is one event of a Server-Sent Events stream.
type sseEvent struct {
	id, event string
	data      []byte
}

// sse opens path as an event stream (after lastID when set) and calls fn
// for each event until fn says stop, the stream ends or fails.
func (c *Client) sse(ctx context.Context, path, lastID string,
	fn func(sseEvent) (stop bool, err error)) (stopped bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, &ConnError{"GET", path, err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		a := &answer{status: resp.StatusCode, header: resp.Header}
		var b strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		a.body = []byte(b.String())
		return false, apiError("GET", path, a)
	}
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var ev sseEvent
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return false, &ConnError{"GET", path, err}
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if ev.event != "" || ev.data != nil {
				if stop, err := fn(ev); stop || err != nil {
					return stop, err
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				ev.id = v
			case "event":
				ev.event = v
			case "data":
				if ev.data != nil {
					ev.data = append(ev.data, '\n')
				}
				ev.data = append(ev.data, v...)
			}
		}
	}
}

// Stream reads a session's output as Server-Sent Events from cursor until
// the session's exit event, calling onChunk for each chunk and onGap (when
// not nil) for chunks dropped before they were sent. A broken stream is
// opened again after the last event id seen (Last-Event-ID): no chunk is
// lost or repeated. It returns the session object of the exit event.
func (c *Client) Stream(ctx context.Context, id string, cursor uint64,
	onChunk func(Chunk) error, onGap func(dropped uint64) error) (*Session, error) {
	q := url.Values{"cursor": {strconv.FormatUint(cursor, 10)}}
	path := withQuery(sessionPath(id, ""), q)
	last := ""
	var final *Session
	pause := c.backoff
	for try := 0; ; try++ {
		stopped, err := c.sse(ctx, path, last, func(ev sseEvent) (bool, error) {
			switch ev.event {
			case "output":
				var ch Chunk
				if err := json.Unmarshal(ev.data, &ch); err != nil {
					return false, err
				}
				if err := onChunk(ch); err != nil {
					return false, err
				}
			case "gap":
				var g struct {
					Dropped uint64 `json:"dropped_chunks"`
				}
				if err := json.Unmarshal(ev.data, &g); err != nil {
					return false, err
				}
				if onGap != nil {
					if err := onGap(g.Dropped); err != nil {
						return false, err
					}
				}
			case "exit":
				final = &Session{}
				if err := json.Unmarshal(ev.data, final); err != nil {
					return false, err
				}
				return true, nil
			}
			if ev.id != "" {
				last = ev.id
			}
			return false, nil
		})
		if stopped {
			return final, nil
		}
		var ce *ConnError
		if err == nil {
			err = &ConnError{"GET", path, fmt.Errorf("stream ended before the exit event")}
		}
		if !errors.As(err, &ce) || try >= c.retries || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		if pause *= 2; pause > 2*time.Second {
			pause = 2 * time.Second
		}
	}
}
