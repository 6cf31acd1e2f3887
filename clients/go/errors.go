package client

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Error is a non-2xx answer of agentd: {"error": {"code", "message"}}.
// Use errors.As to get it, or IsCode to test its code.
type Error struct {
	Status  int    // the HTTP status
	Code    string // API.md's code: "not_found", "session_exited", ...
	Message string
	// Session is the existing session of a 409 session_exists.
	Session *Session
	// StdinBytes is the stdin count of a 409 stdin_offset_mismatch (issue 24).
	StdinBytes *uint64
	Method     string
	Path       string
}

func (e *Error) Error() string {
	return fmt.Sprintf("agentd %s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, e.Message)
}

// ErrStdinUncertain: the connection failed while stdin was being written, so
// the bytes may or may not have reached the session. A write without an
// offset is never sent again; one with an offset was sent again
// (Options.Retries) and every try failed.
var ErrStdinUncertain = errors.New("agentd: stdin write interrupted, delivery unknown")

// IsCode tells whether err is (or wraps) an *Error with that code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// apiError turns a non-2xx answer into an *Error.
func apiError(method, path string, a *answer) error {
	var body struct {
		Error struct {
			Code       string  `json:"code"`
			Message    string  `json:"message"`
			StdinBytes *uint64 `json:"stdin_bytes"`
		} `json:"error"`
		Session *Session `json:"session"`
	}
	e := &Error{Status: a.status, Method: method, Path: path}
	if err := json.Unmarshal(a.body, &body); err != nil || body.Error.Code == "" {
		e.Code = "http_" + fmt.Sprint(a.status)
		e.Message = string(a.body)
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
		return e
	}
	e.Code, e.Message = body.Error.Code, body.Error.Message
	e.Session, e.StdinBytes = body.Session, body.Error.StdinBytes
	return e
}
