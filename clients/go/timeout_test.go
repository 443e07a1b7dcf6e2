package authbroker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"
)

// A STUB daemon that answers the first call only after its deadline: the call times out
// with a sentence, and the late answer is skipped by its id on the next call.
func TestATimeoutLeavesTheConnectionUsable(t *testing.T) {
	path := stubServing(t, func(conn net.Conn, r *bufio.Reader) {
		r.ReadBytes('\n')
		r.ReadBytes('\n') // the second call: now answer both
		conn.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"late":true}}` + "\n" +
			`{"jsonrpc":"2.0","id":2,"result":{"accounts":[]}}` + "\n"))
		time.Sleep(time.Second)
	})
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

// A STUB daemon that answers every call at once. Each call has a context of its own that is
// cancelled as the call returns (defer cancel(), as Conn.Token does for WaitForSignIn): the
// next call on the connection must not be cut short by it ("did not answer … within 15 s"
// at once). The cancellation races with the next call, so this tries many times.
func TestAContextCancelledAfterItsCallLeavesTheNextCallAlone(t *testing.T) {
	path := stubServing(t, func(conn net.Conn, r *bufio.Reader) {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var req struct {
				ID int64 `json:"id"`
			}
			json.Unmarshal(line, &req)
			conn.Write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"accounts":[]}}`+"\n", req.ID)))
		}
	})
	c, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 30000; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := c.Accounts(ctx)
		cancel()
		if err == nil {
			_, err = c.Accounts(context.Background())
		}
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}
