import BrokerCrypto
import BrokerProtocol
import Synchronization

/// The questions of a `terminal` sign-in: the sign-in's task asks (and waits), `login.wait`
/// hands the question out, `login.answer` brings the answer back. An answer goes straight
/// to the task that asked and is kept nowhere else, in a buffer wiped once it is used
/// (`SecretBytes`: it may be a password).
final class Conversation: Sendable {
    private struct State {
        var prompt: LoginPrompt?
        var answer: CheckedContinuation<SecretBytes?, Never>?
        var waiters: [CheckedContinuation<LoginPrompt?, Never>] = []
        var cancelled = false
        var finished = false
    }

    private let state = Mutex(State())

    /// Asks the user and waits for the answer; nil when the sign-in was cancelled.
    func ask(_ prompt: LoginPrompt) async -> SecretBytes? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<SecretBytes?, Never>) in
                let waiters = state.withLock { s -> [CheckedContinuation<LoginPrompt?, Never>]? in
                    guard !s.cancelled else { return nil }
                    s.prompt = prompt
                    s.answer = c
                    defer { s.waiters = [] }
                    return s.waiters
                }
                guard let waiters else { return c.resume(returning: nil) }
                for waiter in waiters { waiter.resume(returning: prompt) }
            }
        } onCancel: {
            let pending = state.withLock { s in
                s.cancelled = true
                s.prompt = nil
                defer { s.answer = nil }
                return s.answer
            }
            pending?.resume(returning: nil)
        }
    }

    /// Gives the answer to the question asked; false when no question is waiting.
    func answer(_ value: SecretBytes) -> Bool {
        let pending = state.withLock { s in
            s.prompt = nil
            defer { s.answer = nil }
            return s.answer
        }
        pending?.resume(returning: value)
        return pending != nil
    }

    /// The question waiting for an answer, as soon as there is one; nil once the sign-in
    /// is over (its outcome is then the task's result).
    func nextPrompt() async -> LoginPrompt? {
        await withCheckedContinuation { (c: CheckedContinuation<LoginPrompt?, Never>) in
            let now = state.withLock { s -> LoginPrompt?? in
                if let prompt = s.prompt { return .some(prompt) }
                if s.finished { return .some(nil) }
                s.waiters.append(c)
                return nil
            }
            if let now { c.resume(returning: now) }
        }
    }

    /// The sign-in is over: waiters for a question get nil.
    func finish() {
        let waiters = state.withLock { s in
            s.finished = true
            s.prompt = nil
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in waiters { waiter.resume(returning: nil) }
    }
}
