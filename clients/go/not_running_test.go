package authbroker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No daemon on the path: in an ssh session the sentence names the missing forward, not
// systemctl (the daemon runs on the machine the user came from); outside one, systemctl.
func TestNothingListeningSaysWhatToDoInAndOutOfAnSSHSession(t *testing.T) {
	dir, err := os.MkdirTemp("", "ab-go-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "sock")

	t.Setenv("SSH_CONNECTION", "192.0.2.1 50000 192.0.2.2 22")
	_, err = Dial(path)
	if !IsKind(err, DaemonNotRunning) {
		t.Fatalf("want DaemonNotRunning, got %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "ssh session") || !strings.Contains(msg, "-R "+path) ||
		strings.Contains(msg, "systemctl") {
		t.Fatalf("over ssh: %s", msg)
	}

	t.Setenv("SSH_CONNECTION", "")
	_, err = Dial(path)
	if !IsKind(err, DaemonNotRunning) || !strings.Contains(err.Error(), "systemctl --user start authbroker.socket") {
		t.Fatalf("locally: %v", err)
	}
}
