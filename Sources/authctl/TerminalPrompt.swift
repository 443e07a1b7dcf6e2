#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import BrokerClient
import BrokerProtocol

/// Asks the questions of a terminal sign-in on stderr and reads the answers from stdin:
/// from a terminal with echo off for secrets and codes, or line by line from a pipe.
enum TerminalPrompt {
    /// The terminal's settings while echo is off, restored by the Ctrl-C handler.
    nonisolated(unsafe) private static var saved = termios()
    nonisolated(unsafe) private static var echoOff = false

    /// The answer to `prompt`, without its newline. Throws when input ends first.
    static func read(_ prompt: LoginPrompt) throws(ClientError) -> String {
        let terminal = isatty(STDIN_FILENO) == 1
        // A kind this authctl does not know (a newer daemon's) is hidden too: safer for a secret.
        let hidden = prompt.kind != .text && terminal
        // Echo goes off before the question shows: an answer typed at once is not echoed.
        if hidden { hideInput() }
        // Answers from a pipe put no newline on the screen: each question gets its own line.
        Output.prompt("\(Output.safe(prompt.label)): " + (terminal ? "" : "\n"))
        let line = readLine(strippingNewline: true)
        if hidden {
            restore()
            Output.prompt("\n")  // the Enter the user typed was not echoed either
        }
        guard let line else {
            throw .io("the input ended before the sign-in's question was answered")
        }
        return line
    }

    private static func hideInput() {
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { return }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        echoOff = true
        // Ctrl-C while echo is off must not leave the terminal mute.
        signal(SIGINT) { _ in
            if TerminalPrompt.echoOff { tcsetattr(STDIN_FILENO, TCSANOW, &TerminalPrompt.saved) }
            _exit(130)
        }
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
    }

    private static func restore() {
        guard echoOff else { return }
        tcsetattr(STDIN_FILENO, TCSANOW, &saved)
        echoOff = false
        signal(SIGINT, SIG_DFL)
    }
}
