package authbroker

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// TokenParams chooses a token (token.get's params); zero members are left out.
type TokenParams struct {
	Resource string            `json:"resource,omitempty"`
	Scopes   []string          `json:"scopes,omitempty"`
	Provider string            `json:"provider,omitempty"`
	Account  string            `json:"account,omitempty"`
	MinTTL   *int              `json:"min_ttl,omitempty"`
	Params   map[string]string `json:"params,omitempty"`
	// WaitForSignIn (seconds): an account that needs a sign-in waits for the daemon's one
	// browser sign-in instead of failing with CodeLoginRequired (docs/sign-in.md).
	WaitForSignIn int `json:"wait_for_sign_in,omitempty"`
}

// Token is a token.get (or dpop.proof) answer. Its String never shows the token.
type Token struct {
	AccessToken string  `json:"access_token"`
	TokenType   string  `json:"token_type"`
	ExpiresAt   int64   `json:"expires_at"`
	Scope       *string `json:"scope"`
	Resource    *string `json:"resource"`
	Provider    string  `json:"provider"`
	Account     string  `json:"account"`
	// Proof is a DPoP proof for one request (dpop.proof only).
	Proof string `json:"proof,omitempty"`
}

// Authorization is the Authorization header's value: "Bearer …", or "DPoP …".
func (t *Token) Authorization() string { return t.TokenType + " " + t.AccessToken }

// DPoPBound reports whether the token must go with a DPoP proof (docs/dpop.md).
func (t *Token) DPoPBound() bool { return strings.EqualFold(t.TokenType, "DPoP") }

// Expires is ExpiresAt as a time.
func (t *Token) Expires() time.Time { return time.Unix(t.ExpiresAt, 0) }

func (t Token) String() string {
	return fmt.Sprintf("Token{type %s, provider %s, account %s, expires %d}", t.TokenType, t.Provider, t.Account, t.ExpiresAt)
}

// GoString keeps the token out of %#v too.
func (t Token) GoString() string { return t.String() }

func (t *Token) valid() error {
	if t.AccessToken == "" || t.TokenType == "" || t.Provider == "" {
		return &ClientError{Kind: BadResponse, Message: "authbrokerd answered something unexpected: the token answer lacks access_token, token_type or provider"}
	}
	return nil
}

// waitContext gives a call that waits for a sign-in its wait and a little more.
func waitContext(ctx context.Context, wait int) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || wait == 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Duration(wait+30)*time.Second)
}

// Token is token.get: an access token, from the daemon's cache or freshly refreshed.
func (c *Conn) Token(ctx context.Context, p TokenParams) (*Token, error) {
	ctx, cancel := waitContext(ctx, p.WaitForSignIn)
	defer cancel()
	var t Token
	if err := c.Call(ctx, "token.get", p, &t); err != nil {
		return nil, err
	}
	return &t, t.valid()
}

// DPoPProof is dpop.proof: the token and a fresh DPoP proof (RFC 9449) for one request.
// Send "Authorization: DPoP <AccessToken>" and "DPoP: <Proof>".
func (c *Conn) DPoPProof(ctx context.Context, p TokenParams, method, url, nonce string) (*Token, error) {
	ctx, cancel := waitContext(ctx, p.WaitForSignIn)
	defer cancel()
	params := struct {
		TokenParams
		HTM   string `json:"htm"`
		HTU   string `json:"htu"`
		Nonce string `json:"nonce,omitempty"`
	}{p, method, url, nonce}
	var t Token
	if err := c.Call(ctx, "dpop.proof", params, &t); err != nil {
		return nil, err
	}
	return &t, t.valid()
}

// RejectToken is token.reject: an API refused this token (HTTP 401). The daemon drops it
// and the next Token for its key refreshes. Reports whether it was still cached.
func (c *Conn) RejectToken(ctx context.Context, accessToken string) (bool, error) {
	var r struct {
		Dropped bool `json:"dropped"`
	}
	err := c.Call(ctx, "token.reject", map[string]string{"access_token": accessToken}, &r)
	return r.Dropped, err
}

// Resolution is what discovery.resolve answers: who issues a resource's tokens
// (RFC 9728), and where the broker stands with that authorization server.
type Resolution struct {
	Resource     string `json:"resource"`
	Provider     string `json:"provider"`
	Issuer       string `json:"issuer"`
	ResourceHost string `json:"resource_host"`
	IssuerHost   string `json:"issuer_host"`
	Trusted      bool   `json:"trusted"`
	SignedIn     bool   `json:"signed_in"`
	Configured   bool   `json:"configured"`
}

// Resolve is discovery.resolve: what the metadata of resource (at resourceMetadata, the
// URL a 401 named; "": its well-known URL) says. Nothing is sent to the authorization
// server. A server not trusted yet is answered Trusted false, or *UntrustedServerError;
// only the user trusts it (`authctl login --resource URL`): this library has no call
// for discovery.trust.
func (c *Conn) Resolve(ctx context.Context, resource, resourceMetadata string) (*Resolution, error) {
	params := map[string]string{"resource": resource}
	if resourceMetadata != "" {
		params["resource_metadata"] = resourceMetadata
	}
	var r Resolution
	if err := c.Call(ctx, "discovery.resolve", params, &r); err != nil {
		return nil, err
	}
	if r.Provider == "" {
		return nil, &ClientError{Kind: BadResponse, Path: c.Path,
			Message: "authbrokerd answered something unexpected: the discovery.resolve answer lacks 'provider'"}
	}
	if r.Resource != resource {
		return nil, &ClientError{Kind: BadResponse, Path: c.Path, Message: fmt.Sprintf(
			"authbrokerd answered something unexpected: discovery.resolve for %s answered for another resource", resource)}
	}
	return &r, nil
}

// SignIn is what login.start answers: the page to open, and whether a desktop
// notification shows it already.
type SignIn struct {
	LoginID          string `json:"login_id"`
	Provider         string `json:"provider"`
	AuthorizationURL string `json:"authorization_url"`
	Notified         bool   `json:"notified"`
	Joined           bool   `json:"joined"`
}

// StartSignIn is login.start with join: the provider's browser sign-in in progress, or a
// new one announced by a notification.
func (c *Conn) StartSignIn(ctx context.Context, provider string) (*SignIn, error) {
	var s SignIn
	params := map[string]interface{}{"join": true}
	if provider != "" {
		params["provider"] = provider
	}
	return &s, c.Call(ctx, "login.start", params, &s)
}

// Account is one entry of account.list.
type Account struct {
	Provider    string `json:"provider"`
	Subject     string `json:"subject"`
	Username    string `json:"username,omitempty"`
	State       string `json:"state"`
	DisplayName string `json:"display_name,omitempty"`
}

// Accounts is account.list.
func (c *Conn) Accounts(ctx context.Context) ([]Account, error) {
	var r struct {
		Accounts []Account `json:"accounts"`
	}
	err := c.Call(ctx, "account.list", nil, &r)
	return r.Accounts, err
}

// Options for GetToken.
type Options struct {
	Path string // the socket; "" = SocketPath()
	// OnSignIn, with Params.WaitForSignIn, is called with the sign-in to show before
	// the call waits for it (as `authctl --wait-for-sign-in` prints the page).
	OnSignIn func(*SignIn)
}

// GetToken connects, asks for a token and closes: the one call most programs need.
func GetToken(ctx context.Context, p TokenParams, opts ...Options) (*Token, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	c, err := Dial(o.Path)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if p.WaitForSignIn == 0 {
		return c.Token(ctx, p)
	}
	first := p
	first.WaitForSignIn = 0
	t, err := c.Token(ctx, first)
	if err == nil || !IsCode(err, CodeLoginRequired) {
		return t, err
	}
	if o.OnSignIn != nil {
		provider := p.Provider
		if provider == "" {
			provider = err.(*RPCError).Provider()
		}
		s, serr := c.StartSignIn(ctx, provider)
		if serr != nil {
			return nil, serr
		}
		o.OnSignIn(s)
	}
	return c.Token(ctx, p)
}
