package authbroker

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// stubServing is a STUB daemon on a fresh socket: serve gets its one connection.
func stubServing(t *testing.T, serve func(conn net.Conn, r *bufio.Reader)) string {
	dir, err := os.MkdirTemp("", "ab-go-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		serve(conn, bufio.NewReader(conn))
	}()
	return path
}
