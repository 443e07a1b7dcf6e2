import CSecret
import Dispatch
import Synchronization

/// A `GCancellable` shared by a blocking libsecret call and whoever may abandon it
/// (the timeout, or the cancellation of the calling task).
///
/// `GCancellable` is thread-safe: `g_cancellable_cancel` may be called from any thread
/// while another thread runs the call. The reference is owned by this object, so it
/// stays alive as long as either side still holds the handle.
final class OperationCancellation: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<GCancellable>

    init() {
        pointer = g_cancellable_new()
    }

    deinit {
        g_object_unref(pointer)
    }

    /// Makes the running libsecret call return `G_IO_ERROR_CANCELLED` promptly
    /// (a pending unlock prompt is dismissed).
    func cancel() {
        g_cancellable_cancel(pointer)
    }

    var isCancelled: Bool {
        g_cancellable_is_cancelled(pointer) != 0
    }
}

/// Resumes a continuation at most once: whichever of the call and the timeout
/// comes first wins, the other is ignored.
private final class ResumeOnce<T: Sendable>: Sendable {
    private let continuation: Mutex<CheckedContinuation<Result<T, StoreError>, Never>?>

    init(_ continuation: CheckedContinuation<Result<T, StoreError>, Never>) {
        self.continuation = Mutex(continuation)
    }

    /// Whether the caller has its answer already.
    var isDone: Bool { continuation.withLock { $0 == nil } }

    /// Returns whether this call resumed the continuation.
    @discardableResult
    func resume(with result: Result<T, StoreError>) -> Bool {
        let taken = continuation.withLock { slot in
            let c = slot
            slot = nil
            return c
        }
        guard let taken else { return false }
        taken.resume(returning: result)
        return true
    }
}

/// A one-shot dispatch timer, rather than `Task.sleep`: cancelling it frees it at once
/// (a cancelled `Task.sleep` keeps its timer until the deadline), and it does not depend
/// on the cooperative thread pool being free.
private final class TimeoutTimer: @unchecked Sendable {
    // Dispatch sources are thread-safe; the property is never reassigned.
    private let source: any DispatchSourceTimer

    init(after timeout: Duration, on queue: DispatchQueue, handler: @escaping @Sendable () -> Void) {
        source = DispatchSource.makeTimerSource(queue: queue)
        source.schedule(deadline: BlockingCall.deadline(after: timeout))
        source.setEventHandler(handler: handler)
        source.activate()
    }

    func cancel() {
        source.cancel()
    }
}

/// Runs blocking libsecret calls off the caller's thread with a time limit.
enum BlockingCall {
    /// One serial queue for every libsecret call of the process. libsecret keeps
    /// process-wide state (one session bus connection, one `SecretService`), so
    /// calls are serialised; a call that hangs delays the ones behind it, which then
    /// time out on their own, instead of piling up threads.
    static let queue = DispatchQueue(label: "org.authbroker.secret-service", qos: .userInitiated)

    /// Where the timeouts fire; never blocked by a libsecret call.
    private static let timerQueue = DispatchQueue(label: "org.authbroker.secret-service.timeouts")

    /// Runs `body` on `queue` and waits at most `timeout` for it.
    ///
    /// On timeout this returns `StoreError.timedOut` at once and cancels the call's
    /// `GCancellable`; the thread finishes in the background and its result is dropped.
    /// Cancelling the calling task cancels the call the same way (its result is then
    /// whatever libsecret reports, normally "cancelled").
    ///
    /// A call that waits on the Secret Service's own prompt is answered as such
    /// (`SecretServicePrompts`): at once, with `.prompting` or `.locked`, and left running
    /// for the user's answer; while that prompt is open, this answers the same at once.
    /// A call whose caller has its answer before the call's turn comes is not made.
    static func run<T: Sendable>(
        timeout: Duration,
        _ body: @escaping @Sendable (OperationCancellation) -> Result<T, StoreError>
    ) async throws(StoreError) -> T {
        let prompts = SecretServicePrompts.shared
        if let asking = prompts.asking { throw asking }
        let cancellation = OperationCancellation()
        let seconds = wholeSeconds(timeout)
        let result: Result<T, StoreError> = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, StoreError>, Never>) in
                let once = ResumeOnce(continuation)
                let timer = TimeoutTimer(after: timeout, on: timerQueue) {
                    if let asking = prompts.asking {
                        // The prompt's own limit ends the call that waits on it.
                        once.resume(with: .failure(asking))
                    } else if once.resume(with: .failure(.timedOut(seconds: seconds))) {
                        cancellation.cancel()
                    }
                }
                queue.async {
                    guard !once.isDone else { return }
                    prompts.begin(.init(answer: { once.resume(with: .failure($0)) }, cancel: { cancellation.cancel() }))
                    let outcome = body(cancellation)
                    prompts.end()
                    timer.cancel()
                    once.resume(with: outcome)
                }
            }
        } onCancel: {
            cancellation.cancel()
        }
        return try result.get()
    }

    /// The dispatch time `timeout` from now (a negative timeout is now; one too long to
    /// count in nanoseconds is never).
    static func deadline(after timeout: Duration) -> DispatchTime {
        let (seconds, attoseconds) = timeout.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) {
            return .now()
        }
        let (nanoseconds, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow || nanoseconds > Int64(Int.max) / 2 {
            return .distantFuture
        }
        return .now() + .nanoseconds(Int(nanoseconds + attoseconds / 1_000_000_000))
    }

    /// `timeout` in whole seconds, rounded up, for the user-facing message.
    static func wholeSeconds(_ timeout: Duration) -> Int {
        let (seconds, attoseconds) = timeout.components
        return max(1, Int(seconds) + (attoseconds > 0 ? 1 : 0))
    }
}
