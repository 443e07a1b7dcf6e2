import OAuth
import Synchronization

/// How far a provider's clock is from this computer's, as one token answer shows it, and
/// the one log line that says so per provider. A provider's clock counts twice: `exp` and
/// `iat` of its ID tokens (`[daemon] clock_skew`) and the `exp` of its JWT access tokens,
/// which resource servers read on their own clocks (`CachedToken.expiry`); the log line
/// is what tells an administrator which clock to correct before either bites.
struct ProviderClockSkew: Sendable, Equatable {
    /// Seconds the provider's clock is ahead of ours (negative: behind), beyond the time
    /// the request took.
    var seconds: Double
    /// What showed it: "its Date header" or "the iat of its access token".
    var source: String

    /// A difference smaller than this is not reported: a `Date` header and an `iat` are
    /// whole seconds, and NTP keeps clocks within far less.
    static let reported: Double = 5

    /// The skew an answer shows, for a request sent at `sentAt` and answered at
    /// `receivedAt` (Unix seconds, ours): the answer's `Date` header when it has one,
    /// otherwise the JWT access token's `iat` (which a provider that hands out a token it
    /// issued earlier makes look behind, hence second). Both are whole seconds taken while
    /// the provider worked on the request, so a clock that agrees with ours gives one
    /// between the floor of `sentAt` and `receivedAt`: only what lies outside counts.
    /// Nil when neither is there, or the difference is under `reported`.
    static func measured(date: Int64?, accessToken: String, sentAt: Double, receivedAt: Double) -> ProviderClockSkew? {
        let source: String
        let stamp: Double
        if let date {
            (stamp, source) = (Double(date), "its Date header")
        } else if accessToken.utf8.first == UInt8(ascii: "e"),
                  let iat = JWT.decodeClaims(accessToken)?["iat"]?.numberValue, iat.isFinite {
            (stamp, source) = (iat, "the iat of the access token it issued")
        } else {
            return nil
        }
        let earliest = sentAt.rounded(.down)
        let seconds = stamp < earliest ? stamp - earliest : stamp > receivedAt ? stamp - receivedAt : 0
        guard abs(seconds) >= reported else { return nil }
        return ProviderClockSkew(seconds: seconds, source: source)
    }

    /// The log line: "the clock of corp is 180 s behind this computer's (by its Date header)".
    func sentence(provider: String) -> String {
        let size = Int(abs(seconds).rounded())
        let way = seconds < 0 ? "behind" : "ahead of"
        let consequence = seconds < 0
            ? "its JWT access tokens are served only until their exp by this computer's clock, \(size) s less than they are issued for"
            : "its ID tokens are refused once the difference is more than [daemon] clock_skew"
        return "the clock of \(provider) is \(size) s \(way) this computer's (by \(source)): \(consequence); correct whichever clock is wrong (timedatectl shows this computer's)"
    }
}

/// The providers whose clock skew has been logged: once per provider while the daemon
/// runs, not once per refresh.
final class ClockSkewNotes: Sendable {
    private let noted = Mutex<Set<String>>([])

    /// True the first time for `provider` only.
    func first(for provider: String) -> Bool {
        noted.withLock { $0.insert(provider).inserted }
    }
}
