package authbroker

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A STUB daemon that answers the first call only after its deadline: the call times out
// with a sentence, and the late answer is skipped by its id on the next call.
func TestATimeoutLeavesTheConnectionUsable(t *testing.T) {
	dir, err := os.MkdirTemp("", "ab-go-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		r.ReadBytes('\n')
		r.ReadBytes('\n') // the second call: now answer both
		conn.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"late":true}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"result":{"accounts":[]}}` + "\n"))
		time.Sleep(time.Second)
	}()
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 300 * time.Millisecond
	_, err = c.Token(context.Background(), TokenParams{Resource: "https://api.example.test"})
	if !IsKind(err, Timeout) || err.Error() != "authbrokerd did not answer token.get within 300 ms" {
		t.Fatalf("got %v", err)
	}
	c.Timeout = 5 * time.Second
	accounts, err := c.Accounts(context.Background())
	if err != nil || len(accounts) != 0 {
		t.Fatalf("got %v %v", accounts, err)
	}
}
