package authbroker

import (
	"errors"
	"fmt"
)

// The daemon's JSON-RPC error codes (docs/protocol.md, "Errors").
const (
	CodeParseError             = -32700
	CodeInvalidRequest         = -32600
	CodeMethodNotFound         = -32601
	CodeInvalidParams          = -32602
	CodeInternalError          = -32603
	CodeLoginRequired          = -32001
	CodeForbiddenByPolicy      = -32002
	CodeProviderError          = -32003
	CodeProviderUnreachable    = -32004
	CodeSecretStoreUnavailable = -32005
	CodeUnknownProvider        = -32006
	CodeSignInFailed           = -32007
	CodeRequestTooLarge        = -32008
	CodeOverloaded             = -32009
	CodeConfiguration          = -32010
	CodeUntrustedServer        = -32011
)

// RPCError is an error the daemon answered: its code, its sentence for the user, and
// its data (provider, oauth_error, retry_after, limit). It never carries a token.
type RPCError struct {
	Code    int                    `json:"code"`
	Message string                 `json:"message"`
	Data    map[string]interface{} `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("authbrokerd answered error %d", e.Code)
	}
	return e.Message
}

// Provider is the provider the error is about, when the daemon named one.
func (e *RPCError) Provider() string { s, _ := e.Data["provider"].(string); return s }

// OAuthError is the provider's OAuth error code of a CodeProviderError.
func (e *RPCError) OAuthError() string { s, _ := e.Data["oauth_error"].(string); return s }

// RetryAfter is the seconds to wait after a CodeProviderUnreachable (-1: not given).
func (e *RPCError) RetryAfter() int {
	if n, ok := e.Data["retry_after"].(float64); ok {
		return int(n)
	}
	return -1
}

// UntrustedServerError is the daemon's -32011: the resource's metadata names an
// authorization server the user has not trusted yet, and nothing was sent to it. Its
// message is the daemon's sentence, which says to run `authctl login --resource URL`: that
// shows both hosts and asks. No program trusts a server on the user's behalf; this
// library never does. errors.As finds the *RPCError in it too, and IsCode its code.
type UntrustedServerError struct {
	RPC          *RPCError
	Resource     string
	Issuer       string
	ResourceHost string
	IssuerHost   string
}

func (e *UntrustedServerError) Error() string { return e.RPC.Error() }

// Unwrap gives the RPCError (code, message and data as the daemon answered them).
func (e *UntrustedServerError) Unwrap() error { return e.RPC }

// typed is the error for an error answer: an *UntrustedServerError for -32011, else the
// *RPCError itself.
func typed(e *RPCError) error {
	if e.Code != CodeUntrustedServer {
		return e
	}
	s := func(k string) string { v, _ := e.Data[k].(string); return v }
	return &UntrustedServerError{RPC: e, Resource: s("resource"), Issuer: s("issuer"),
		ResourceHost: s("resource_host"), IssuerHost: s("issuer_host")}
}

// UserAuthenticationError: a resource server asks for a new sign-in meeting ACRValues
// and/or MaxAge (RFC 9470 insufficient_user_authentication). The daemon does not ask a
// provider for those on a program's behalf: the message says which `authctl login` to
// run. URL is the request's (without query); Reason what the server said. The Transport
// returns it (wrapped by http.Client in a *url.Error: use errors.As) instead of the
// response.
type UserAuthenticationError struct {
	URL       string
	ACRValues string
	MaxAge    string
	Reason    string
	Message   string
}

func (e *UserAuthenticationError) Error() string { return e.Message }

// RefusalError: a resource server refused a request (401 or 403) and the one retry its
// challenge asks for could not be made, because a call to the daemon failed (Err: an
// *RPCError, an *UntrustedServerError, a *ClientError). Its message is Err's; Reason says
// what the server answered ("https://api.example.com/v1 refused the request with 401
// invalid_token"). errors.As finds Err's type through it.
type RefusalError struct {
	URL    string
	Reason string
	Err    error
}

func (e *RefusalError) Error() string { return e.Err.Error() }

func (e *RefusalError) Unwrap() error { return e.Err }

// IsCode reports whether err is an RPCError with that code:
//
//	if authbroker.IsCode(err, authbroker.CodeLoginRequired) { … }
func IsCode(err error, code int) bool {
	var rpc *RPCError
	return errors.As(err, &rpc) && rpc.Code == code
}

// ErrorKind says how reaching the daemon failed, for the errors that are no RPCError.
type ErrorKind int

const (
	// NoSocketPath: neither AUTHBROKER_SOCKET nor XDG_RUNTIME_DIR is set.
	NoSocketPath ErrorKind = iota + 1
	// DaemonNotRunning: nothing listens on the socket.
	DaemonNotRunning
	// CannotConnect: the socket exists but cannot be reached (permissions, path too long).
	CannotConnect
	// WrongServer: another user serves the socket; nothing was sent to it.
	WrongServer
	// ConnectionLost: reading or writing failed, or the daemon closed the connection
	// before it answered. The connection is closed.
	ConnectionLost
	// BadResponse: the answer is not a JSON-RPC response of the expected shape.
	BadResponse
	// Timeout: no answer within the call's time. The connection stays usable.
	Timeout
)

// ClientError is a failure on the way to the daemon or back. Message is one sentence.
type ClientError struct {
	Kind    ErrorKind
	Path    string
	Message string
}

func (e *ClientError) Error() string { return e.Message }

// IsKind reports whether err is a ClientError of that kind.
func IsKind(err error, kind ErrorKind) bool {
	var c *ClientError
	return errors.As(err, &c) && c.Kind == kind
}
