package authbroker

// WWW-Authenticate challenges (RFC 9110 §11.6.1), and what a 401 or 403 answer's Bearer
// or DPoP challenge asks a client to do (RFC 6750 §3, RFC 9728 §5.1, RFC 9470, RFC 9449
// §7.1 and §9). The same reading and the same decisions as clients/python's
// authbroker.challenges. No input makes the parser panic.

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Challenge is one challenge of a WWW-Authenticate header: Scheme lowercased (schemes
// are case-insensitive), Params with lowercased names and unescaped values, or Token68
// for a scheme that takes one.
type Challenge struct {
	Scheme  string
	Params  map[string]string
	Token68 string
}

func isTchar(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func isToken68Char(c byte) bool {
	switch {
	case c >= '0' && c <= '9', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return true
	}
	return strings.IndexByte("-._~+/", c) >= 0
}

func isOWS(c byte) bool { return c == ' ' || c == '\t' }

func skipOWS(s string, i int) int {
	for i < len(s) && isOWS(s[i]) {
		i++
	}
	return i
}

// tokenEnd is the end of the token at s[i] (i when there is none).
func tokenEnd(s string, i int) int {
	for i < len(s) && isTchar(s[i]) {
		i++
	}
	return i
}

// quoted reads the quoted-string at s[i] == '"': its value and end, ok false when it is
// unterminated (end is then len(s)).
func quoted(s string, i int) (string, int, bool) {
	var out strings.Builder
	i++
	for i < len(s) {
		c := s[i]
		if c == '"' {
			return out.String(), i + 1, true
		}
		if c == '\\' && i+1 < len(s) {
			i++
			c = s[i]
		}
		out.WriteByte(c)
		i++
	}
	return "", len(s), false
}

// nextElement is past the next comma outside a quoted-string (the recovery from a
// malformed element).
func nextElement(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case '"':
			_, i, _ = quoted(s, i)
		case ',':
			return i + 1
		default:
			i++
		}
	}
	return i
}

func atEndOfElement(s string, i int) bool {
	i = skipOWS(s, i)
	return i >= len(s) || s[i] == ','
}

// paramValue reads the token or quoted-string at s[i]: ok false if there is none.
func paramValue(s string, i int) (string, int, bool) {
	if i < len(s) && s[i] == '"' {
		return quoted(s, i)
	}
	if j := tokenEnd(s, i); j > i {
		return s[i:j], j, true
	}
	return "", i, false
}

// token68End is the end of the token68 at s[i] (i when there is none).
func token68End(s string, i int) int {
	j := i
	for j < len(s) && isToken68Char(s[j]) {
		j++
	}
	if j == i {
		return i
	}
	for j < len(s) && s[j] == '=' {
		j++
	}
	return j
}

// ParseChallenges reads the challenges of WWW-Authenticate values (a response may carry
// the header several times: pass resp.Header.Values("WWW-Authenticate")). Elements that do
// not parse are skipped, and so are params that follow a scheme that did not parse; a
// param a challenge repeats keeps its first value.
func ParseChallenges(values ...string) []Challenge {
	s := strings.Join(values, ", ")
	var challenges []Challenge
	current := -1 // the index of the challenge params go to; -1: none
	i := 0
	for i < len(s) {
		i = skipOWS(s, i)
		if i < len(s) && s[i] == ',' {
			i++
			continue
		}
		j := tokenEnd(s, i)
		if j == i {
			current, i = -1, nextElement(s, i)
			continue
		}
		name := s[i:j]
		k := skipOWS(s, j)
		if k < len(s) && s[k] == '=' { // an auth-param of the current challenge
			value, end, ok := paramValue(s, skipOWS(s, k+1))
			if current >= 0 && ok && atEndOfElement(s, end) {
				key := strings.ToLower(name)
				if _, seen := challenges[current].Params[key]; !seen {
					challenges[current].Params[key] = value
				}
			}
			i = nextElement(s, end)
			continue
		}
		// A new challenge: its scheme, then 1*SP and a token68 or its first param.
		if j < len(s) && !isOWS(s[j]) && s[j] != ',' {
			current, i = -1, nextElement(s, j)
			continue
		}
		if t := token68End(s, k); k > j && t > k && atEndOfElement(s, t) { // `name=` before a comma is no param
			challenges = append(challenges, Challenge{Scheme: strings.ToLower(name), Params: map[string]string{}, Token68: s[k:t]})
			current, i = -1, nextElement(s, t) // a token68 takes no params
			continue
		}
		challenges = append(challenges, Challenge{Scheme: strings.ToLower(name), Params: map[string]string{}})
		current = len(challenges) - 1
		i = k
	}
	return challenges
}

// -- What a 401 or 403 asks for ----------------------------------------------------------

// Action is what a 401 or 403 answer asks the client to do.
type Action string

const (
	// NoAction: nothing to try.
	NoAction Action = ""
	// SendNonce: send again with a DPoP proof carrying Decision.Nonce (RFC 9449 §9).
	SendNonce Action = "nonce"
	// UserAuthentication: only a new sign-in with Decision.ACRValues and/or MaxAge helps
	// (RFC 9470); nothing is to be sent again before it.
	UserAuthentication Action = "user_authentication"
	// MoreScopes: send again with a token for Decision.Scopes, the union of the token's
	// and those the server names (RFC 6750 §3.1 insufficient_scope).
	MoreScopes Action = "more_scopes"
	// NewToken: reject the token and send again with a fresh one (invalid_token).
	NewToken Action = "new_token"
	// Discover: the resource's metadata, at Decision.ResourceMetadata or ("") its
	// well-known URL, names its authorization server (RFC 9728 §5.1): resolve it, then
	// send again with a token from there.
	Discover Action = "discover"
)

// Decision is what to do about a 401 or 403 answer. Reason says what the server answered,
// in words for an error or a log line (never with a token); Error is the challenge's
// error code.
type Decision struct {
	Action           Action
	Reason           string
	Error            string
	Scopes           []string
	Nonce            string
	ResourceMetadata string
	ACRValues        string
	MaxAge           string
}

// Sent describes the request a 401 or 403 answered, for Decide.
type Sent struct {
	Token     bool     // whether the request carried a token
	Scopes    []string // the token's scopes (Token.Scope, split at spaces)
	DPoP      bool     // whether the token is DPoP-bound
	DPoPNonce string   // the answer's DPoP-Nonce header
}

func printable(text string, limit int) string {
	var out []rune
	for _, r := range text {
		if r != utf8.RuneError && unicode.IsPrint(r) {
			out = append(out, r)
		}
	}
	if len(out) <= limit {
		return string(out)
	}
	return string(out[:limit]) + "…"
}

// describe puts a challenge in words: `401 invalid_token: "The access token expired"`.
func describe(status int, c *Challenge) string {
	if c == nil {
		return fmt.Sprintf("%d without a Bearer or DPoP challenge", status)
	}
	p := c.Params
	code, ok := p["error"]
	if !ok {
		return fmt.Sprintf("%d without an error code", status)
	}
	words := fmt.Sprintf("%d %s", status, printable(code, 64))
	if d := p["error_description"]; d != "" {
		words += `: "` + printable(d, 200) + `"`
	}
	var named []string
	for _, k := range []string{"scope", "acr_values", "max_age"} {
		if v := p[k]; v != "" {
			named = append(named, fmt.Sprintf(`%s "%s"`, k, printable(v, 200)))
		}
	}
	if len(named) > 0 {
		words += " (" + strings.Join(named, ", ") + ")"
	}
	return words
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Decide says what a 401 or 403 answer's challenges ask for; nil for another status.
//
// Only Bearer and DPoP challenges count, the scheme of the token first. An error code
// decides before resource_metadata: that says where the server's metadata is, not what
// is wrong with the token. A 401 to a request without a token asks for discovery, at the
// well-known URL when the challenge names none.
func Decide(status int, challenges []Challenge, sent Sent) *Decision {
	if status != 401 && status != 403 {
		return nil
	}
	first := "bearer"
	if sent.DPoP {
		first = "dpop"
	}
	var ours []*Challenge
	for i := range challenges {
		if c := &challenges[i]; c.Scheme == "bearer" || c.Scheme == "dpop" {
			ours = append(ours, c)
		}
	}
	sort.SliceStable(ours, func(a, b int) bool { return ours[a].Scheme == first && ours[b].Scheme != first })
	var c *Challenge
	for _, x := range ours {
		if x.Params["error"] != "" {
			c = x
			break
		}
	}
	if c == nil && len(ours) > 0 {
		c = ours[0]
	}
	reason := describe(status, c)
	code, hasCode := "", false
	if c != nil {
		code, hasCode = c.Params["error"]
	}
	metadata := ""
	for _, x := range ours {
		if m := x.Params["resource_metadata"]; m != "" {
			metadata = m
			break
		}
	}
	switch {
	case code == "use_dpop_nonce":
		if sent.DPoP && sent.DPoPNonce != "" {
			return &Decision{Action: SendNonce, Reason: reason, Error: code, Nonce: sent.DPoPNonce}
		}
		if sent.DPoP {
			return &Decision{Reason: reason + ", and no DPoP-Nonce header", Error: code}
		}
		return &Decision{Reason: reason + ", to a token that is no DPoP token", Error: code}
	case code == "insufficient_user_authentication":
		d := &Decision{Action: UserAuthentication, Reason: reason, Error: code}
		if acr := c.Params["acr_values"]; acr != "" {
			d.ACRValues = printable(acr, 200)
		}
		if age := c.Params["max_age"]; allDigits(age) {
			d.MaxAge = age
		}
		return d
	case code == "insufficient_scope":
		return moreScopes(reason, c.Params["scope"], sent.Scopes)
	case !sent.Token && status == 401 && (!hasCode || code == "invalid_token"):
		return &Decision{Action: Discover, Reason: reason, Error: code, ResourceMetadata: metadata}
	case code == "invalid_token":
		return &Decision{Action: NewToken, Reason: reason, Error: code}
	case !hasCode && metadata != "" && status == 401:
		return &Decision{Action: Discover, Reason: reason, ResourceMetadata: metadata}
	}
	return &Decision{Reason: reason, Error: code}
}

func moreScopes(reason, asked string, have []string) *Decision {
	const code = "insufficient_scope"
	if asked == "" {
		return &Decision{Reason: reason + ", naming no scope to ask for", Error: code}
	}
	held := map[string]bool{}
	var union []string
	for _, s := range have {
		if !held[s] {
			held[s] = true
			union = append(union, s)
		}
	}
	wanted := false
	for _, s := range strings.Fields(asked) {
		if !held[s] {
			held[s] = true
			union = append(union, s)
			wanted = true
		}
	}
	if !wanted {
		return &Decision{Reason: reason + ", and the token has those scopes already", Error: code}
	}
	return &Decision{Action: MoreScopes, Reason: reason, Error: code, Scopes: union}
}
