// Package authbroker is a client for authbrokerd, the per-user OAuth 2.0 / OpenID Connect
// token broker: JSON-RPC 2.0, one JSON text per line, on a Unix socket
// (docs/protocol.md). Standard library only.
//
//	tok, err := authbroker.GetToken(ctx, authbroker.TokenParams{Resource: "https://api.example.com"})
//	req.Header.Set("Authorization", tok.Authorization())
//
// or let a Transport do it for every request of an http.Client.
package authbroker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// DefaultTimeout is how long a call waits for its answer when its context has no
// deadline: a cold start and one refresh at a provider fit in it.
const DefaultTimeout = 15 * time.Second

// MaxResponseBytes is the longest answer line accepted; a real one is a few kilobytes.
const MaxResponseBytes = 1 << 20

// SocketPath is $AUTHBROKER_SOCKET, else $XDG_RUNTIME_DIR/authbroker/socket.
func SocketPath() (string, error) {
	if p := os.Getenv("AUTHBROKER_SOCKET"); p != "" {
		return p, nil
	}
	if r := os.Getenv("XDG_RUNTIME_DIR"); r != "" {
		return filepath.Join(r, "authbroker", "socket"), nil
	}
	return "", &ClientError{Kind: NoSocketPath,
		Message: "neither AUTHBROKER_SOCKET nor XDG_RUNTIME_DIR is set, so authbrokerd's socket cannot be found"}
}

// Conn is one connection to authbrokerd. Calls on it take turns (it is safe for
// concurrent use); open several for calls in parallel.
type Conn struct {
	Path    string
	Timeout time.Duration // for calls whose context has no deadline; 0: DefaultTimeout

	mu     sync.Mutex
	conn   *net.UnixConn
	reader *bufio.Reader
	// partial is the start of a line whose end had not come when a read ended.
	partial []byte
	nextID  int64
}

// Dial connects to the socket at path ("" = SocketPath()). Before anything is sent the
// socket's server must be this process's user (SO_PEERCRED).
func Dial(path string) (*Conn, error) {
	if path == "" {
		p, err := SocketPath()
		if err != nil {
			return nil, err
		}
		path = p
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &ClientError{Kind: DaemonNotRunning, Path: path, Message: notRunning(path)}
		}
		return nil, &ClientError{Kind: CannotConnect, Path: path,
			Message: fmt.Sprintf("cannot connect to authbrokerd on %s: %v", path, unwrapSyscall(err))}
	}
	uid, err := peerUID(c)
	if err != nil {
		c.Close()
		return nil, &ClientError{Kind: CannotConnect, Path: path,
			Message: fmt.Sprintf("cannot tell who serves %s: %v", path, err)}
	}
	if me := os.Geteuid(); uid != me {
		c.Close()
		return nil, &ClientError{Kind: WrongServer, Path: path, Message: fmt.Sprintf(
			"the socket %s is served by uid %d, not by you (uid %d), so nothing was sent", path, uid, me)}
	}
	return &Conn{Path: path, conn: c, reader: bufio.NewReader(c), nextID: 1}, nil
}

// notRunning says why nothing answers on path, and what to do. In an ssh session the
// daemon runs on the machine the user came from: a forward is missing, and starting one
// here is not the advice (docs/integrations.md, "Over ssh").
func notRunning(path string) string {
	if os.Getenv("SSH_CONNECTION") != "" {
		return fmt.Sprintf("nothing answers on %[1]s, and this is an ssh session: authbrokerd runs on the machine you "+
			"connect from, so check that this ssh connection forwards its socket here (`ssh -R "+
			"%[1]s:/run/user/UID/authbroker/socket …`, or RemoteForward in ~/.ssh/config) and that the "+
			"folder of %[1]s exists on this host (docs/integrations.md, \"Over ssh\")", path)
	}
	return fmt.Sprintf("authbrokerd is not running on %s: start it with `systemctl --user start authbroker.socket`", path)
}

// peerUID is the uid of the process serving the socket, as the kernel reports it.
func peerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return int(cred.Uid), nil
}

func unwrapSyscall(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// Close closes the connection; later calls fail with ConnectionLost.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeLocked()
}

func (c *Conn) closeLocked() error {
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

type request struct {
	JSONRPC string      `json:"jsonrpc"`
	ID      int64       `json:"id"`
	Method  string      `json:"method"`
	Params  interface{} `json:"params,omitempty"`
}

type response struct {
	Method *string         `json:"method"`
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

// Call sends method with params (nil: none) and decodes the answer's result into result
// (nil: ignore it). An error answer is an *RPCError; the rest are *ClientError. The call
// ends at ctx's deadline, else after c.Timeout (DefaultTimeout).
func (c *Conn) Call(ctx context.Context, method string, params, result interface{}) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return &ClientError{Kind: ConnectionLost, Path: c.Path,
			Message: fmt.Sprintf("the connection to authbrokerd on %s is closed; open a new one", c.Path)}
	}
	id := c.nextID
	c.nextID++
	line, err := json.Marshal(request{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return &ClientError{Kind: BadResponse, Message: fmt.Sprintf("cannot encode the %s request: %v", method, err)}
	}
	line = append(line, '\n')

	deadline, ok := ctx.Deadline()
	timeout := c.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	if !ok {
		deadline = time.Now().Add(timeout)
	} else {
		timeout = time.Until(deadline)
	}
	_ = c.conn.SetDeadline(deadline)
	// A cancelled context ends the wait too. The watcher is done before the call returns:
	// a context cancelled as its call returns (defer cancel()) must not move the deadline of
	// the connection's next call.
	stop := make(chan struct{})
	watched := make(chan struct{})
	defer func() {
		close(stop)
		<-watched
	}()
	go func(conn *net.UnixConn) {
		defer close(watched)
		select {
		case <-ctx.Done():
			_ = conn.SetDeadline(time.Unix(1, 0))
		case <-stop:
		}
	}(c.conn)

	if _, err := c.conn.Write(line); err != nil {
		return c.failure(ctx, method, timeout, err)
	}
	for {
		raw, err := c.readLine()
		if err != nil {
			return c.failure(ctx, method, timeout, err)
		}
		done, err := c.decode(raw, id, method, result)
		if done || err != nil {
			if e, ok := err.(*ClientError); ok && e.Kind == BadResponse {
				c.closeLocked() // the stream's position is unknown now
			}
			return err
		}
	}
}

// readLine returns the next whole line, without its "\n" (and a "\r" before it). The
// bytes of a line whose end has not come yet are kept for the next call: after a timeout the
// rest may still come, and a line the daemon never ends (it died) is a lost connection,
// never an answer.
func (c *Conn) readLine() ([]byte, error) {
	line := c.partial
	c.partial = nil
	for {
		chunk, err := c.reader.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxResponseBytes+2 {
			return nil, errTooLong
		}
		if err == nil {
			line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
			if len(line) > MaxResponseBytes {
				return nil, errTooLong
			}
			return line, nil
		}
		if err != bufio.ErrBufferFull {
			c.partial = line
			return nil, err
		}
	}
}

var errTooLong = errors.New("too long")

func (c *Conn) failure(ctx context.Context, method string, timeout time.Duration, err error) error {
	if ctx.Err() == context.Canceled {
		// The caller gave up: the connection stays usable, as after a timeout.
		return ctx.Err()
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		// The connection stays usable: a late answer is skipped by its id.
		return &ClientError{Kind: Timeout, Path: c.Path,
			Message: fmt.Sprintf("authbrokerd did not answer %s within %s", method, duration(timeout))}
	}
	c.closeLocked()
	if err == errTooLong {
		return &ClientError{Kind: BadResponse, Path: c.Path, Message: fmt.Sprintf(
			"authbrokerd answered something unexpected: a response line is longer than %d bytes", MaxResponseBytes)}
	}
	return &ClientError{Kind: ConnectionLost, Path: c.Path,
		Message: fmt.Sprintf("authbrokerd closed the connection on %s before answering %s", c.Path, method)}
}

func duration(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%g s", d.Seconds())
}

// decode reads one answer line: done when it is this call's answer.
func (c *Conn) decode(raw []byte, id int64, method string, result interface{}) (bool, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return false, nil
	}
	bad := func(format string, a ...interface{}) error {
		return &ClientError{Kind: BadResponse, Path: c.Path,
			Message: "authbrokerd answered something unexpected: " + fmt.Sprintf(format, a...)}
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return true, bad("the answer to %s is not a JSON-RPC response", method)
	}
	if r.Method != nil && len(r.Result) == 0 && r.Error == nil {
		return false, nil // a notification (an event, on a subscribed connection), no answer
	}
	var answerID *int64
	if len(r.ID) > 0 && string(r.ID) != "null" {
		var n int64
		if err := json.Unmarshal(r.ID, &n); err != nil {
			return true, bad("the answer to request %d carries id %s", id, r.ID)
		}
		answerID = &n
	}
	if answerID != nil && *answerID >= 1 && *answerID < id {
		return false, nil // a late answer to a call that timed out
	}
	if r.Error != nil {
		// JSON-RPC answers a request it could not read with id null: only ours is outstanding.
		if answerID != nil && *answerID != id {
			return true, bad("an error answer carries id %d instead of %d", *answerID, id)
		}
		return true, typed(r.Error)
	}
	if answerID == nil || *answerID != id {
		return true, bad("the answer to request %d carries id %s", id, string(r.ID))
	}
	if len(r.Result) == 0 {
		return true, bad("the answer to %s has neither result nor error", method)
	}
	if result != nil {
		if err := json.Unmarshal(r.Result, result); err != nil {
			return true, bad("the result of %s does not have the expected shape", method)
		}
	}
	return true, nil
}
