package client

import "testing"

// StartAgentdForTest starts a real agentd (env AGENTD) for one test of the
// package client_test and returns its URL and token.
func StartAgentdForTest(t *testing.T) (url, token string) {
	a := startAgentd(t)
	return "http://" + a.addr, a.token
}
