// Package client is a typed client for agentd's HTTP API (API.md; the
// machine-readable form is api/openapi.yaml), over TCP with a token or over
// the unix socket, standard library only.
//
// Besides one method per route it gives an agent platform its two tools,
// ExecCommand and WriteStdin, with Codex's unified-exec semantics: a command
// runs until it ends or YieldTimeMs passes; one still running keeps its
// session id for later WriteStdin calls; the output handed back is cut to the
// budget (MaxOutputTokens, about 4 bytes a token) keeping its head and its
// tail, and says how many bytes were left out between them.
//
// Reads follow a cursor: a client that loses its connection in the middle of
// an answer sends the same read again and gets the same chunks, so no output
// is lost or repeated (Follow, the tools' polls); Stream reads the same as
// Server-Sent Events and opens a broken stream again after its last event
// id. A write to stdin that carries an offset (StdinRequest.Offset,
// StdinRawAt; exactly-once stdin, API.md) is resent like a read, and agentd
// takes each byte once however often it arrives; one without an offset is
// never resent. A write whose connection stays broken returns
// ErrStdinUncertain. WriteStdin always writes at an offset, the session's
// stdin count as it keeps it, so its chars arrive once; it assumes it is
// the session's only stdin writer.
package client
