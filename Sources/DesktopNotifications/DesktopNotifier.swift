#if canImport(Glibc)
import Glibc
#endif
import BrokerCore
import BrowserLaunch
import CGio
import Dispatch
import Logging
import Synchronization

/// Announces sign-ins on demand with a desktop notification (org.freedesktop.Notifications
/// over the session bus, GIO's GDBus) whose "Sign in" action opens the sign-in page in the
/// user's browser, and asks `confirm = true` rules' questions with Allow and Deny. The
/// notifications name the program that asks, the provider and the resource only: never a
/// token or a code.
public final class DesktopNotifier: SignInAnnouncing, CallerConfirming, ServerTrustAsking {
    private struct State {
        /// The bus connection, made on first use; nil until then or while there is no bus.
        var notifier: Handle?
        /// The page each shown notification's action opens, by notification id.
        var pages: [UInt32: String] = [:]
        /// The questions shown and not answered yet, by notification id.
        var questions: [UInt32: Question] = [:]
        /// The questions being asked (shown or being shown, not answered yet), by program.
        var shares = QuestionShares()
        /// Signals for ids not known yet (`EarlySignals`).
        var early = EarlySignals()
    }

    /// A shown question: waiting for its asker, or answered before the asker waited.
    private enum Question {
        case shown
        case waiting(CheckedContinuation<ConfirmAnswer, Never>)
        case answered(ConfirmAnswer)
    }

    /// The C notifier: made once, used from the notification queue, never freed (it lives
    /// as long as the daemon), so the pointer may cross threads.
    private struct Handle: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<AuthbrokerNotifier>
    }

    private let state = Mutex(State())
    /// Where the blocking D-Bus calls run, one at a time, never on an event loop.
    private let queue = DispatchQueue(label: "org.authbroker.notifications")
    /// Goes before the browser command (see `init`).
    private let launcher: [String]
    private let logger: Logger
    /// How long the notification server may take to answer.
    static let callTimeoutMilliseconds: Int32 = 5000

    /// `launcher` goes before the browser command: under systemd, `systemd-run --user …`,
    /// so the browser starts as its own unit, outside the daemon's sandbox and cgroup.
    public init(launcher: [String] = [], logger: Logger) {
        self.launcher = launcher
        self.logger = logger
    }

    /// Shows a notice the user need not answer (the secret store waiting on its own
    /// prompt); whether a notification server showed it. Text is escaped here.
    @discardableResult
    public func tell(summary: String, body: String, seconds: Int = 60) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            queue.async {
                guard let notifier = self.connected() else { return continuation.resume(returning: false) }
                var error: UnsafeMutablePointer<GError>?
                let id = authbroker_notifier_tell(notifier, "authbroker", SignInPage.escape(summary), SignInPage.escape(body),
                                                  Int32(seconds * 1000), Self.callTimeoutMilliseconds, &error)
                if let error { g_error_free(error) }
                continuation.resume(returning: id != 0)
            }
        }
    }

    public func announce(_ signIn: PendingSignIn) async -> (any SignInAnnouncement)? {
        await withCheckedContinuation { (continuation: CheckedContinuation<(any SignInAnnouncement)?, Never>) in
            queue.async { continuation.resume(returning: self.show(signIn)) }
        }
    }

    private func show(_ signIn: PendingSignIn) -> (any SignInAnnouncement)? {
        guard let notifier = connected() else { return nil }
        let provider = SignInPage.escape(signIn.provider)  // the body may be read as markup
        let seconds = max(1, signIn.expiresAt - Double(time(nil)))
        let minutes = Int((seconds + 59) / 60)
        let who = signIn.program.map { SignInPage.escape($0.description) } ?? "A program"
        let body = "\(who) is waiting for you to sign in to \(provider). Choose Sign in to open the sign-in page in your browser"
            + " (it expires in \(minutes == 1 ? "1 minute" : "\(minutes) minutes"))."
        var error: UnsafeMutablePointer<GError>?
        let id = authbroker_notifier_notify(
            notifier, "authbroker", "Sign in to \(provider)", body, "sign-in", "Sign in",
            Int32(min(seconds * 1000, Double(Int32.max))), Self.callTimeoutMilliseconds, &error)
        guard id != 0 else {
            logger.notice("no desktop notification for the sign-in: the waiting programs show its page", metadata: [
                "provider": "\(signIn.provider)", "reason": "\(String(cString: authbroker_error_message(error)))",
            ])
            if let error { g_error_free(error) }
            return nil
        }
        let server = Self.server(notifier)
        let early = state.withLock { s -> [String?] in
            s.pages[id] = signIn.url
            return s.early.take(id: id, from: server)
        }
        for action in early { invoked(id: id, action: action, sender: server) }
        return Shown(id: id, notifier: self)
    }

    /// Questions that may wait for an answer at once: a program that opens connection after
    /// connection must not flood the desktop (each would ask), nor take every place from
    /// other programs (`QuestionShares`: 2 per program, 8 in all).
    static let maxOpenQuestions = QuestionShares.total

    public func confirm(_ question: ConfirmQuestion, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer {
        let who = SignInPage.escape(program?.description ?? "A program")
        let what = SignInPage.escape(question.tokenFor)
        let provider = SignInPage.escape(question.provider)
        var body = "\(who) asks for a token for \(what) of \(provider). Allow it only if you just started it."
            + (program?.forwarded == true ? " It came over a forwarded socket: the program that asks runs on the other host." : "")
        var prompt = Prompt(summary: "Allow a token for \(provider)?", body: "", allow: "Allow", kind: "a confirm rule's question")
        if let lease = question.lease {
            // The question names what a lease would cover: the program as the rules match
            // it (every process of that file, or the forward), and the resource.
            prompt.allow = "Allow once"
            prompt.lease = "Allow for \(lease.length)"
            body += " Allow once answers this connection only. Allow for \(SignInPage.escape(lease.length)): "
                + "\(SignInPage.escape(lease.holder.covers)), tokens for \(what) of \(provider), without asking again"
                + " (authctl grants lists it, authctl grants revoke ends it)."
        }
        prompt.body = body + " No answer within \(seconds) seconds denies it."
        return await ask(prompt, from: program, seconds: seconds)
    }

    /// A resource's metadata names an authorization server the user has not trusted, and a
    /// program waits for a sign-in there: the user is shown both hosts before anything is
    /// sent to the server.
    public func askTrust(_ request: TrustRequest, program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer {
        let who = SignInPage.escape(program?.description ?? "A program")
        let resource = SignInPage.escape(request.resourceHost), server = SignInPage.escape(request.issuerHost)
        let body = "\(who) wants a token for \(resource), which sends its users to sign in at \(server) (\(SignInPage.escape(request.issuer))). "
            + "authbroker has not used \(server) before: trusting it registers authbroker there and opens its sign-in page. "
            + "Trust it only if you know both. No answer within \(seconds) seconds trusts nothing."
        return await ask(Prompt(summary: "Trust \(server) for \(resource)?", body: body, allow: "Trust", kind: "the trust question"),
                         from: program, seconds: seconds)
    }

    /// What an Allow/Deny question shows.
    private struct Prompt {
        var summary: String
        var body: String
        var allow: String
        /// The label of the lease's action ("Allow for 15 minutes"), when one is offered.
        var lease: String?
        /// For the log line when nothing could be shown.
        var kind: String
    }

    /// What became of a question's showing.
    private enum Showing {
        case shown(UInt32)
        /// Nothing could be shown; why.
        case unavailable(String)
        /// Not shown: the server lets other programs answer it (what it is, and how).
        case answerableByOthers(String)
    }

    /// Shows an Allow/Deny question of `program` and waits for the answer, at most `seconds`.
    private func ask(_ question: Prompt, from program: RequestingProgram?, seconds: Int) async -> ConfirmAnswer {
        // Counted before the Notify call, so concurrent askers cannot all slip under it,
        // and until the answer (or why there is none) is the asker's.
        let share = program?.share
        if let refused = state.withLock({ $0.shares.take(for: share) }) {
            logger.notice("a question on the desktop refused: too many wait", metadata: [
                "program": "\(program?.description ?? "-")", "share": "\(share?.description ?? "-")", "answer": "\(refused)",
            ])
            return refused
        }
        defer { state.withLock { $0.shares.give(back: share) } }
        let shown = await withCheckedContinuation { (continuation: CheckedContinuation<Showing, Never>) in
            queue.async { continuation.resume(returning: self.show(question)) }
        }
        let id: UInt32
        switch shown {
        case .shown(let shownID): id = shownID
        case .unavailable(let why): return .unavailable(why)
        case .answerableByOthers(let server): return .answerableByOthers(server)
        }
        // No answer in time is a no; the question is taken back.
        let timer = Task {
            try? await Task.sleep(for: .seconds(seconds))
            if !Task.isCancelled { self.answered(id: id, .timedOut) }
        }
        let answer = await withCheckedContinuation { (continuation: CheckedContinuation<ConfirmAnswer, Never>) in
            let ready = state.withLock { s -> ConfirmAnswer? in
                if case .answered(let answer)? = s.questions[id] {
                    s.questions[id] = nil
                    return answer
                }
                s.questions[id] = .waiting(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
        timer.cancel()
        if answer != .dismissed { withdraw(id) }
        return answer
    }

    /// Shows the question; its id, or why it was not shown.
    private func show(_ question: Prompt) -> Showing {
        var shown: UInt32?
        defer {
            // Once shown, the question is in `questions` until it is answered (an answer
            // that came before this is kept there by `answered`).
            // A signal the server sent for it before Notify's answer reached us is its answer.
            let server = shown == nil ? nil : connected().flatMap(Self.server)
            let early = state.withLock { s -> [String?] in
                guard let shown else { return [] }
                if s.questions[shown] == nil { s.questions[shown] = .shown }
                return s.early.take(id: shown, from: server)
            }
            if let shown { for action in early { invoked(id: shown, action: action, sender: server) } }
        }
        guard let notifier = connected() else { return .unavailable("no session bus") }
        // A server any program of the user can make answer for the user (mako's
        // InvokeAction, …) would take the asking program's "allow" for the user's: such a
        // question is not shown, so nothing it says can be taken for a yes.
        if let server = authbroker_notifier_answerable_by_others(notifier, Self.callTimeoutMilliseconds) {
            let name = String(cString: server)
            logger.warning("\(question.kind) not asked: the notification server lets any program answer it", metadata: ["server": "\(name)"])
            return .answerableByOthers(name)
        }
        var error: UnsafeMutablePointer<GError>?
        // Never expires on the server's clock (0): the daemon's timer takes it back, so a
        // time-out is told as one rather than as a dismissal.
        let id = authbroker_notifier_ask_lease(notifier, "authbroker", question.summary, question.body, question.allow,
                                               question.lease, "Deny", 0, Self.callTimeoutMilliseconds, &error)
        guard id != 0 else {
            let reason = String(cString: authbroker_error_message(error))
            if let error { g_error_free(error) }
            logger.notice("no desktop notification for \(question.kind): the request is refused", metadata: ["reason": "\(reason)"])
            return .unavailable("no notification server answered: \(reason)")
        }
        // An answer that comes before the asker waits is kept for it (`defer` above).
        shown = id
        return .shown(id)
    }

    /// Hands a question's answer to its asker (or keeps it until the asker waits). Later
    /// answers to the same question are dropped.
    private func answered(id: UInt32, _ answer: ConfirmAnswer) {
        let waiter = state.withLock { s -> CheckedContinuation<ConfirmAnswer, Never>? in
            switch s.questions[id] {
            case .waiting(let continuation)?:
                s.questions[id] = nil
                return continuation
            case .shown?:
                s.questions[id] = .answered(answer)
                return nil
            case .answered?, nil:
                return nil
            }
        }
        waiter?.resume(returning: answer)
    }

    /// The session-bus connection, made now if there is none yet; nil without a bus.
    private func connected() -> UnsafeMutablePointer<AuthbrokerNotifier>? {
        if let handle = state.withLock({ $0.notifier }) { return handle.pointer }
        let onAction: authbroker_action_fn = { id, action, sender, user in
            guard let user else { return }
            Unmanaged<DesktopNotifier>.fromOpaque(user).takeUnretainedValue().invoked(
                id: id, action: action.map { String(cString: $0) }, sender: sender.map { String(cString: $0) })
        }
        var error: UnsafeMutablePointer<GError>?
        // The connection calls back into this object for as long as the process lives.
        guard let notifier = authbroker_notifier_new(onAction, Unmanaged.passRetained(self).toOpaque(), &error) else {
            logger.notice("no session bus for desktop notifications", metadata: ["reason": "\(String(cString: authbroker_error_message(error)))"])
            if let error { g_error_free(error) }
            return nil
        }
        let handle = Handle(pointer: notifier)
        state.withLock { $0.notifier = handle }
        return notifier
    }

    /// The unique bus name of the server that answered the last Notify.
    private static func server(_ notifier: UnsafeMutablePointer<AuthbrokerNotifier>) -> String? {
        guard let name = authbroker_notifier_server(notifier) else { return nil }
        defer { g_free(name) }
        return String(cString: name)
    }

    /// The user chose an action of one of our notifications, or (`action` nil) one was
    /// closed (on the notifier's thread, or on the asker's for a signal kept in `early`).
    /// Only the server's signals count: any client of the bus may send ActionInvoked.
    private func invoked(id: UInt32, action: String?, sender: String?) {
        let counts = state.withLock { s -> Bool in
            if s.questions[id] != nil || s.pages[id] != nil {
                // Decided here, under the lock that makes the id known, not when the signal
                // came: then Notify's answer may not have named the server yet, and the id
                // became known in between (clone run 25: an "allow" dropped so).
                return sender != nil && sender == s.notifier.flatMap { Self.server($0.pointer) }
            }
            if let sender { s.early.keep(id: id, action: action, sender: sender, now: DispatchTime.now().uptimeNanoseconds) }
            return false
        }
        guard counts else { return }
        if state.withLock({ $0.questions[id] != nil }) {
            switch action {
            case "allow": answered(id: id, .allowed)
            case "allow-lease": answered(id: id, .leased)
            case "deny": answered(id: id, .denied)
            case nil: answered(id: id, .dismissed)
            default: break  // a click on the body answers nothing
            }
            return
        }
        guard action == "default" || action == "sign-in", let page = state.withLock({ $0.pages[id] }) else { return }
        let launcher = self.launcher
        let logger = self.logger
        DispatchQueue.global(qos: .userInitiated).async {
            switch Browser.open(page, launcher: launcher) {
            case .opened(let command): logger.info("sign-in page opened from the notification", metadata: ["command": "\(command)"])
            case .failed(let why): logger.warning("the sign-in page could not be opened from the notification", metadata: ["reason": "\(why)"])
            case .unavailable: logger.warning("the sign-in page could not be opened from the notification: neither BROWSER nor a desktop session (DISPLAY, WAYLAND_DISPLAY) is in authbrokerd's environment")
            }
        }
    }

    fileprivate func withdraw(_ id: UInt32) {
        queue.async {
            let handle = self.state.withLock { s -> Handle? in
                s.pages[id] = nil
                return s.notifier
            }
            if let handle { authbroker_notifier_close(handle.pointer, id) }
        }
    }
}

/// One shown notification.
private struct Shown: SignInAnnouncement {
    let id: UInt32
    let notifier: DesktopNotifier

    func withdraw() async {
        notifier.withdraw(id)
    }
}

/// Signals (an action, or nil for closed) for notification ids the daemon does not know yet.
/// Notify is answered on GDBus's worker thread and its signals are delivered on the
/// notifier's: a server that shows a question and is answered at once (a user quick on the
/// button, a server that closes what it cannot show) can have its signal handled before the
/// asker has the id its Notify call returned, and a dropped answer would leave the program
/// waiting until the question's time ran out. The server names ids as it shows them, so a
/// signal for an id nobody knows is either another program's notification or ours on its way:
/// kept a few seconds, the last few only, with its sender, and taken only if that is the
/// server whose Notify answer named the id (the first Notify's signals come before the daemon
/// knows the server at all; another client's ActionInvoked never counts).
struct EarlySignals {
    static let kept = 32
    static let keptNanoseconds: UInt64 = 10_000_000_000

    private var signals: [(id: UInt32, action: String?, sender: String, at: UInt64)] = []

    mutating func keep(id: UInt32, action: String?, sender: String, now: UInt64) {
        signals.removeAll { now &- $0.at > Self.keptNanoseconds }
        if signals.count >= Self.kept { signals.removeFirst() }
        signals.append((id, action, sender, now))
    }

    /// The signals `server` sent for `id`, oldest first; none for `id` is kept any longer.
    mutating func take(id: UInt32, from server: String?) -> [String?] {
        let mine = signals.filter { $0.id == id && $0.sender == server }.map(\.action)
        signals.removeAll { $0.id == id }
        return mine
    }
}
