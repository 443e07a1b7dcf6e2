#if canImport(Glibc)
import Glibc
#endif
import BrokerProtocol
import QREncoder

/// The QR code beside a device sign-in's URL and code, so that a phone can open the page
/// (with the code filled in, when the provider gives `verification_uri_complete`).
enum DeviceQR {
    /// The lines that draw the code for `start`, or none: not a device sign-in, switched
    /// off (`--no-qr`, `$AUTHBROKER_NO_QR`), stderr (where the instructions go) not a
    /// terminal, or the terminal narrower than the code.
    static func lines(for start: LoginStartResult, enabled: Bool) -> [String] {
        guard enabled, let url = url(for: start),
              !switchedOff(getenv("AUTHBROKER_NO_QR").map { String(cString: $0) }),
              getenv("TERM").map({ String(cString: $0) }) != "dumb",
              let columns = terminalColumns(STDERR_FILENO),
              let code = QRCode.encode(url), code.terminalSize.columns <= columns
        else { return [] }
        return code.terminalLines()
    }

    /// What the code holds: the page with the code filled in when the provider gives it,
    /// else the page; nil for a sign-in that is not a device sign-in, and for a URL with
    /// control characters (shown as text only, made safe).
    static func url(for start: LoginStartResult) -> String? {
        guard start.userCode != nil, let url = start.verificationURIComplete ?? start.verificationURI,
              Output.safe(url) == url else { return nil }
        return url
    }

    /// `AUTHBROKER_NO_QR` set to anything but empty or `0` turns the code off.
    static func switchedOff(_ value: String?) -> Bool {
        guard let value else { return false }
        return !value.isEmpty && value != "0"
    }

    /// The width of the terminal `fd` is, or nil when it is none.
    private static func terminalColumns(_ fd: Int32) -> Int? {
        guard isatty(fd) == 1 else { return nil }
        var size = winsize()
        guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return Int(size.ws_col)
    }
}
