package authbroker

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
)

// Transport is an http.RoundTripper that adds a token from authbrokerd to each request:
// "Authorization: Bearer …", or for a DPoP-bound token "Authorization: DPoP …" and a
// fresh DPoP proof for that request. A 401 whose WWW-Authenticate says
// error="invalid_token" makes it reject the token (token.reject) and send the request
// once more with a new one; error="use_dpop_nonce" with a DPoP-Nonce header, once more
// with a proof carrying that nonce. A request whose body cannot be sent again (no
// GetBody) is not retried.
//
//	client := &http.Client{Transport: &authbroker.Transport{Params: authbroker.TokenParams{Resource: "https://api.example.com"}}}
type Transport struct {
	Params TokenParams
	Path   string            // the socket; "" = SocketPath()
	Base   http.RoundTripper // nil: http.DefaultTransport

	mu   sync.Mutex
	dpop bool // learnt from the first answer: a provider's tokens are all bound or none is
}

var challengeError = regexp.MustCompile(`\berror\s*=\s*"?([A-Za-z0-9_.-]+)"?`)

// ChallengeError is the error of a WWW-Authenticate challenge (RFC 6750 §3), or "".
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

// authorize sets the request's headers; it returns the token it used.
func (t *Transport) authorize(ctx context.Context, req *http.Request, nonce string) (string, error) {
	c, err := Dial(t.Path)
	if err != nil {
		return "", err
	}
	defer c.Close()
	t.mu.Lock()
	dpop := t.dpop
	t.mu.Unlock()
	if !dpop {
		tok, err := c.Token(ctx, t.Params)
		if err != nil {
			return "", err
		}
		if !tok.DPoPBound() {
			req.Header.Set("Authorization", tok.Authorization())
			return tok.AccessToken, nil
		}
		t.mu.Lock()
		t.dpop = true
		t.mu.Unlock()
	}
	tok, err := c.DPoPProof(ctx, t.Params, req.Method, req.URL.String(), nonce)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "DPoP "+tok.AccessToken)
	req.Header.Set("DPoP", tok.Proof)
	return tok.AccessToken, nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	first := req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	token, err := t.authorize(req.Context(), first, "")
	if err != nil {
		closeBody(req)
		return nil, err
	}
	resp, err := t.base().RoundTrip(first)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	why := ChallengeError(resp.Header.Get("WWW-Authenticate"))
	nonce := resp.Header.Get("DPoP-Nonce")
	t.mu.Lock()
	dpop := t.dpop
	t.mu.Unlock()
	retry := why == "invalid_token" || (why == "use_dpop_nonce" && nonce != "" && dpop)
	if !retry || (req.Body != nil && req.Body != http.NoBody && req.GetBody == nil) {
		return resp, nil
	}
	second := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return resp, nil
		}
		second.Body = body
	}
	if why == "invalid_token" {
		nonce = ""
		c, err := Dial(t.Path)
		if err != nil {
			return resp, nil
		}
		_, err = c.RejectToken(req.Context(), token)
		c.Close()
		if err != nil {
			return resp, nil
		}
	}
	if _, err := t.authorize(req.Context(), second, nonce); err != nil {
		return resp, nil
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return t.base().RoundTrip(second)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
