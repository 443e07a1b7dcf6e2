package authbroker

// Against the real daemon, Glewlwyd and an API that checks tokens and proofs: run by
// Tests/IntegrationTests/test_client_go.py, which starts them and passes them in
// AUTHBROKER_TEST_* variables. Without them these tests skip (`go test` alone plays the
// protocol cases only).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

func env(t *testing.T, name string) string {
	v := os.Getenv(name)
	if v == "" {
		t.Skipf("%s is not set: run from Tests/IntegrationTests/test_client_go.py", name)
	}
	return v
}

type apiLog [][]interface{}

func control(t *testing.T, api, what, body string) apiLog {
	method := http.MethodPost
	if what == "log" {
		method = http.MethodGet
	}
	req, _ := http.NewRequest(method, api+"/_control/"+what, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var log apiLog
	json.NewDecoder(resp.Body).Decode(&log)
	return log
}

func statuses(log apiLog) []int {
	var out []int
	for _, e := range log {
		out = append(out, int(e[2].(float64)))
	}
	return out
}

func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func get(t *testing.T, client *http.Client, method, url string, body []byte) (int, map[string]interface{}) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, r)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]interface{}
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestIntegrationTokenAndTransport(t *testing.T) {
	sock, provider, resource := env(t, "AUTHBROKER_TEST_SOCKET"), env(t, "AUTHBROKER_TEST_PROVIDER"), env(t, "AUTHBROKER_TEST_RESOURCE")
	api, subject := env(t, "AUTHBROKER_TEST_API"), env(t, "AUTHBROKER_TEST_SUBJECT")
	ctx := context.Background()
	p := TokenParams{Resource: resource, Provider: provider}

	tok, err := GetToken(ctx, p, Options{Path: sock})
	if err != nil {
		t.Fatal(err)
	}
	if tok.TokenType != "Bearer" || tok.Provider != provider || tok.Resource == nil || *tok.Resource != resource ||
		tok.Expires().Before(time.Now()) {
		t.Fatalf("token %v", tok)
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", tok, tok, tok), tok.AccessToken) {
		t.Fatal("the token shows when printed")
	}

	client := &http.Client{Transport: &Transport{Params: p, Path: sock}}
	status, body := get(t, client, "GET", api+"/v1/items?page=2", nil)
	if status != 200 || body["sub"] != subject {
		t.Fatalf("%d %v", status, body)
	}

	// A revoked token: rejected, and the request (with its body) sent once more.
	control(t, api, "refuse", fingerprint(tok.AccessToken))
	control(t, api, "clear", "")
	status, body = get(t, client, "POST", api+"/v1/items", []byte(`{"name":"x"}`))
	if status != 200 || body["body"] != `{"name":"x"}` {
		t.Fatalf("%d %v", status, body)
	}
	if got := statuses(control(t, api, "log", "")); fmt.Sprint(got) != "[401 200]" {
		t.Fatalf("the API saw %v", got)
	}
	after, err := GetToken(ctx, p, Options{Path: sock})
	if err != nil || after.AccessToken == tok.AccessToken {
		t.Fatalf("token.reject should have made the daemon refresh (%v)", err)
	}

	// An API that refuses every token is asked twice, not more.
	other := &http.Client{Transport: &Transport{Params: TokenParams{Resource: env(t, "AUTHBROKER_TEST_OTHER_RESOURCE"), Provider: provider}, Path: sock}}
	control(t, api, "clear", "")
	if status, _ := get(t, other, "GET", api+"/x", nil); status != 401 {
		t.Fatalf("status %d", status)
	}
	if got := statuses(control(t, api, "log", "")); fmt.Sprint(got) != "[401 401]" {
		t.Fatalf("the API saw %v", got)
	}
}

func TestIntegrationDPoP(t *testing.T) {
	sock, provider, resource := env(t, "AUTHBROKER_TEST_DPOP_SOCKET"), env(t, "AUTHBROKER_TEST_DPOP_PROVIDER"), env(t, "AUTHBROKER_TEST_RESOURCE")
	api := env(t, "AUTHBROKER_TEST_API")
	client := &http.Client{Transport: &Transport{Params: TokenParams{Resource: resource, Provider: provider}, Path: sock}}
	control(t, api, "clear", "")
	for _, path := range []string{"/v1/items", "/v1/items", "/v1/other"} {
		if status, _ := get(t, client, "GET", api+path, nil); status != 200 {
			t.Fatalf("%s: %d", path, status)
		}
	}
	for _, e := range control(t, api, "log", "") {
		if e[3] != "DPoP" || e[2].(float64) != 200 {
			t.Fatalf("the API saw %v", e)
		}
	}
}

func TestIntegrationTypedErrors(t *testing.T) {
	sock, provider := env(t, "AUTHBROKER_TEST_UNSIGNED_SOCKET"), env(t, "AUTHBROKER_TEST_UNSIGNED_PROVIDER")
	resource := env(t, "AUTHBROKER_TEST_RESOURCE")
	ctx := context.Background()
	_, err := GetToken(ctx, TokenParams{Resource: resource, Provider: provider}, Options{Path: sock})
	want := fmt.Sprintf("not signed in to %s: run `authctl login --provider %s`", provider, provider)
	if !IsCode(err, CodeLoginRequired) || err.Error() != want || err.(*RPCError).Provider() != provider {
		t.Fatalf("got %v", err)
	}
	if _, err := GetToken(ctx, TokenParams{Resource: resource, Provider: "nosuch"}, Options{Path: sock}); !IsCode(err, CodeUnknownProvider) {
		t.Fatalf("got %v", err)
	}
	bad := -1
	if _, err := GetToken(ctx, TokenParams{Resource: resource, Provider: provider, MinTTL: &bad}, Options{Path: sock}); !IsCode(err, CodeInvalidParams) || !strings.Contains(err.Error(), "min_ttl") {
		t.Fatalf("got %v", err)
	}
	if _, err := GetToken(ctx, TokenParams{}, Options{Path: sock + ".missing"}); !IsKind(err, DaemonNotRunning) {
		t.Fatalf("got %v", err)
	}
	if foreign := os.Getenv("AUTHBROKER_TEST_FOREIGN_SOCKET"); foreign != "" {
		_, err := Dial(foreign)
		if !IsKind(err, WrongServer) || !strings.Contains(err.Error(), "nothing was sent") {
			t.Fatalf("got %v", err)
		}
	}
}

func TestIntegrationWaitForSignIn(t *testing.T) {
	sock, provider := env(t, "AUTHBROKER_TEST_SIGNIN_SOCKET"), env(t, "AUTHBROKER_TEST_SIGNIN_PROVIDER")
	resource, pages := env(t, "AUTHBROKER_TEST_RESOURCE"), env(t, "AUTHBROKER_TEST_SIGNIN_PAGE_FILE")
	ctx := context.Background()
	p := TokenParams{Resource: resource, Provider: provider}
	if _, err := GetToken(ctx, p, Options{Path: sock}); !IsCode(err, CodeLoginRequired) {
		t.Fatalf("without a wait: %v", err)
	}
	p.WaitForSignIn = 120
	shown := false
	tok, err := GetToken(ctx, p, Options{Path: sock, OnSignIn: func(s *SignIn) {
		shown = true
		// The test's "user" opens the page (test_client_go.py finishes the sign-in there).
		if err := os.WriteFile(pages, []byte(s.AuthorizationURL), 0o600); err != nil {
			t.Error(err)
		}
	}})
	if err != nil || !shown || tok.Provider != provider {
		t.Fatalf("got %v %v (page shown: %v)", tok, err, shown)
	}
}
