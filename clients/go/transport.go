package authbroker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Transport is an http.RoundTripper that adds a token from authbrokerd to each request:
// "Authorization: Bearer …", or for a DPoP-bound token "Authorization: DPoP …" and a
// fresh DPoP proof for that request.
//
// A 401 or 403 gets what its WWW-Authenticate challenge asks for (Decide), with the
// request sent once more at most:
//   - error="invalid_token": the token is rejected (token.reject) and a fresh one sent;
//   - error="use_dpop_nonce" with a DPoP-Nonce header: a proof carrying that nonce;
//   - error="insufficient_scope" with scope: a token for the union of the token's scopes
//     and those (kept for the Transport's later requests once the daemon served it);
//   - a 401 naming resource_metadata (RFC 9728 §5.1): discovery.resolve of
//     Params.Resource, then a token from the authorization server its metadata names;
//   - error="insufficient_user_authentication" (RFC 9470): no retry, a
//     *UserAuthenticationError naming the `authctl login` to run.
//
// A request whose body cannot be sent again (a Body without GetBody: http.NewRequest sets
// GetBody for a bytes.Buffer, bytes.Reader or strings.Reader) is not retried. A 401 or 403
// the Transport returns carries its sentence, RefusalReason(resp): what the server said,
// and after which retry, or why it was not retried. A daemon call on the way to the retry
// that fails is a *RefusalError with that sentence, whose message is the daemon's.
//
//	client := &http.Client{Transport: &authbroker.Transport{Params: authbroker.TokenParams{Resource: "https://api.example.com"}}}
type Transport struct {
	Params TokenParams
	Path   string            // the socket; "" = SocketPath()
	Base   http.RoundTripper // nil: http.DefaultTransport
	// Discoverable: Params.Resource may be one the daemon has not discovered yet (an MCP
	// server's URL): a first token.get the daemon answers with "unknown" (CodeInvalidParams,
	// CodeUnknownProvider) lets the request go without a token, so that the server's 401
	// says where its metadata is.
	Discoverable bool

	mu     sync.Mutex
	dpop   bool     // learnt from the first answer: a provider's tokens are all bound or none is
	scopes []string // after a step-up (insufficient_scope): the scopes later requests ask for
}

var challengeError = regexp.MustCompile(`\berror\s*=\s*"?([A-Za-z0-9_.-]+)"?`)

// ChallengeError is the error of a WWW-Authenticate challenge (RFC 6750 §3), or "".
// Kept for older callers: ParseChallenges and Decide read a header properly.
func ChallengeError(header string) string {
	if m := challengeError.FindStringSubmatch(header); m != nil {
		return m[1]
	}
	return ""
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func (t *Transport) isDPoP() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dpop
}

// params is Params with the scopes of a step-up, if one was made.
func (t *Transport) params() TokenParams {
	p := t.Params
	t.mu.Lock()
	if t.scopes != nil {
		p.Scopes = append([]string(nil), t.scopes...)
	}
	t.mu.Unlock()
	return p
}

// authorize sets the request's headers; it returns the token it used.
func (t *Transport) authorize(ctx context.Context, req *http.Request, p TokenParams, nonce string) (*Token, error) {
	c, err := Dial(t.Path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if !t.isDPoP() {
		tok, err := c.Token(ctx, p)
		if err != nil {
			return nil, err
		}
		if !tok.DPoPBound() {
			req.Header.Set("Authorization", tok.Authorization())
			return tok, nil
		}
		t.mu.Lock()
		t.dpop = true
		t.mu.Unlock()
	}
	tok, err := c.DPoPProof(ctx, p, req.Method, req.URL.String(), nonce)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "DPoP "+tok.AccessToken)
	req.Header.Set("DPoP", tok.Proof)
	return tok, nil
}

// What a retry was sent with, for the sentence of a retry that was refused too.
var retried = map[Action]string{
	SendNonce:  "a proof with its DPoP nonce",
	MoreScopes: "a token for more scopes",
	NewToken:   "a fresh token",
	Discover:   "a token from the authorization server its metadata names",
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	p := t.params()
	first := req.Clone(ctx) // a RoundTripper must not change the caller's request
	tok, err := t.authorize(ctx, first, p, "")
	if err != nil {
		if !t.Discoverable || !(IsCode(err, CodeInvalidParams) || IsCode(err, CodeUnknownProvider)) {
			closeBody(req)
			return nil, err
		}
		tok = nil // not discovered yet: the server's 401 will say where its metadata is
	}
	resp, err := t.base().RoundTrip(first)
	if err != nil {
		return nil, err
	}
	d := t.decide(resp, tok, p)
	if d == nil {
		return resp, nil
	}
	where := where(req.URL)
	sentence := fmt.Sprintf("%s refused the request with %s", where, d.Reason)
	switch {
	case d.Action == NoAction:
		return withReason(resp, first, sentence), nil
	case d.Action == UserAuthentication:
		discard(resp)
		return nil, t.userAuthentication(d, where, sentence)
	}
	second := req.Clone(ctx)
	if req.Body != nil && req.Body != http.NoBody {
		if req.GetBody == nil {
			return withReason(resp, first, sentence+", and its body is a stream that cannot be sent again"), nil
		}
		body, err := req.GetBody()
		if err != nil {
			return withReason(resp, first, sentence+", and its body cannot be read again"), nil
		}
		second.Body = body
	}
	if err := t.retryHeaders(ctx, d, tok, second, p); err != nil {
		discard(resp)
		closeBody(second)
		return nil, &RefusalError{URL: where, Reason: sentence, Err: err}
	}
	discard(resp)
	again, err := t.base().RoundTrip(second)
	if err != nil {
		return nil, err
	}
	if d2 := Decide(again.StatusCode, ParseChallenges(again.Header.Values("WWW-Authenticate")...), Sent{Token: true, DPoP: t.isDPoP()}); d2 != nil {
		withReason(again, second, fmt.Sprintf("%s refused the request again with %s, after %s", where, d2.Reason, retried[d.Action]))
	}
	return again, nil
}

// decide is what the answer to a request sent with tok (nil: without one) asks for.
func (t *Transport) decide(resp *http.Response, tok *Token, p TokenParams) *Decision {
	sent := Sent{Token: tok != nil, Scopes: p.Scopes, DPoP: t.isDPoP(), DPoPNonce: resp.Header.Get("DPoP-Nonce")}
	if len(sent.Scopes) == 0 && tok != nil && tok.Scope != nil {
		sent.Scopes = strings.Fields(*tok.Scope)
	}
	d := Decide(resp.StatusCode, ParseChallenges(resp.Header.Values("WWW-Authenticate")...), sent)
	if d != nil && d.Action == Discover && t.Params.Resource == "" {
		return &Decision{Reason: d.Reason + ", and no resource was given to discover", Error: d.Error}
	}
	return d
}

// retryHeaders sets the headers of the one retry d calls for.
func (t *Transport) retryHeaders(ctx context.Context, d *Decision, tok *Token, req *http.Request, p TokenParams) error {
	switch d.Action {
	case SendNonce:
		_, err := t.authorize(ctx, req, p, d.Nonce)
		return err
	case MoreScopes:
		// Kept for later requests once a token for them came; a refused step-up keeps none.
		wider := p
		wider.Scopes = d.Scopes
		if _, err := t.authorize(ctx, req, wider, ""); err != nil {
			return err
		}
		t.mu.Lock()
		t.scopes = append([]string(nil), d.Scopes...)
		t.mu.Unlock()
		return nil
	}
	if d.Action == Discover || tok != nil {
		c, err := Dial(t.Path)
		if err != nil {
			return err
		}
		defer c.Close()
		if d.Action == Discover {
			if _, err := c.Resolve(ctx, t.Params.Resource, d.ResourceMetadata); err != nil {
				return err
			}
		}
		if tok != nil {
			if _, err := c.RejectToken(ctx, tok.AccessToken); err != nil {
				return err
			}
		}
	}
	_, err := t.authorize(ctx, req, p, "")
	return err
}

func (t *Transport) userAuthentication(d *Decision, where, sentence string) error {
	var wanted []string
	if d.ACRValues != "" {
		wanted = append(wanted, "acr_values="+d.ACRValues)
	}
	if d.MaxAge != "" {
		wanted = append(wanted, "max_age="+d.MaxAge)
	}
	command := []string{"authctl", "login"}
	if t.Params.Resource != "" {
		command = append(command, "--resource", t.Params.Resource)
	} else if t.Params.Provider != "" {
		command = append(command, "--provider", t.Params.Provider)
	}
	for _, w := range wanted {
		command = append(command, "--param", w)
	}
	asks := ""
	if len(wanted) > 0 {
		asks = " with " + strings.Join(wanted, " and ")
	}
	return &UserAuthenticationError{URL: where, ACRValues: d.ACRValues, MaxAge: d.MaxAge, Reason: sentence,
		Message: fmt.Sprintf("%s: it asks for a new sign-in%s (RFC 9470), which authbrokerd does not ask the provider "+
			"for on a program's behalf: run `%s`, then try again", sentence, asks, shellJoin(command))}
}

// where is a request's URL for a sentence: without userinfo, query or fragment.
func where(u *url.URL) string {
	return u.Scheme + "://" + u.Host + u.EscapedPath()
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellJoin quotes a command line as Python's shlex.join does.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if shellSafe.MatchString(a) {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'"'"'`) + "'"
		}
	}
	return strings.Join(out, " ")
}

type reasonKey struct{}

// withReason leaves the sentence on resp, for RefusalReason.
func withReason(resp *http.Response, sent *http.Request, reason string) *http.Response {
	r := resp.Request
	if r == nil {
		r = sent
	}
	resp.Request = r.WithContext(context.WithValue(r.Context(), reasonKey{}, reason))
	return resp
}

// RefusalReason is the sentence a Transport left on a 401 or 403 it returned: what the
// server said, and after which retry, or why there was none ("https://api.example.com/v1
// refused the request again with 401 invalid_token: "revoked", after a fresh token").
// "" for any other response. It never holds a token.
func RefusalReason(resp *http.Response) string {
	if resp == nil || resp.Request == nil {
		return ""
	}
	s, _ := resp.Request.Context().Value(reasonKey{}).(string)
	return s
}

// discard reads a little of a response that is not returned (so that its connection can
// be used again) and closes it.
func discard(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
