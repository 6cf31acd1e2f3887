package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"agentd.dev/client"
)

// The Go example of docs/clients.md, run as it stands.
func readmeExample(url, token string, out io.Writer) error {
	c, err := client.New(url, client.Options{Token: token})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()

	// exec_command: a short command comes back with its exit code and output.
	r, err := c.ExecCommand(ctx, client.ExecArgs{Cmd: "echo hello; exit 3"})
	if err != nil {
		return err
	}
	fmt.Fprint(out, r.Text()) // session exec-…\nexit code 3\nhello\n

	// A shell on a tty keeps running; write_stdin answers it by its session id.
	sh, err := c.ExecCommand(ctx, client.ExecArgs{Cmd: "sh", Tty: true, YieldTimeMs: 500})
	if err != nil {
		return err
	}
	r, err = c.WriteStdin(ctx, client.WriteStdinArgs{
		SessionID: sh.SessionID, Chars: "echo $((6*7))\n", YieldTimeMs: 1000})
	if err != nil {
		return err
	}
	fmt.Fprint(out, r.Output) // echo $((6*7))\r\n42\r\n$

	// Errors are typed and carry the API's code.
	_, err = c.Read(ctx, "no-such-session", client.ReadOptions{})
	var apiErr *client.Error
	if errors.As(err, &apiErr) && apiErr.Code == "not_found" {
		fmt.Fprintln(out, "no such session")
	}
	_, err = c.Delete(ctx, sh.SessionID, 2000)
	return err
}

func TestReadmeExample(t *testing.T) {
	url, token := client.StartAgentdForTest(t)
	var out bytes.Buffer
	if err := readmeExample(url, token, &out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^session exec-[0-9a-f]+\nexit code 3\nhello\n(.|\n)*42\r\n(.|\n)*no such session\n$`).Match(out.Bytes()) {
		t.Fatalf("output %q", out.String())
	}
	// docs/clients.md shows this function's body as it is here.
	readme, err := os.ReadFile("../../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if m == nil || !strings.Contains(string(src), string(m[1])) {
		t.Fatal("docs/clients.md's Go example is not the body of readmeExample in readme_test.go")
	}
}
