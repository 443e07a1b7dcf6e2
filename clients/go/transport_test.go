package authbroker

// The Transport's answers to 401 and 403 challenges, against a STUB daemon (a real Unix
// socket, many connections, answers made up as docs/protocol.md documents them) and a
// STUB resource server (httptest) answering through one function. Neither is the real
// daemon or a real API; the tokens are made-up strings. The same cases as
// clients/python's (Tests/IntegrationTests/test_client_challenges.py).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const api = "https://api.example.test"

type call struct {
	Method string
	Params map[string]interface{}
}

// stubBroker is a STUB daemon. known: the resources token.get serves without discovery;
// discoverable: resource -> issuer and whether it is trusted, which discovery.resolve
// finds (token.get then serves it, or answers -32011 for an untrusted issuer). Tokens are
// tok-<n>, then -a+b for scopes a and b; token.reject makes the next token.get serve a
// new one. on overrides a method.
type stubBroker struct {
	path         string
	dpop         bool
	known        map[string]bool
	discoverable map[string]found
	on           map[string]func(map[string]interface{}) (interface{}, *RPCError)

	mu     sync.Mutex
	calls  []call
	serial int
}

type found struct {
	issuer  string
	trusted bool
}

func newStubBroker(t *testing.T, known ...string) *stubBroker {
	dir, err := os.MkdirTemp("", "ab-go-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b := &stubBroker{path: filepath.Join(dir, "sock"), known: map[string]bool{}, discoverable: map[string]found{},
		on: map[string]func(map[string]interface{}) (interface{}, *RPCError){}, serial: 1}
	for _, k := range known {
		b.known[k] = true
	}
	l, err := net.Listen("unix", b.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go b.serve(conn)
		}
	}()
	return b
}

func (b *stubBroker) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var req struct {
			ID     interface{}            `json:"id"`
			Method string                 `json:"method"`
			Params map[string]interface{} `json:"params"`
		}
		json.Unmarshal(line, &req)
		if req.Params == nil {
			req.Params = map[string]interface{}{}
		}
		answer := map[string]interface{}{"jsonrpc": "2.0", "id": req.ID}
		result, rpcErr := b.answer(req.Method, req.Params)
		if rpcErr != nil {
			answer["error"] = rpcErr
		} else {
			answer["result"] = result
		}
		out, _ := json.Marshal(answer)
		conn.Write(append(out, '\n'))
	}
}

func (b *stubBroker) methods() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, c := range b.calls {
		out = append(out, c.Method)
	}
	return out
}

func (b *stubBroker) callsOf() []call {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]call(nil), b.calls...)
}

func (b *stubBroker) answer(method string, params map[string]interface{}) (interface{}, *RPCError) {
	b.mu.Lock()
	b.calls = append(b.calls, call{method, params})
	override := b.on[method]
	b.mu.Unlock()
	if override != nil {
		return override(params)
	}
	switch method {
	case "token.get", "dpop.proof":
		return b.token(method, params)
	case "token.reject":
		b.mu.Lock()
		defer b.mu.Unlock()
		s, _ := params["access_token"].(string)
		dropped := strings.HasPrefix(s+"-", fmt.Sprintf("tok-%d-", b.serial))
		if dropped {
			b.serial++
		}
		return map[string]bool{"dropped": dropped}, nil
	case "discovery.resolve":
		resource, _ := params["resource"].(string)
		b.mu.Lock()
		defer b.mu.Unlock()
		f, ok := b.discoverable[resource]
		if !ok {
			return nil, &RPCError{Code: CodeProviderUnreachable, Message: "the metadata of " + resource + " could not be fetched"}
		}
		b.known[resource] = true
		return map[string]interface{}{"resource": resource, "provider": "found", "issuer": f.issuer,
			"resource_host": "127.0.0.1", "issuer_host": "auth.example.test", "trusted": f.trusted,
			"signed_in": true, "configured": false}, nil
	}
	return nil, &RPCError{Code: CodeMethodNotFound, Message: fmt.Sprintf(`there is no method "%s"`, method)}
}

func (b *stubBroker) token(method string, params map[string]interface{}) (interface{}, *RPCError) {
	b.mu.Lock()
	defer b.mu.Unlock()
	resource, _ := params["resource"].(string)
	if resource != "" && !b.known[resource] {
		return nil, &RPCError{Code: CodeInvalidParams, Message: "invalid params for " + method + ": no provider lists the resource " + resource}
	}
	f, isFound := b.discoverable[resource]
	if isFound && !f.trusted {
		return nil, &RPCError{Code: CodeUntrustedServer, Message: "the authorization server of " + resource +
			" is not trusted yet: run `authctl login --resource " + resource + "`",
			Data: map[string]interface{}{"resource": resource, "issuer": f.issuer, "resource_host": "127.0.0.1",
				"issuer_host": "auth.example.test", "provider": "found"}}
	}
	var scopes []string
	if raw, ok := params["scopes"].([]interface{}); ok {
		for _, s := range raw {
			scopes = append(scopes, s.(string))
		}
	}
	sort.Strings(scopes)
	access := fmt.Sprintf("tok-%d", b.serial)
	scope := "read"
	if len(scopes) > 0 {
		access += "-" + strings.Join(scopes, "+")
		scope = strings.Join(scopes, " ")
	}
	typ, provider := "Bearer", "stub"
	if b.dpop {
		typ = "DPoP"
	}
	if isFound {
		provider = "found"
	}
	result := map[string]interface{}{"access_token": access, "token_type": typ, "expires_at": time.Now().Unix() + 3600,
		"provider": provider, "resource": resource, "scope": scope}
	if method == "dpop.proof" {
		nonce, _ := params["nonce"].(string)
		result["proof"] = fmt.Sprintf("proof-%d-%s", len(b.calls), nonce)
	}
	return result, nil
}

// stubResource is a STUB resource server; log holds what each request carried.
type stubResource struct {
	*httptest.Server
	mu  sync.Mutex
	log []seen
}

type seen struct {
	Method, Path, Authorization, DPoP string
	Status                            int
}

func newStubResource(t *testing.T, answer func(r *http.Request, body []byte) (int, http.Header, string)) *stubResource {
	s := &stubResource{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		status, headers, out := answer(r, body)
		s.mu.Lock()
		s.log = append(s.log, seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("DPoP"), status})
		s.mu.Unlock()
		for k, v := range headers {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		io.WriteString(w, out)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *stubResource) statuses() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, e := range s.log {
		out = append(out, e.Status)
	}
	return out
}

func (s *stubResource) seen() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.log...)
}

func tokenOf(r *http.Request) string {
	_, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return token
}

// answering: 200 and the body back when accept(token), else status with challenge.
func answering(accept func(string) bool, status int, challenge string) func(*http.Request, []byte) (int, http.Header, string) {
	return func(r *http.Request, body []byte) (int, http.Header, string) {
		if t := tokenOf(r); t != "" && accept(t) {
			return 200, nil, "ok:" + string(body)
		}
		return status, http.Header{"Www-Authenticate": {challenge}}, "refused"
	}
}

func send(t *testing.T, tr *Transport, method, url string, body io.Reader) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out), nil
}

func eq(t *testing.T, what string, got, want interface{}) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func TestInvalidTokenRejectsItAndSendsOnceMoreWithItsBody(t *testing.T) {
	b := newStubBroker(t, api)
	s := newStubResource(t, answering(func(tok string) bool { return tok == "tok-2" }, 401, `Bearer error="invalid_token"`))
	resp, body, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "POST", s.URL+"/v1/items", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "answer", fmt.Sprint(resp.StatusCode, " ", body), "200 ok:payload")
	eq(t, "statuses", s.statuses(), []int{401, 200})
	eq(t, "authorization", []string{s.seen()[0].Authorization, s.seen()[1].Authorization}, []string{"Bearer tok-1", "Bearer tok-2"})
	eq(t, "methods", b.methods(), []string{"token.get", "token.reject", "token.get"})
	eq(t, "rejected", b.callsOf()[1].Params, map[string]interface{}{"access_token": "tok-1"})
	eq(t, "reason", RefusalReason(resp), "")
}

func TestAServerThatRefusesEveryTokenIsAskedTwiceAndTheAnswerSaysWhy(t *testing.T) {
	b := newStubBroker(t, api)
	s := newStubResource(t, answering(func(string) bool { return false }, 401, `Bearer error="invalid_token", error_description="revoked"`))
	resp, _, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "GET", s.URL+"/v1/items?secret=s3", nil)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "status", resp.StatusCode, 401)
	eq(t, "statuses", s.statuses(), []int{401, 401})
	eq(t, "reason", RefusalReason(resp), s.URL+`/v1/items refused the request again with 401 invalid_token: "revoked", after a fresh token`)
}

func TestInsufficientScopeStepsUpOnceToTheUnionAndKeepsIt(t *testing.T) {
	b := newStubBroker(t, api)
	s := newStubResource(t, answering(func(tok string) bool { return strings.Contains(tok, "files:write") }, 403,
		`Bearer error="insufficient_scope", scope="files:read files:write"`))
	tr := &Transport{Params: TokenParams{Resource: api, Scopes: []string{"files:read", "mail"}}, Path: b.path}
	for _, m := range []string{"PUT", "GET"} {
		if resp, _, err := send(t, tr, m, s.URL+"/f", bytes.NewReader([]byte("x"))); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %v %v", m, resp, err)
		}
	}
	eq(t, "statuses", s.statuses(), []int{403, 200, 200})
	var asked [][]interface{}
	for _, c := range b.callsOf() {
		asked = append(asked, c.Params["scopes"].([]interface{}))
	}
	wider := []interface{}{"files:read", "mail", "files:write"}
	eq(t, "scopes asked", asked, [][]interface{}{{"files:read", "mail"}, wider, wider})
}

func TestTheTokensOwnScopesAreTheOnesAStepUpWidens(t *testing.T) {
	b := newStubBroker(t, api) // its token answers carry scope "read"
	s := newStubResource(t, answering(func(tok string) bool { return strings.Contains(tok, "write") }, 403,
		`Bearer error="insufficient_scope", scope="write"`))
	if resp, _, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "GET", s.URL+"/w", nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	eq(t, "second ask", b.callsOf()[1].Params["scopes"], []interface{}{"read", "write"})
}

func TestAStepUpTheDaemonRefusesIsAnErrorAndNotKept(t *testing.T) {
	b := newStubBroker(t, api)
	b.on["token.get"] = func(p map[string]interface{}) (interface{}, *RPCError) {
		for _, s := range p["scopes"].([]interface{}) {
			if s == "admin" {
				return nil, &RPCError{Code: CodeInvalidParams, Message: "invalid params for token.get: the scopes admin read are not one of scope_sets"}
			}
		}
		return b.token("token.get", p)
	}
	s := newStubResource(t, answering(func(string) bool { return false }, 403, `Bearer error="insufficient_scope", scope="admin"`))
	tr := &Transport{Params: TokenParams{Resource: api, Scopes: []string{"read"}}, Path: b.path}
	_, _, err := send(t, tr, "GET", s.URL+"/admin", nil)
	var refused *RefusalError
	if !errors.As(err, &refused) || !IsCode(err, CodeInvalidParams) {
		t.Fatalf("got %v", err)
	}
	eq(t, "message", refused.Error(), "invalid params for token.get: the scopes admin read are not one of scope_sets")
	eq(t, "reason", refused.Reason, s.URL+`/admin refused the request with 403 insufficient_scope (scope "admin")`)
	if _, _, err := send(t, tr, "GET", s.URL+"/other", nil); !IsCode(err, CodeInvalidParams) {
		t.Fatalf("got %v", err)
	}
	var asked []interface{}
	for _, c := range b.callsOf() {
		asked = append(asked, c.Params["scopes"])
	}
	eq(t, "scopes asked", asked, []interface{}{[]interface{}{"read"}, []interface{}{"read", "admin"}, []interface{}{"read"}, []interface{}{"read", "admin"}})
}

func TestAStepUpThatAsksForNothingNewIsNotTried(t *testing.T) {
	for challenge, why := range map[string]string{
		`Bearer error="insufficient_scope", scope="read"`: ", and the token has those scopes already",
		`Bearer error="insufficient_scope"`:               ", naming no scope to ask for",
	} {
		b := newStubBroker(t, api)
		s := newStubResource(t, answering(func(string) bool { return false }, 403, challenge))
		resp, _, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "GET", s.URL+"/x", nil)
		if err != nil || resp.StatusCode != 403 || len(s.seen()) != 1 {
			t.Fatalf("%v %v %v", resp, err, s.seen())
		}
		reason := RefusalReason(resp)
		if !strings.HasPrefix(reason, s.URL+"/x refused the request with 403 insufficient_scope") || !strings.HasSuffix(reason, why) {
			t.Fatalf("reason %q", reason)
		}
		eq(t, "methods", b.methods(), []string{"token.get"})
	}
}

func TestInsufficientUserAuthenticationSaysWhichSignInToRun(t *testing.T) {
	b := newStubBroker(t, api)
	s := newStubResource(t, answering(func(string) bool { return false }, 401, `Bearer error="insufficient_user_authentication", `+
		`error_description="A different authentication level is required", acr_values="myACR", max_age="5"`))
	_, _, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "GET", s.URL+"/x", nil)
	var e *UserAuthenticationError
	if !errors.As(err, &e) || len(s.seen()) != 1 {
		t.Fatalf("got %v", err)
	}
	eq(t, "fields", []string{e.ACRValues, e.MaxAge, e.URL}, []string{"myACR", "5", s.URL + "/x"})
	eq(t, "message", e.Error(), s.URL+`/x refused the request with 401 insufficient_user_authentication: "A different `+
		`authentication level is required" (acr_values "myACR", max_age "5"): it asks for a new sign-in with acr_values=myACR `+
		`and max_age=5 (RFC 9470), which authbrokerd does not ask the provider for on a program's behalf: run `+
		"`authctl login --resource "+api+" --param acr_values=myACR --param max_age=5`, then try again")
}

func TestADPoPNonceIsSentWithAFreshProof(t *testing.T) {
	b := newStubBroker(t, api)
	b.dpop = true
	s := newStubResource(t, func(r *http.Request, body []byte) (int, http.Header, string) {
		if strings.HasSuffix(r.Header.Get("DPoP"), "-n1") && tokenOf(r) == "tok-1" && string(body) == "x" {
			return 200, nil, "ok"
		}
		return 401, http.Header{"Www-Authenticate": {`DPoP algs="ES256", error="use_dpop_nonce"`}, "Dpop-Nonce": {"n1"}}, ""
	})
	resp, _, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "POST", s.URL+"/d", strings.NewReader("x"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v", resp, err)
	}
	for _, e := range s.seen() {
		eq(t, "authorization", e.Authorization, "DPoP tok-1")
	}
	var nonces []interface{}
	var last map[string]interface{}
	for _, c := range b.callsOf() {
		if c.Method == "dpop.proof" {
			nonces = append(nonces, c.Params["nonce"])
			last = c.Params
		}
	}
	eq(t, "nonces", nonces, []interface{}{nil, "n1"})
	eq(t, "proof for", []interface{}{last["htm"], last["htu"]}, []interface{}{"POST", s.URL + "/d"})
}

func TestAMalformedOrForeignChallengeIsNotRetriedAndCrashesNothing(t *testing.T) {
	b := newStubBroker(t, api)
	for _, challenge := range []string{`Bearer error="unterminated`, `"`, "", "Basic realm=x", "Bearer, , ,error=",
		"Bearer error=invalid token", "Bearer =,=,=", `\\\`, "Bearer " + strings.Repeat("a=b, ", 300), "DPoP error=use_dpop_nonce"} {
		s := newStubResource(t, answering(func(string) bool { return false }, 401, challenge))
		resp, _, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "GET", s.URL+"/x", nil)
		if err != nil || resp.StatusCode != 401 || len(s.seen()) != 1 {
			t.Fatalf("%q: %v %v %v", challenge, resp, err, s.seen())
		}
		if !strings.HasPrefix(RefusalReason(resp), s.URL+"/x refused the request with 401") {
			t.Fatalf("%q: reason %q", challenge, RefusalReason(resp))
		}
	}
}

func TestABodyThatCannotBeSentAgainIsNotRetriedAndTheReasonSaysSo(t *testing.T) {
	b := newStubBroker(t, api)
	s := newStubResource(t, answering(func(string) bool { return false }, 401, `Bearer error="invalid_token"`))
	stream := io.MultiReader(strings.NewReader("a stream")) // http.NewRequest sets no GetBody for it
	resp, _, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "POST", s.URL+"/up", stream)
	if err != nil || resp.StatusCode != 401 || len(s.seen()) != 1 {
		t.Fatalf("%v %v", resp, err)
	}
	eq(t, "reason", RefusalReason(resp), s.URL+"/up refused the request with 401 invalid_token, and its body is a stream that cannot be sent again")
	eq(t, "methods", b.methods(), []string{"token.get"})
}

func TestResourceMetadataWithoutAResourceToDiscoverIsNotRetried(t *testing.T) {
	b := newStubBroker(t)
	s := newStubResource(t, answering(func(string) bool { return false }, 401, `Bearer resource_metadata="https://x/.well-known/oauth-protected-resource"`))
	resp, _, err := send(t, &Transport{Params: TokenParams{Provider: "stub"}, Path: b.path}, "GET", s.URL+"/x", nil)
	if err != nil || resp.StatusCode != 401 || len(s.seen()) != 1 {
		t.Fatalf("%v %v", resp, err)
	}
	eq(t, "methods", b.methods(), []string{"token.get"})
	if !strings.HasSuffix(RefusalReason(resp), "401 without an error code, and no resource was given to discover") {
		t.Fatalf("reason %q", RefusalReason(resp))
	}
}

func TestA403WithoutAChallengeIsNotRetried(t *testing.T) {
	b := newStubBroker(t, api)
	s := newStubResource(t, func(*http.Request, []byte) (int, http.Header, string) { return 403, nil, "no" })
	resp, body, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "GET", s.URL+"/x", nil)
	if err != nil || resp.StatusCode != 403 || body != "no" || len(s.seen()) != 1 {
		t.Fatalf("%v %v", resp, err)
	}
	eq(t, "reason", RefusalReason(resp), s.URL+"/x refused the request with 403 without a Bearer or DPoP challenge")
}

// mcpServer is a STUB MCP server's HTTP face: a request without an accepted token gets the
// 401 of MCP authorization, naming its metadata (RFC 9728 §5.1).
func mcpServer(ok func(string) bool) func(*http.Request, []byte) (int, http.Header, string) {
	return func(r *http.Request, _ []byte) (int, http.Header, string) {
		if t := tokenOf(r); t != "" && ok(t) {
			return 200, nil, `{"ok":true}`
		}
		metadata := "http://" + r.Host + "/.well-known/oauth-protected-resource/mcp"
		return 401, http.Header{"Www-Authenticate": {`Bearer resource_metadata="` + metadata + `"`}}, ""
	}
}

func TestADiscoverableResourceIsResolvedAfterTheFirst401(t *testing.T) {
	s := newStubResource(t, mcpServer(func(tok string) bool { return tok == "tok-1" }))
	resource := s.URL + "/mcp"
	b := newStubBroker(t)
	b.discoverable[resource] = found{"https://auth.example.test", true}
	tr := &Transport{Params: TokenParams{Resource: resource}, Path: b.path, Discoverable: true}
	resp, _, err := send(t, tr, "POST", resource, strings.NewReader(`{"jsonrpc":"2.0"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v (%s)", resp, err, RefusalReason(resp))
	}
	seen := s.seen()
	eq(t, "server saw", []string{seen[0].Authorization, seen[1].Authorization}, []string{"", "Bearer tok-1"})
	eq(t, "methods", b.methods(), []string{"token.get", "discovery.resolve", "token.get"})
	eq(t, "resolve", b.callsOf()[1].Params, map[string]interface{}{"resource": resource,
		"resource_metadata": s.URL + "/.well-known/oauth-protected-resource/mcp"})
	// Discovered now: the next request goes with a token at once.
	if resp, _, err := send(t, tr, "GET", resource, nil); err != nil || resp.StatusCode != 200 || len(s.seen()) != 3 {
		t.Fatalf("%v %v", resp, err)
	}
}

func TestAnUntrustedServerIsATypedErrorWithTheDaemonsSentence(t *testing.T) {
	s := newStubResource(t, mcpServer(func(string) bool { return true }))
	resource := s.URL + "/mcp"
	b := newStubBroker(t)
	b.discoverable[resource] = found{"https://evil.example.test", false}
	_, _, err := send(t, &Transport{Params: TokenParams{Resource: resource}, Path: b.path, Discoverable: true}, "GET", resource, nil)
	var untrusted *UntrustedServerError
	var refused *RefusalError
	if !errors.As(err, &untrusted) || !errors.As(err, &refused) || !IsCode(err, CodeUntrustedServer) {
		t.Fatalf("got %#v", err)
	}
	eq(t, "message", untrusted.Error(), "the authorization server of "+resource+" is not trusted yet: run `authctl login --resource "+resource+"`")
	eq(t, "fields", []string{untrusted.Resource, untrusted.Issuer, untrusted.ResourceHost, untrusted.IssuerHost},
		[]string{resource, "https://evil.example.test", "127.0.0.1", "auth.example.test"})
	eq(t, "reason", refused.Reason, resource+" refused the request with 401 without an error code")
	eq(t, "methods", b.methods(), []string{"token.get", "discovery.resolve", "token.get"})
	eq(t, "requests", len(s.seen()), 1)
}

func TestResolveAndTheUntrustedErrorOfAPlainCall(t *testing.T) {
	b := newStubBroker(t)
	b.discoverable["https://mcp.example.test/mcp"] = found{"https://auth.example.test", false}
	c, err := Dial(b.path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Resolve(context.Background(), "https://mcp.example.test/mcp", "")
	if err != nil || r.Provider != "found" || r.Trusted || !r.SignedIn || r.IssuerHost != "auth.example.test" {
		t.Fatalf("%+v %v", r, err)
	}
	eq(t, "params", b.callsOf()[0].Params, map[string]interface{}{"resource": "https://mcp.example.test/mcp"})
	_, err = c.Token(context.Background(), TokenParams{Resource: "https://mcp.example.test/mcp"})
	var untrusted *UntrustedServerError
	var rpc *RPCError
	if !errors.As(err, &untrusted) || !errors.As(err, &rpc) || rpc.Provider() != "found" || untrusted.Issuer != "https://auth.example.test" {
		t.Fatalf("got %v", err)
	}
	if _, err := c.Resolve(context.Background(), "https://unknown.example.test/", ""); !IsCode(err, CodeProviderUnreachable) {
		t.Fatalf("got %v", err)
	}
	b.on["discovery.resolve"] = func(map[string]interface{}) (interface{}, *RPCError) {
		return map[string]interface{}{"resource": "https://other.example.test/", "provider": "x"}, nil
	}
	if _, err := c.Resolve(context.Background(), "https://mcp.example.test/mcp", ""); !IsKind(err, BadResponse) {
		t.Fatalf("got %v", err)
	}
}

func TestADaemonErrorOnTheRetryIsReturnedWithItsSentence(t *testing.T) {
	// A server that refuses every token without an error code, naming its metadata:
	// discovery, which fails (the STUB daemon cannot fetch that metadata).
	s := newStubResource(t, mcpServer(func(string) bool { return false }))
	resource := s.URL + "/mcp"
	b := newStubBroker(t, resource)
	_, _, err := send(t, &Transport{Params: TokenParams{Resource: resource}, Path: b.path}, "GET", resource, nil)
	var refused *RefusalError
	if !errors.As(err, &refused) || !IsCode(err, CodeProviderUnreachable) {
		t.Fatalf("got %v", err)
	}
	eq(t, "message", refused.Error(), "the metadata of "+resource+" could not be fetched")
	eq(t, "reason", refused.Reason, resource+" refused the request with 401 without an error code")
	eq(t, "methods", b.methods(), []string{"token.get", "discovery.resolve"})
	eq(t, "requests", len(s.seen()), 1)
}

func TestAResponseThatIsNoRefusalIsPassedOnUntouched(t *testing.T) {
	b := newStubBroker(t, api)
	s := newStubResource(t, func(*http.Request, []byte) (int, http.Header, string) {
		return 500, http.Header{"Www-Authenticate": {`Bearer error="invalid_token"`}}, "boom"
	})
	resp, body, err := send(t, &Transport{Params: TokenParams{Resource: api}, Path: b.path}, "GET", s.URL+"/x", nil)
	if err != nil || resp.StatusCode != 500 || body != "boom" || RefusalReason(resp) != "" || len(s.seen()) != 1 {
		t.Fatalf("%v %v", resp, err)
	}
	eq(t, "methods", b.methods(), []string{"token.get"})
}
