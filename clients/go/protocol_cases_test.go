package authbroker

// The shared protocol cases (../protocol-cases.json), played by a STUB daemon: a socket in
// this test that checks the request line and sends the case's replies. A real daemon does
// not answer a chosen error, a blank line or garbage on demand; the file's daemon answers
// are checked against the real daemon by Tests/IntegrationTests/test_protocol_cases.py.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

type protocolCase struct {
	Name string `json:"name"`
	Call struct {
		Method string                 `json:"method"`
		Params map[string]interface{} `json:"params"`
	} `json:"call"`
	Replies []interface{}          `json:"replies"`
	Close   bool                   `json:"close"`
	Expect  map[string]interface{} `json:"expect"`
}

func loadCases(t *testing.T) []protocolCase {
	raw, err := os.ReadFile(filepath.Join("..", "protocol-cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []protocolCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) == 0 {
		t.Fatal("no cases")
	}
	return doc.Cases
}

func fill(v interface{}, id interface{}) interface{} {
	switch x := v.(type) {
	case string:
		if x == "$id" {
			return id
		}
	case map[string]interface{}:
		out := map[string]interface{}{}
		for k, e := range x {
			out[k] = fill(e, id)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(x))
		for i, e := range x {
			out[i] = fill(e, id)
		}
		return out
	}
	return v
}

// stub serves one case; the request it read arrives on the channel.
func stub(t *testing.T, c protocolCase) (string, chan map[string]interface{}) {
	// Not t.TempDir(): a socket path must fit in 108 bytes, and the case names are long.
	dir, err := os.MkdirTemp("", "ab-case-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan map[string]interface{}, 1)
	go func() {
		defer l.Close()
		conn, err := l.Accept()
		if err != nil {
			close(got)
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(conn).ReadBytes('\n')
		var req map[string]interface{}
		if err != nil || json.Unmarshal(line, &req) != nil {
			close(got)
			return
		}
		got <- req
		for _, r := range c.Replies {
			if s, ok := r.(string); ok {
				conn.Write([]byte(s + "\n"))
				continue
			}
			b, _ := json.Marshal(fill(r, req["id"]))
			conn.Write(append(b, '\n'))
		}
		if c.Close {
			return
		}
		buf := make([]byte, 4096)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()
	return path, got
}

func checkRequest(t *testing.T, c protocolCase, got chan map[string]interface{}) {
	req, ok := <-got
	if !ok {
		t.Fatal("the client sent no request line")
	}
	if req["jsonrpc"] != "2.0" || req["method"] != c.Call.Method {
		t.Fatalf("request %v", req)
	}
	if _, ok := req["id"].(float64); !ok {
		t.Fatalf("the id is not a number: %v", req["id"])
	}
	params, _ := req["params"].(map[string]interface{})
	if params == nil {
		params = map[string]interface{}{}
	}
	want := c.Call.Params
	if want == nil {
		want = map[string]interface{}{}
	}
	if !reflect.DeepEqual(params, want) {
		t.Fatalf("params %v, want %v", params, want)
	}
}

func checkOutcome(t *testing.T, c protocolCase, err error) {
	if e, ok := c.Expect["error"].(map[string]interface{}); ok {
		var rpc *RPCError
		if !errors.As(err, &rpc) {
			t.Fatalf("want an RPCError, got %v", err)
		}
		data, _ := e["data"].(map[string]interface{})
		if float64(rpc.Code) != e["code"].(float64) || rpc.Message != e["message"] || !reflect.DeepEqual(emptyIfNil(rpc.Data), emptyIfNil(data)) {
			t.Fatalf("got %d %q %v, want %v", rpc.Code, rpc.Message, rpc.Data, e)
		}
		if rpc.Code == CodeLoginRequired && (!IsCode(err, CodeLoginRequired) || rpc.Provider() != data["provider"]) {
			t.Fatal("login required without its provider")
		}
		return
	}
	if f, ok := c.Expect["failure"].(string); ok {
		kind := map[string]ErrorKind{"bad_response": BadResponse, "connection_lost": ConnectionLost}[f]
		if !IsKind(err, kind) {
			t.Fatalf("want %s, got %v", f, err)
		}
		if strings.Contains(err.Error(), "eyJ") {
			t.Fatal("a token in an error message")
		}
		return
	}
	if err != nil {
		t.Fatalf("want a result, got %v", err)
	}
}

func emptyIfNil(m map[string]interface{}) map[string]interface{} {
	if m == nil {
		return map[string]interface{}{}
	}
	return m
}

func TestProtocolCasesWithTheGenericCall(t *testing.T) {
	for _, c := range loadCases(t) {
		c := c
		t.Run(c.Name, func(t *testing.T) {
			path, got := stub(t, c)
			conn, err := Dial(path)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var result interface{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = conn.Call(ctx, c.Call.Method, c.Call.Params, &result)
			checkRequest(t, c, got)
			checkOutcome(t, c, err)
			if want, ok := c.Expect["result"]; ok && !reflect.DeepEqual(result, want) {
				t.Fatalf("result %v, want %v", result, want)
			}
		})
	}
}

func TestProtocolCasesWithTheTypedTokenCall(t *testing.T) {
	for _, c := range loadCases(t) {
		c := c
		if c.Call.Method != "token.get" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			// The case's params, as a program would pass them.
			var p TokenParams
			raw, _ := json.Marshal(c.Call.Params)
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			path, got := stub(t, c)
			tok, err := GetToken(context.Background(), p, Options{Path: path})
			checkRequest(t, c, got)
			checkOutcome(t, c, err)
			want, ok := c.Expect["result"].(map[string]interface{})
			if !ok {
				return
			}
			str := func(s *string) interface{} {
				if s == nil {
					return nil
				}
				return *s
			}
			have := map[string]interface{}{"access_token": tok.AccessToken, "token_type": tok.TokenType,
				"expires_at": float64(tok.ExpiresAt), "scope": str(tok.Scope), "resource": str(tok.Resource),
				"provider": tok.Provider, "account": tok.Account}
			for k, v := range have {
				if !reflect.DeepEqual(v, want[k]) {
					t.Fatalf("%s: %v, want %v", k, v, want[k])
				}
			}
			if strings.Contains(tok.String(), tok.AccessToken) || strings.Contains(
				strings.Join([]string{tok.GoString()}, ""), tok.AccessToken) {
				t.Fatal("the token shows in its String")
			}
		})
	}
}
