package authbroker

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"
)

// A STUB daemon that dies in the middle of its answer (a real one cannot be killed at that
// byte on demand): the connection is lost, as when it dies before answering.
func TestADaemonThatDiesMidAnswerIsAConnectionLost(t *testing.T) {
	path := stubServing(t, func(conn net.Conn, r *bufio.Reader) {
		r.ReadBytes('\n')
		conn.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"access_token":"eyJhbGciOiJSUzI1NiJ9.eyJzdWIi`))
	})
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Token(context.Background(), TokenParams{Resource: "https://api.example.test"})
	if !IsKind(err, ConnectionLost) {
		t.Fatalf("want ConnectionLost, got %v", err)
	}
}

// A STUB daemon whose answer is split across writes, the rest after the call's deadline:
// the call times out, the connection stays usable, and the next call gets its answer.
func TestAnAnswerSplitAcrossTheDeadlineLeavesTheConnectionUsable(t *testing.T) {
	path := stubServing(t, func(conn net.Conn, r *bufio.Reader) {
		r.ReadBytes('\n')
		conn.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"la`))
		r.ReadBytes('\n') // the second call: now the rest of the first answer, and the second
		conn.Write([]byte(`te":true}}` + "\n" + `{"jsonrpc":"2.0","id":2,"result":{"accounts":[]}}` + "\n"))
		time.Sleep(time.Second)
	})
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Timeout = 300 * time.Millisecond
	_, err = c.Token(context.Background(), TokenParams{Resource: "https://api.example.test"})
	if !IsKind(err, Timeout) {
		t.Fatalf("want Timeout, got %v", err)
	}
	c.Timeout = 5 * time.Second
	accounts, err := c.Accounts(context.Background())
	if err != nil || len(accounts) != 0 {
		t.Fatalf("got %v %v", accounts, err)
	}
}
