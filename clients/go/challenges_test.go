package authbroker

// The reading of WWW-Authenticate and the decisions: the same cases as clients/python's
// (Tests/IntegrationTests/test_client_challenges.py), so both clients do the same.

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

type ch = Challenge
type kv = map[string]string

func TestTheParserReadsRFC9110Challenges(t *testing.T) {
	for _, c := range []struct {
		header []string
		want   []Challenge
	}{
		{[]string{`Bearer realm="example", error="invalid_token", error_description="The access token expired"`},
			[]ch{{"bearer", kv{"realm": "example", "error": "invalid_token", "error_description": "The access token expired"}, ""}}},
		// RFC 9110 §11.6.1's own example: two challenges, an escaped quote, a token value.
		{[]string{`Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`},
			[]ch{{"newauth", kv{"realm": "apps", "type": "1", "title": `Login to "apps"`}, ""}, {"basic", kv{"realm": "simple"}, ""}}},
		{[]string{"Basic dXNlcjpwYXNz==, Bearer"}, []ch{{"basic", kv{}, "dXNlcjpwYXNz=="}, {"bearer", kv{}, ""}}},
		{[]string{"Negotiate abc/+~.-_=, DPoP algs=ES256"}, []ch{{"negotiate", kv{}, "abc/+~.-_="}, {"dpop", kv{"algs": "ES256"}, ""}}},
		{[]string{`Bearer error = invalid_token ,scope= "a b"`}, []ch{{"bearer", kv{"error": "invalid_token", "scope": "a b"}, ""}}},
		{[]string{`DPoP algs="ES256 PS256", error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof"`},
			[]ch{{"dpop", kv{"algs": "ES256 PS256", "error": "use_dpop_nonce", "error_description": "Resource server requires nonce in DPoP proof"}, ""}}},
		{[]string{`BEARER ERROR="x", Error="second"`}, []ch{{"bearer", kv{"error": "x"}, ""}}}, // names lowercased; first kept
		{[]string{`Bearer realm="a,b", scope="x"`}, []ch{{"bearer", kv{"realm": "a,b", "scope": "x"}, ""}}},
		{[]string{`Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`},
			[]ch{{"bearer", kv{"resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"}, ""}}},
		{[]string{`Bearer realm=""`}, []ch{{"bearer", kv{"realm": ""}, ""}}},
		{[]string{`Bearer a="\\"`}, []ch{{"bearer", kv{"a": `\`}, ""}}},
		{[]string{", ,Bearer,, Basic ,"}, []ch{{"bearer", kv{}, ""}, {"basic", kv{}, ""}}},
		// Malformed elements are skipped; what parses around them is kept.
		{[]string{`Bearer realm="unterminated`}, []ch{{"bearer", kv{}, ""}}},
		{[]string{"Bearer error=invalid token, scope=a"}, []ch{{"bearer", kv{"scope": "a"}, ""}}},
		{[]string{`error="orphan", Bearer`}, []ch{{"bearer", kv{}, ""}}},
		{[]string{`Bearer "x", error="not Bearer's"`}, []ch{{"bearer", kv{}, ""}}},
		{[]string{`Basic realm="a", Bad/scheme x, error="not Basic's"`}, []ch{{"basic", kv{"realm": "a"}, ""}}},
		{[]string{"Bearer =x, =, =="}, nil}, // "Bearer =x" is an auth-param (BWS) with no challenge before it
		{[]string{"Bearer  , =, =="}, []ch{{"bearer", kv{}, ""}}},
		{[]string{"Bearer realm="}, []ch{{"bearer", kv{}, "realm="}}},
		{[]string{""}, nil}, {[]string{",,,"}, nil}, {[]string{"   "}, nil}, {[]string{`"`}, nil}, {[]string{`\`}, nil},
		{[]string{"é Bearer"}, nil}, {nil, nil},
		// The header several times.
		{[]string{"Bearer error=a", `DPoP error="b"`}, []ch{{"bearer", kv{"error": "a"}, ""}, {"dpop", kv{"error": "b"}, ""}}},
	} {
		if got := ParseChallenges(c.header...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.header, got, c.want)
		}
	}
}

func TestNoHeaderMakesTheParserOrTheDecisionPanic(t *testing.T) {
	rng := rand.New(rand.NewSource(9110))
	pieces := []string{"Bearer", "DPoP", "Basic", "bearer", " ", "\t", ",", "=", `"`, `\`, "error", "invalid_token",
		"insufficient_scope", "scope", "resource_metadata", "a/b", "x==", "é", "\x00", ";", "realm", "max_age", "\xff"}
	for n := 0; n < 5000; n++ {
		var b strings.Builder
		for k := rng.Intn(15); k > 0; k-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		header := b.String()
		cs := ParseChallenges(header)
		for _, c := range cs {
			if c.Scheme == "" || c.Scheme != strings.ToLower(c.Scheme) {
				t.Fatalf("%q: scheme %q", header, c.Scheme)
			}
			for k := range c.Params {
				if k != strings.ToLower(k) {
					t.Fatalf("%q: param %q", header, k)
				}
			}
		}
		for _, status := range []int{401, 403} {
			if Decide(status, cs, Sent{Token: rng.Intn(2) == 0, Scopes: []string{"a"}, DPoP: true, DPoPNonce: "n"}) == nil {
				t.Fatal("no decision")
			}
		}
	}
}

func FuzzParseChallenges(f *testing.F) {
	for _, s := range []string{`Bearer error="invalid_token"`, `Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple"`,
		"Basic dXNlcjpwYXNz==, Bearer", `Bearer realm="unterminated`, `\`, `Bearer error="insufficient_scope", scope="a b"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		cs := ParseChallenges(header)
		Decide(401, cs, Sent{Token: true, DPoP: true, DPoPNonce: "n"})
		Decide(403, cs, Sent{})
	})
}

func TestWhatAChallengeAsksFor(t *testing.T) {
	for _, c := range []struct {
		status int
		header string
		sent   Sent
		action Action
		check  func(*Decision) bool
	}{
		{401, `Bearer error="invalid_token"`, Sent{Token: true}, NewToken, nil},
		{401, `Bearer realm="api"`, Sent{Token: true}, NoAction, nil},
		{401, `Bearer resource_metadata="https://r/.well-known/oauth-protected-resource"`, Sent{Token: true}, Discover,
			func(d *Decision) bool { return d.ResourceMetadata == "https://r/.well-known/oauth-protected-resource" }},
		// An error code decides before resource_metadata (RFC 9728 §5.1 names where, not what).
		{401, `Bearer error="invalid_token", resource_metadata="https://r/m"`, Sent{Token: true}, NewToken, nil},
		{401, `Bearer resource_metadata="https://r/m"`, Sent{}, Discover, func(d *Decision) bool { return d.ResourceMetadata == "https://r/m" }},
		{401, `Bearer realm="mcp"`, Sent{}, Discover, func(d *Decision) bool { return d.ResourceMetadata == "" }},
		{401, `Bearer error="invalid_token"`, Sent{}, Discover, nil},
		{403, `Bearer resource_metadata="https://r/m"`, Sent{Token: true}, NoAction, nil},
		{403, `Bearer error="insufficient_scope", scope="files:write files:read"`, Sent{Token: true, Scopes: []string{"files:read"}},
			MoreScopes, func(d *Decision) bool { return reflect.DeepEqual(d.Scopes, []string{"files:read", "files:write"}) }},
		{403, `Bearer error="insufficient_scope", scope="b"`, Sent{Token: true, Scopes: strings.Fields("a c")}, MoreScopes,
			func(d *Decision) bool { return reflect.DeepEqual(d.Scopes, []string{"a", "c", "b"}) }},
		{403, `Bearer error="insufficient_scope", scope="a"`, Sent{Token: true, Scopes: []string{"a"}}, NoAction, nil},
		{403, `Bearer error="insufficient_scope"`, Sent{Token: true, Scopes: []string{"a"}}, NoAction, nil},
		{401, `Bearer error="insufficient_user_authentication", acr_values="mfa phr", max_age="0"`, Sent{Token: true},
			UserAuthentication, func(d *Decision) bool { return d.ACRValues == "mfa phr" && d.MaxAge == "0" }},
		{401, `Bearer error="insufficient_user_authentication", max_age="soon"`, Sent{Token: true}, UserAuthentication,
			func(d *Decision) bool { return d.ACRValues == "" && d.MaxAge == "" }},
		{401, `DPoP error="use_dpop_nonce"`, Sent{Token: true, DPoP: true, DPoPNonce: "n1"}, SendNonce, func(d *Decision) bool { return d.Nonce == "n1" }},
		{401, `DPoP error="use_dpop_nonce"`, Sent{Token: true, DPoP: true}, NoAction, nil},
		{401, `DPoP error="use_dpop_nonce"`, Sent{Token: true, DPoPNonce: "n1"}, NoAction, nil},
		// The token's scheme first: a DPoP token heeds the DPoP challenge, a Bearer token the Bearer one.
		{401, `Bearer error="invalid_token", DPoP error="use_dpop_nonce"`, Sent{Token: true, DPoP: true, DPoPNonce: "n"}, SendNonce, nil},
		{401, `DPoP error="use_dpop_nonce", Bearer error="invalid_token"`, Sent{Token: true}, NewToken, nil},
		{401, `Basic realm="x", error="invalid_token"`, Sent{Token: true}, NoAction, nil},
		{401, "", Sent{Token: true}, NoAction, nil},
		{401, `Bearer error="invalid_request"`, Sent{Token: true}, NoAction, nil},
	} {
		cs := ParseChallenges(c.header)
		d := Decide(c.status, cs, c.sent)
		if d == nil || d.Action != c.action || (c.check != nil && !c.check(d)) {
			t.Errorf("%d %q %+v: got %+v, want %q", c.status, c.header, c.sent, d, c.action)
		}
		if Decide(200, cs, c.sent) != nil || Decide(500, cs, c.sent) != nil {
			t.Errorf("%q: a decision for another status", c.header)
		}
	}
}

func TestTheReasonSaysWhatTheServerAnsweredAndNothingUnprintable(t *testing.T) {
	d := Decide(403, ParseChallenges(`Bearer error="insufficient_scope", scope="admin", error_description="Needs`+"\x07"+` admin"`),
		Sent{Token: true, Scopes: []string{"admin"}})
	if want := `403 insufficient_scope: "Needs admin" (scope "admin"), and the token has those scopes already`; d.Reason != want {
		t.Errorf("got %q", d.Reason)
	}
	if d := Decide(401, ParseChallenges("Basic realm=x"), Sent{Token: true}); d.Reason != "401 without a Bearer or DPoP challenge" {
		t.Errorf("got %q", d.Reason)
	}
	long := []Challenge{{Scheme: "bearer", Params: kv{"error": strings.Repeat("x", 500)}}}
	if d := Decide(401, long, Sent{Token: true}); d.Reason != "401 "+strings.Repeat("x", 64)+"…" {
		t.Errorf("got %q", d.Reason)
	}
	if d := Decide(401, ParseChallenges(`DPoP error="use_dpop_nonce"`), Sent{Token: true}); d.Reason != "401 use_dpop_nonce, to a token that is no DPoP token" {
		t.Errorf("got %q", d.Reason)
	}
}
